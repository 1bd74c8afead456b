"""Any message -> one perception holding the message itself (for small, low-rate topics).

Bytes fields are replaced by ``"<N bytes>"``; when the JSON text exceeds ``json_max_bytes``
only the field names are kept. Use with ``sample_every_s`` for chatty topics.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..config import BridgeConfig, TopicRule
from ..messages import RosMessage
from .base import PerMessageConverter

__all__ = ["JsonPerceptionConverter"]

_DESCRIPTION_CHARS = 200


class JsonPerceptionConverter(PerMessageConverter):
    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "json_perception")

    def convert(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        if not isinstance(msg.data, dict):
            raise TypeError("message data must be a dict")
        value = _jsonable(msg.data)
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
        payload: Any = value
        if len(text.encode("utf-8")) > self.config.json_max_bytes:
            payload = {"fields": sorted(value), "truncated": True, "json_bytes": len(text)}
        short = text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 3] + "..."
        return f"{msg.msgtype} on {self.topic}: {short}", payload, {}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)  # JSON has no NaN / Infinity
    return value
