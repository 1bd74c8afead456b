"""Episode policies: when an episode (a robotmem session) starts and ends.

* :class:`FileEpisodes` - one episode per source (a recording), split only by ``max_episode_s``.
* :class:`GapEpisodes` - a new episode after ``seconds`` without motion (a silence in the
  stream counts as no motion); the next episode begins when the robot moves again.
* :class:`TopicEpisodes` - explicit markers on a topic (default ``/robotmem/episode``,
  ``std_msgs/String``): ``start`` optionally followed by a JSON object (the episode context),
  ``end`` optionally followed by an outcome score in [0, 1]. The JSON form
  ``{"event": "start", "context": {...}}`` / ``{"event": "end", "score": 0.8}`` works too;
  in it, ``"session_id"`` attaches the episode to a session someone else opened (see
  :class:`StartEpisode`) and, on ``end``, ends only the episode attached to that session.

Every policy can also be limited by ``max_episode_s`` (default: the config's) and, for
live use, ``idle_gap_s``. The pipeline applies those two rules, and holds every ended
episode for messages stamped before its end that arrive late (the config's
``late_grace_s``); a policy only says what its markers mean and whether data outside an
episode opens a new one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from .messages import RosMessage

__all__ = [
    "EndEpisode",
    "EpisodeAction",
    "EpisodePolicy",
    "FileEpisodes",
    "GapEpisodes",
    "Marker",
    "StartEpisode",
    "TopicEpisodes",
    "parse_episode_split",
    "parse_marker",
]


@dataclass(frozen=True)
class StartEpisode:
    """Open an episode at ``t_ns``; ``context`` (a start marker's JSON) goes on every record.

    ``session_id`` with ``owned=False`` attaches the episode to a session someone else opened
    (a control loop, through the API or MCP): records are written into it and the episode's
    end does not end it - its owner does. When that session is not open (any more) the
    episode gets a session of its own instead. ``session_id`` with ``owned=True`` is the id
    of the session the pipeline opens (and ends) itself.
    """

    t_ns: int
    context: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    owned: bool = True


@dataclass(frozen=True)
class EndEpisode:
    """End the open episode; with ``session_id``, only when it is the one attached to that session."""

    t_ns: int
    score: float | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class Marker:
    """A parsed episode marker."""

    event: str
    context: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    session_id: str | None = None


EpisodeAction = StartEpisode | EndEpisode


class EpisodePolicy:
    """Base policy: the first data message opens an episode; no markers."""

    #: topic whose messages are episode markers (None: the policy uses none)
    marker_topic: str | None = None
    #: whether the first episode, too, waits until the robot moves (gap:SECONDS, docs/replay.md)
    waits_for_motion_at_start = False
    #: whether a note (/robotmem/learn) outside an episode opens one: only where the whole
    #: source is one episode (file); elsewhere it is stored without a session (docs/bridge.md)
    notes_open_episodes = False

    def __init__(
        self, *, idle_gap_s: float | None = None, max_episode_s: float | None = None, opens_on_data: bool = True
    ) -> None:
        for name, value in (("idle_gap_s", idle_gap_s), ("max_episode_s", max_episode_s)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self.idle_gap_s = idle_gap_s
        self.max_episode_s = max_episode_s
        #: whether a data message that arrives while no episode is open starts one
        self.opens_on_data = opens_on_data

    @property
    def name(self) -> str:
        return "auto"

    def on_marker(self, msg: RosMessage, episode_open: bool) -> list[EpisodeAction]:
        """Actions for a message on :attr:`marker_topic`. Raises ValueError when it is malformed."""
        return []


class FileEpisodes(EpisodePolicy):
    """One episode per source (file); long recordings are split at ``max_episode_s``."""

    notes_open_episodes = True

    def __init__(self, *, max_episode_s: float | None = None) -> None:
        super().__init__(max_episode_s=max_episode_s)

    @property
    def name(self) -> str:
        return "file"


class GapEpisodes(EpisodePolicy):
    """A new episode after ``seconds`` without motion; every episode begins when the robot moves."""

    waits_for_motion_at_start = True

    def __init__(self, seconds: float, *, max_episode_s: float | None = None) -> None:
        super().__init__(idle_gap_s=seconds, max_episode_s=max_episode_s)
        self.seconds = seconds

    @property
    def name(self) -> str:
        return f"gap:{self.seconds:g}"


class TopicEpisodes(EpisodePolicy):
    """Episodes delimited by start/end markers on a topic.

    ``outside="drop"`` (default) stores nothing that arrives outside a start/end pair;
    ``outside="auto"`` opens an automatic episode for such data (a live robot that
    sometimes forgets its markers).
    """

    def __init__(
        self,
        topic: str = "/robotmem/episode",
        *,
        idle_gap_s: float | None = None,
        max_episode_s: float | None = None,
        outside: str = "drop",
    ) -> None:
        if outside not in ("drop", "auto"):
            raise ValueError(f"outside must be 'drop' or 'auto', got {outside!r}")
        super().__init__(idle_gap_s=idle_gap_s, max_episode_s=max_episode_s, opens_on_data=outside == "auto")
        self.marker_topic = topic

    @property
    def name(self) -> str:
        return f"topic:{self.marker_topic}"

    def on_marker(self, msg: RosMessage, episode_open: bool) -> list[EpisodeAction]:
        marker = parse_marker(msg.data)
        if marker.event == "start":
            actions: list[EpisodeAction] = [EndEpisode(msg.t_ns)] if episode_open else []
            start = StartEpisode(msg.t_ns, marker.context, session_id=marker.session_id,
                                 owned=marker.session_id is None)
            return actions + [start]
        return [EndEpisode(msg.t_ns, marker.score, marker.session_id)] if episode_open else []


def parse_marker(data: dict[str, Any]) -> Marker:
    """A :class:`Marker` from a ``std_msgs/String`` message; ValueError names what is wrong."""
    text = data.get("data")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("episode marker: 'data' must be a non-empty string ('start [json]' or 'end [score]')")
    text = text.strip()
    session_id = None
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"episode marker: invalid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise ValueError("episode marker: JSON form must be an object")
        event = obj.get("event")
        argument = obj.get("context") if event == "start" else obj.get("score")
        session_id = _marker_session_id(obj.get("session_id"))
    else:
        event, _, rest = text.partition(" ")
        argument = rest.strip() or None
    if event == "start":
        return Marker("start", _marker_context(argument), session_id=session_id)
    if event == "end":
        return Marker("end", score=_marker_score(argument), session_id=session_id)
    raise ValueError(f"episode marker: event must be 'start' or 'end', got {event!r}")


def _marker_session_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 128:
        raise ValueError(f"episode marker: session_id must be a session id string, got {value!r}")
    return value.strip()


#: context sections robotmem requires to be JSON objects (robotmem/context.py)
_OBJECT_SECTIONS = ("params", "spatial", "robot", "task")


def _marker_context(argument: Any) -> dict[str, Any]:
    if argument is None:
        return {}
    if isinstance(argument, str):
        try:
            argument = json.loads(argument)
        except ValueError as exc:
            raise ValueError(f"episode marker: start context is not JSON: {exc}") from exc
    if not isinstance(argument, dict):
        raise ValueError("episode marker: start context must be a JSON object")  # noqa: TRY004 - bad input, not a bug
    for section in _OBJECT_SECTIONS:
        if section in argument and not isinstance(argument[section], dict):
            # the context is copied onto every record: robotmem would refuse each one
            raise ValueError(f"episode marker: start context '{section}' must be a JSON object")
    return argument


def _marker_score(argument: Any) -> float | None:
    if argument is None:
        return None
    try:
        score = float(argument)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"episode marker: end score must be a number, got {argument!r}") from exc
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"episode marker: end score must be within [0, 1], got {score}")
    return score


def parse_episode_split(spec: str, *, max_episode_s: float | None = None) -> EpisodePolicy:
    """``file`` | ``gap:SECONDS`` | ``topic:/name`` -> a policy. ValueError names the problem."""
    kind, _, argument = spec.partition(":")
    if kind == "file" and not argument:
        return FileEpisodes(max_episode_s=max_episode_s)
    if kind == "gap":
        try:
            seconds = float(argument)
        except ValueError:
            raise ValueError(f"--episode-split gap:SECONDS needs a number of seconds, got {argument!r}") from None
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"--episode-split gap:SECONDS must be positive, got {argument!r}")
        return GapEpisodes(seconds, max_episode_s=max_episode_s)
    if kind == "topic" and argument.startswith("/"):
        return TopicEpisodes(argument, max_episode_s=max_episode_s)
    raise ValueError(f"--episode-split must be 'file', 'gap:SECONDS' or 'topic:/name', got {spec!r}")
