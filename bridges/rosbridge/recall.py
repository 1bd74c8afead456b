"""ROS nodes ask robotmem for a recall with nothing but ``std_msgs/String``.

A node publishes a JSON request on ``/robotmem/recall/request``::

    {"id": "nav-42", "query": "docking failed", "n": 5,
     "context_filter": {"robot.id": "tb3"}, "spatial_sort": {"field": "spatial.position", "target": [1, 2, 0]}}

and the bridge publishes the answer, carrying the same ``id``, on ``/robotmem/recall/response``::

    {"id": "nav-42", "mode": "hybrid", "count": 2, "results": [...]}      # or
    {"id": "nav-42", "error": {"code": "validation_error", "field": "n", "message": "..."}}

Every ROS install has ``std_msgs/String``, so the node needs no robotmem package; it
matches answers to requests by ``id`` (several nodes may share the topics). Requests are
answered on a worker thread of their own, so a slow recall never stalls ingestion.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from robotmem.errors import RobotMemError, ValidationError

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["REQUEST_TOPIC", "RESPONSE_TOPIC", "RecallResponder", "answer_request"]

LOG = logging.getLogger("bridges.rosbridge.recall")
REQUEST_TOPIC = "/robotmem/recall/request"
RESPONSE_TOPIC = "/robotmem/recall/response"
STRING_TYPE = "std_msgs/String"
#: request keys passed to Memory.recall, with their accepted JSON types
_RECALL_KEYS: dict[str, tuple[type, ...]] = {
    "query": (str,),
    "n": (int,),
    "min_confidence": (int, float),
    "collection": (str,),
    "session_id": (str,),
    "context_filter": (dict, str),
    "spatial_sort": (dict, str),
    "since": (str, int, float),
    "until": (str, int, float),
}


def answer_request(memory: Memory, text: Any, default_collection: str) -> dict[str, Any]:
    """The response object for one request text; never raises."""
    request_id: Any = None
    try:
        request = _parse(text)
        request_id = request.pop("id")
        kwargs = _recall_kwargs(request, default_collection)
        result = memory.recall(**kwargs)
        return {"id": request_id, "mode": result.get("mode"), "count": result.get("count"),
                "results": result.get("results", [])}
    except RobotMemError as exc:
        return {"id": request_id, "error": exc.to_dict()}
    except Exception as exc:  # the bridge must answer (and survive) whatever recall does
        LOG.exception("recall request %r failed", request_id)
        return {"id": request_id, "error": {"code": "internal_error", "field": None, "message": str(exc)}}


def _parse(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ValidationError("data: the request must be JSON text in std_msgs/String.data", field="data")
    try:
        request = json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"data: not valid JSON ({exc})", field="data") from exc
    if not isinstance(request, dict):
        raise ValidationError("data: the request must be a JSON object", field="data")
    request_id = request.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool) or request_id == "":
        raise ValidationError("id: every request needs an id (string or integer) to match the answer", field="id")
    return request


def _recall_kwargs(request: dict[str, Any], default_collection: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"collection": default_collection}
    for key, value in request.items():
        accepted = _RECALL_KEYS.get(key)
        if accepted is None:
            raise ValidationError(f"{key}: unknown request field (known: id, {', '.join(_RECALL_KEYS)})", field=key)
        if isinstance(value, bool) or not isinstance(value, accepted):
            names = " or ".join(t.__name__ for t in accepted)
            raise ValidationError(f"{key}: expected {names}, got {type(value).__name__}", field=key)
        kwargs[key] = value
    return kwargs


class RecallResponder:
    """Answers requests from ``request_topic`` on ``response_topic`` through ``publish``."""

    def __init__(self, memory: Memory | None, publish: Callable[[str, dict[str, Any]], bool], *, collection: str,
                 request_topic: str = REQUEST_TOPIC, response_topic: str = RESPONSE_TOPIC,
                 capacity: int = 100) -> None:
        self.memory = memory
        self.collection = collection
        self.request_topic = request_topic
        self.response_topic = response_topic
        self._publish = publish
        self._capacity = capacity
        self._pending: list[Any] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="robotmem-recall", daemon=True)
        #: requests that arrived, answered or dropped (the silent-topic watch reads it)
        self.received = 0
        self.answered = 0
        self.dropped = 0
        self.unsent = 0

    def start(self) -> None:
        self._thread.start()

    def on_message(self, msg: Any) -> None:
        """Subscriber callback (roslibpy's thread): queue the request, never block."""
        with self._cond:
            self.received += 1
            if self._stopping or len(self._pending) >= self._capacity:
                self.dropped += 1
                return
            self._pending.append(msg)
            self._cond.notify()

    def stop(self, timeout: float = 10.0) -> None:
        """Answer what is queued, then end the worker."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopping)
                if not self._pending:
                    return
                msg = self._pending.pop(0)
            text = msg.get("data") if isinstance(msg, dict) else None
            assert self.memory is not None, "the bridge answers recalls only with a store (not in a dry run)"
            response = answer_request(self.memory, text, self.collection)
            with self._cond:
                self.answered += 1
            # default=str: recall results are JSON already; this only guards odd values.
            if not self._publish(self.response_topic, {"data": json.dumps(response, default=str)}):
                with self._cond:
                    self.unsent += 1
