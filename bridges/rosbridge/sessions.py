"""Episodes that follow a session a control loop opened through the API or MCP.

A control loop (an agent over MCP, a Python script with ``Memory.start_session``) often
knows best when a task starts and ends. When it opens a session in the bridge's
collection, the bridge attaches an episode to that very session: trajectories,
perceptions and notes are written into it (``recall(session_id=...)`` finds them), and
every record carries the control session's ``task`` and ``episode.control_session_id``.
The session stays the control loop's: the bridge never ends it. When the control loop
ends it, the bridge ends its episode (the last chunks and the episode summary; robotmem
refuses writes into an ended session, so those are stored without a session, keeping
``episode.key``, see bridges/pipeline/writer.py).

A control loop killed mid-session leaves its session open for good; when a newer control session
opens, the follower ends the episode attached to the old one (leaving the session open, as
always) and attaches to the newer one.

The follower polls ``Memory.list_sessions`` and turns what it sees into ordinary episode
markers (the JSON form ``/robotmem/episode`` accepts, with the ``session_id`` to attach
to), put into the inbox like a message, so the pipeline keeps being driven by one thread.
Sessions written by a pipeline (their context has ``source.url`` or ``source.file``: this
bridge, another bridge, a replay) are not control sessions and are ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from robotmem.errors import RobotMemError

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["ControlSessionFollower", "is_pipeline_session"]

LOG = logging.getLogger("bridges.rosbridge")


def is_pipeline_session(session: dict[str, Any]) -> bool:
    source = (session.get("context") or {}).get("source")
    return isinstance(source, dict) and ("url" in source or "file" in source)


def _started(session: dict[str, Any]) -> float:
    return float(session.get("started_at") or 0.0)


class ControlSessionFollower:
    """Call :meth:`poll` periodically; it emits start/end markers through ``emit_marker``."""

    def __init__(self, memory: Memory, collection: str, emit_marker: Callable[[dict[str, Any]], None]) -> None:
        self.memory = memory
        self.collection = collection
        self.emit_marker = emit_marker
        #: the control session the current episode follows
        self.following: str | None = None
        self._following_started = 0.0
        self._seen: set[str] = set()

    def poll(self) -> None:
        try:
            sessions = self.memory.list_sessions(self.collection, status="open")
        except RobotMemError as exc:
            LOG.warning("cannot list sessions to follow control loops: %s", exc)
            return
        control = [s for s in sessions if not is_pipeline_session(s)]
        open_ids = {s["session_id"] for s in control}
        fresh = [s for s in control if s["session_id"] not in self._seen]
        newest = max(fresh, key=_started, default=None)
        # A newer control session means the followed one was abandoned: its control loop was killed
        # and will never end it. Kept, every later control session went without an episode and the
        # bridge wrote into the dead one for good (a restarted bridge attached to it too).
        superseded = newest is not None and _started(newest) > self._following_started
        if self.following is not None and (self.following not in open_ids or superseded):
            self._end(self.following)
        if self.following is None and newest is not None:
            self._start(newest)

    def _start(self, session: dict[str, Any]) -> None:
        sid = str(session["session_id"])
        self._seen.add(sid)
        self.following = sid
        self._following_started = _started(session)
        context: dict[str, Any] = {"episode": {"control_session_id": sid}}
        task = (session.get("context") or {}).get("task")
        if isinstance(task, dict):
            context["task"] = task
        LOG.info("control session %s opened: attaching an episode to it", sid)
        self.emit_marker({"event": "start", "session_id": sid, "context": context})

    def _end(self, sid: str) -> None:
        self.following = None
        score = None
        try:
            score = self.memory.get_session(sid).get("outcome_score")
        except RobotMemError:
            pass  # forgotten or unreadable: end without a score
        LOG.info("control session %s ended: ending its episode", sid)
        marker: dict[str, Any] = {"event": "end", "session_id": sid}
        if isinstance(score, (int, float)) and 0.0 <= score <= 1.0:
            marker["score"] = float(score)
        self.emit_marker(marker)


def marker_message(marker: dict[str, Any]) -> dict[str, str]:
    """The std_msgs/String message carrying ``marker`` (JSON form of the episode markers)."""
    return {"data": json.dumps(marker)}
