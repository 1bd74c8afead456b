"""sensor_msgs/LaserScan -> a compact summary (no raw ranges).

Summary: number of beams and valid returns (finite, within [range_min, range_max]),
min / max / mean valid range, the bearing of the nearest return, the angle range, and
``laser_bins`` sectors holding the nearest valid range of each sector (-1: no return).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..config import BridgeConfig, TopicRule
from ..messages import RosMessage
from .base import PerMessageConverter

__all__ = ["LaserScanConverter"]


class LaserScanConverter(PerMessageConverter):
    embed_descriptions = False  # templated numbers: full text, filters and space find it

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "laser_scan")

    def convert(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        data = msg.data
        ranges = np.asarray(data["ranges"], dtype=np.float64)
        angle_min, angle_increment = float(data["angle_min"]), float(data["angle_increment"])
        range_min, range_max = float(data["range_min"]), float(data["range_max"])
        if ranges.ndim != 1:
            raise ValueError("LaserScan.ranges must be a flat list of numbers")
        valid = np.isfinite(ranges) & (ranges >= range_min) & (ranges <= range_max)
        summary: dict[str, Any] = {
            "beams": len(ranges),
            "valid": int(valid.sum()),
            "angle_min": angle_min,
            "angle_max": float(data.get("angle_max", angle_min + angle_increment * max(len(ranges) - 1, 0))),
            "range_min": range_min,
            "range_max": range_max,
            "sectors": _sectors(ranges, valid, self.config.laser_bins),
        }
        if valid.any():
            values = ranges[valid]
            nearest = int(np.flatnonzero(valid)[int(np.argmin(values))])
            summary.update(
                {
                    "min_range": float(values.min()),
                    "max_range": float(values.max()),
                    "mean_range": float(values.mean()),
                    "nearest_bearing_rad": angle_min + nearest * angle_increment,
                }
            )
            text = (
                f"laser scan {self.topic}: nearest obstacle {summary['min_range']:.2f} m at "
                f"{math.degrees(summary['nearest_bearing_rad']):.0f} deg, mean {summary['mean_range']:.2f} m, "
                f"{summary['valid']}/{summary['beams']} returns"
            )
        else:
            text = f"laser scan {self.topic}: no valid returns ({summary['beams']} beams)"
        return text, summary, {"perception": {"beams": summary["beams"], "valid": summary["valid"]}}


def _sectors(ranges: np.ndarray, valid: np.ndarray, bins: int) -> list[float]:
    if len(ranges) == 0:
        return []
    masked = np.where(valid, ranges, np.inf)
    sectors = [float(part.min()) if len(part) else math.inf for part in np.array_split(masked, min(bins, len(ranges)))]
    return [round(v, 4) if math.isfinite(v) else -1.0 for v in sectors]
