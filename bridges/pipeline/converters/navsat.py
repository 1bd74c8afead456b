"""sensor_msgs/NavSatFix -> geographic track chunks (latitude, longitude, altitude).

Each chunk stores its fixes (``t``, ``lat``, ``lon``, ``alt``) and a ``geo`` context section
with the start and end fix, the bounding box and the great-circle distance travelled;
``spatial.position`` is the chunk's last fix as [latitude, longitude, altitude] in frame
``wgs84`` (so ``spatial_sort`` with ``"frame": "wgs84"`` never compares it with metric
positions; its distances are in degrees). Messages without a fix (status < 0, or NaN
coordinates) are counted in ``no_fix`` and not stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..config import BridgeConfig, TopicRule
from ..gaps import step_crosses_gap
from ..messages import RosMessage
from .base import ChunkedConverter, EpisodeContext, Record, base_metadata

__all__ = ["NavSatTrackConverter", "haversine_m"]

EARTH_RADIUS_M = 6_371_008.8
GEO_FRAME = "wgs84"


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(a)))


@dataclass
class _Buffer:
    t: list[int] = field(default_factory=list)
    lat: list[float] = field(default_factory=list)
    lon: list[float] = field(default_factory=list)
    alt: list[float] = field(default_factory=list)


class NavSatTrackConverter(ChunkedConverter[_Buffer]):
    embed_descriptions = False  # templated numbers

    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "navsat_track")
        self.no_fix = 0
        #: the episode's fix before the chunk being written (the step into a chunk is part of it)
        self._previous: tuple[int, float, float] | None = None

    def start_episode(self) -> None:
        self.no_fix = 0
        self._previous = None

    def _read(self, msg: RosMessage) -> tuple[float, float, float] | None:
        data = msg.data
        status = int(data["status"]["status"])
        lat, lon, alt = float(data["latitude"]), float(data["longitude"]), float(data["altitude"])
        if status < 0 or not (math.isfinite(lat) and math.isfinite(lon)):
            return None
        if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
            raise ValueError(f"NavSatFix latitude/longitude out of range: {lat}, {lon}")
        return lat, lon, alt if math.isfinite(alt) else 0.0

    def check(self, msg: RosMessage) -> None:
        self._read(msg)

    def feed(self, msg: RosMessage) -> bool:
        fix = self._read(msg)
        if fix is None:
            self.no_fix += 1
            return False
        buffer = self._buffer or self._begin_chunk(_Buffer(), msg.t_ns)
        buffer.t.append(msg.t_ns)
        buffer.lat.append(fix[0])
        buffer.lon.append(fix[1])
        buffer.alt.append(fix[2])
        self.ready = self._spans_chunk(msg.t_ns)
        return False

    def _chunk_record(self, episode: EpisodeContext, buffer: _Buffer) -> Record:
        n = len(buffer.t)
        t, lat, lon = list(buffer.t), list(buffer.lat), list(buffer.lon)
        if self._previous is not None:
            t.insert(0, self._previous[0])
            lat.insert(0, self._previous[1])
            lon.insert(0, self._previous[2])
        distance = sum(haversine_m(lat[i - 1], lon[i - 1], lat[i], lon[i]) for i in range(1, len(lat))
                       if not step_crosses_gap(self.gaps, t[i - 1], t[i]))  # a jump across a gap is not travelled
        self._previous = (buffer.t[-1], buffer.lat[-1], buffer.lon[-1])
        duration_s = (buffer.t[-1] - buffer.t[0]) / 1e9
        metadata = base_metadata(episode, self.topic, self.msgtype, duration_s)
        metadata["episode"].update({"t_start_ns": buffer.t[0], "t_end_ns": buffer.t[-1]})
        self._gap_section(metadata, buffer.t[0], buffer.t[-1])
        start, end = (buffer.lat[0], buffer.lon[0], buffer.alt[0]), (buffer.lat[-1], buffer.lon[-1], buffer.alt[-1])
        metadata["geo"] = {
            "start": {"latitude": start[0], "longitude": start[1], "altitude": start[2]},
            "end": {"latitude": end[0], "longitude": end[1], "altitude": end[2]},
            "bbox": [[min(buffer.lat), min(buffer.lon)], [max(buffer.lat), max(buffer.lon)]],
            "distance_m": round(distance, 3), "fixes": n,
        }
        metadata["spatial"] = {"position": list(end), "frame": GEO_FRAME}
        data = {"t0_ns": episode.start_ns, "t": [(t - episode.start_ns) / 1e9 for t in buffer.t],
                "lat": buffer.lat, "lon": buffer.lon, "alt": buffer.alt}
        description = (f"geographic track {self.topic} {duration_s:.1f} s {distance:.1f} m from "
                       f"({start[0]:.6f}, {start[1]:.6f}) to ({end[0]:.6f}, {end[1]:.6f}), {n} fixes")
        return self._record(episode, description, data, metadata, buffer.t[0])

    def episode_summary(self) -> dict[str, Any] | None:
        return {"topic": self.topic, "msgtype": self.msgtype, "no_fix": self.no_fix} if self.no_fix else None
