"""Where the robot was when a camera frame, a scan or a joint chunk was recorded.

Pose streams (pose_trajectory converters) report every pose here; converters of other
perceptions (images, laser scans, joint chunks) ask for the pose at their message time and
store it as ``spatial.position`` ([x, y, z]) with ``spatial.frame``, so that
``recall(spatial_sort={"field": "spatial.position", "target": [x, y]})`` finds what the
robot perceived near a place. Only the latest pose of the episode is kept: it is used when
it is at most ``max_age_s`` from the message time (a stale or missing pose stream gives no
position rather than a wrong one).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RobotPoseTracker"]


class RobotPoseTracker:
    def __init__(self, max_age_s: float) -> None:
        self.max_age_ns = int(max_age_s * 1e9)
        self._t_ns: int | None = None
        #: the spatial section for the latest pose (built once per pose, shared read-only)
        self._spatial: dict[str, Any] | None = None

    def reset(self) -> None:
        """A new episode: poses of the previous one do not count."""
        self._t_ns = None
        self._spatial = None

    def note(self, t_ns: int, x: float, y: float, z: float, frame_id: str, topic: str) -> None:
        if self._t_ns is not None and t_ns < self._t_ns:
            return  # an older pose arriving late (another stream) does not replace a newer one
        self._t_ns = t_ns
        self._spatial = {"position": [x, y, z], "frame": frame_id, "pose_topic": topic, "pose_t_ns": t_ns}

    def at(self, t_ns: int) -> dict[str, Any] | None:
        """The spatial section for a perception at ``t_ns`` (a fresh dict), or None."""
        if self._spatial is None or self._t_ns is None or abs(t_ns - self._t_ns) > self.max_age_ns:
            return None
        return {**self._spatial, "position": list(self._spatial["position"])}
