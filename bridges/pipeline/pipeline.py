"""The pipeline: ROS messages in, robotmem sessions and records out.

One instance per stream of messages (a recording, a rosbridge connection). ``feed`` is
called from one thread; it never raises for a bad message (counted as malformed and
logged). Transient errors of the store itself (robotmem StorageError) propagate unless a
``write_retry`` policy is given: then writes are held and retried (outbox.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .background import BackgroundRecordWriter
from .config import BridgeConfig, TopicRule
from .converters import (
    Converter,
    EpisodeContext,
    Record,
    make_converter,
    occurred_at,
    record_metadata,
)
from .episodes import EndEpisode, EpisodeAction, EpisodePolicy, StartEpisode
from .gaps import Gap, GapDetector
from .messages import RosMessage
from .outbox import RetryPolicy
from .robot_pose import RobotPoseTracker
from .stamps import StampCheck
from .stats import PipelineStats, TopicStats
from .summary import episode_summary_record
from .writer import RecordWriter

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["Pipeline"]

log = logging.getLogger("bridges.pipeline")

_MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError)
#: malformed messages logged per topic before the log goes quiet (counting continues)
_LOG_FIRST = 5
#: a sampled message is kept up to this fraction (1/4) of the interval before its slot
_SAMPLE_EARLY_FRACTION = 4
#: converters whose records carry the robot's pose at their time (robot_pose.py)
_POSE_TAKERS = frozenset({"image", "laser_scan", "joint_trajectory"})
#: messages and actions kept waiting behind a held episode before it is finished early: the
#: grace window is message time, so a mis-set late_grace_s must not hold a stream in memory
_HELD_MAX = 50_000


@dataclass
class _Handler:
    """What to do with one (topic, type): cached after the first message."""

    kind: str  # a converter name, or "ignored"
    stats: TopicStats
    rule: TopicRule | None = None
    converter: Converter | None = None
    sample_ns: int = 0
    #: the next sampling slot (message time)
    last_kept_ns: int | None = None
    gaps: GapDetector | None = None
    stamps: StampCheck | None = None


@dataclass
class _Episode:
    context: EpisodeContext
    start_ns: int
    last_ns: int
    last_motion_ns: int
    task: dict[str, Any]
    #: the start marker's context (kept for a split at max_episode_s)
    marker: dict[str, Any] = field(default_factory=dict)
    #: False: attached to a session someone else owns; its end does not end the session
    owned: bool = True
    #: already stored by an earlier run (idempotent replay): follow it, write nothing
    skipping: bool = False
    saw_motion_source: bool = False
    messages: dict[str, int] = field(default_factory=dict)
    facts: int = 0
    gaps: list[Gap] = field(default_factory=list)

    def end_ns(self, action: EndEpisode) -> int:
        """Where the episode ends: the end's time, or its last message when a stamp came later."""
        return max(action.t_ns, self.last_ns)


@dataclass
class _Held:
    """An ended episode that is not finished yet (``late_grace_s``, docs/bridge.md "Late messages").

    Until a message or tick passes ``until_ns`` it takes the data and notes stamped at or
    before ``end_ns`` that arrive late. Everything else that arrives meanwhile (the next
    episode's marker and data) waits in ``waiting`` and is handled, in arrival order, once
    the episode is finished: the converters hold one episode's buffers at a time.
    """

    end: EndEpisode
    end_ns: int
    until_ns: int
    waiting: list[RosMessage | EpisodeAction] = field(default_factory=list)


class Pipeline:
    def __init__(
        self,
        memory: Memory | None,
        config: BridgeConfig,
        *,
        collection: str,
        robot_id: str | None,
        episode_policy: EpisodePolicy,
        source: str,
        dry_run: bool = False,
        session_id_for: Callable[[int], str] | None = None,
        note_key_for: Callable[[int], str] | None = None,
        background_writes: bool = False,
        write_retry: RetryPolicy | None = None,
        stored_until_ns: int | None = None,
        upstream_interval_s: Callable[[str], float] | None = None,
    ) -> None:
        """``session_id_for(start_ns)`` gives deterministic session ids (replay); an id that
        already exists as an ended session is skipped, an open one is rewritten from scratch.
        ``stored_until_ns`` (replay): the source's episodes already stored reach this message
        time, so an episode whose id is not stored but that starts earlier counts as stored
        too (the same data cut with other options; docs/replay.md, Idempotency).
        ``note_key_for(t_ns)`` keys a note that arrives outside any episode (replay): it is
        stored once with ``source.note_key`` and skipped when a later run finds it stored.
        ``background_writes`` writes (and embeds) on a worker thread in batches (replay; see
        background.py); ``flush`` and ``close`` wait for it. ``write_retry`` holds and retries
        writes the store refuses with StorageError (the live bridge; see outbox.py).
        ``upstream_interval_s(topic)``: the source already passes at most one message of the
        topic per this many seconds (the live bridge: rosbridge's throttle); a rule sampling no
        more often than that is not applied again (see :meth:`_sample_ns`)."""
        self.config = config
        self.collection = collection
        self.robot_id = robot_id
        self.policy = episode_policy
        self.source = source
        self.stats = PipelineStats()
        self.writer: RecordWriter = (
            BackgroundRecordWriter(memory, self.stats) if background_writes and not dry_run
            else RecordWriter(memory, self.stats, dry_run=dry_run, retry=write_retry)
        )
        self._session_id_for = session_id_for
        self._note_key_for = note_key_for
        self._stored_until_ns = stored_until_ns
        self._upstream_interval_s = upstream_interval_s
        self._source_meta = {"url": source} if "://" in source else {"file": source}
        self._handlers: dict[tuple[str, str], _Handler] = {}
        self._robot_pose = RobotPoseTracker(config.pose_max_age_s)
        self._episode: _Episode | None = None
        #: the open episode has ended and waits for late messages (then _episode is that episode)
        self._held: _Held | None = None
        self._grace_ns = int(config.late_grace_s * 1e9)
        #: wait for motion before opening an episode: after an idle end, and under gap:SECONDS from the start
        self._idle = episode_policy.waits_for_motion_at_start
        #: the message time the last ended episode reached: nothing before it opens an episode
        self._ended_until_ns: int | None = None
        max_s = episode_policy.max_episode_s if episode_policy.max_episode_s is not None else config.max_episode_s
        self._max_ns = int(max_s * 1e9) if max_s else 0
        self._idle_ns = int(episode_policy.idle_gap_s * 1e9) if episode_policy.idle_gap_s else 0

    # -- public API ----------------------------------------------------------------------
    def feed(self, msg: RosMessage) -> None:
        handler = self._handlers.get((msg.topic, msg.msgtype)) or self._new_handler(msg.topic, msg.msgtype)
        handler.stats.messages += 1
        if handler.kind == "ignored":
            handler.stats.ignored += 1
        elif handler.kind == "episode" and msg.topic != self.policy.marker_topic:
            pass  # markers mean nothing to this policy; counted, not stored
        else:
            stamps = handler.stamps = handler.stamps or StampCheck(self.config.max_episode_s)
            self._route_admitted(handler, stamps.admit(msg))

    def tick(self, now_ns: int) -> None:
        """Time passed without messages: finish a held episode, end an idle one, write chunks that are due."""
        self.writer.retry_due()
        for handler in list(self._handlers.values()):
            if handler.stamps is not None and handler.stamps.held is not None:
                self._route_admitted(handler, handler.stamps.overdue(now_ns))
        self._pass_time(now_ns, now_ns)
        due = [h for h in self._converters() if h.converter is not None and h.converter.pending_since_ns is not None
               and h.converter.spans(h.converter.pending_since_ns, now_ns)]
        if due and self._episode is not None:
            self._drain(due)

    def note_gap(self, start_ns: int, end_ns: int, reason: str) -> None:
        """A stretch without data on every topic (the live bridge lost its connection)."""
        if end_ns > start_ns:
            self._record_gap(Gap(start_ns, end_ns, reason))

    def time_reset(self, t_ns: int) -> None:
        """The message clock went back to ``t_ns`` (Gazebo's "reset world" restarts sim time near 0;
        a robot's clock stepped back by NTP): what came before is on another time base.

        Messages stamped after the reset would sort before the open episode's start, before the
        last ended episode's end (so they would open none and be lost), into a held episode's
        grace window, and behind every sampling slot. So the held episode is finished, the open
        one ends at its last message and its next part opens at ``t_ns`` (as a split at
        ``max_episode_s`` does: same marker context, ``task.continues``, the same attached
        session), and every per-topic rule that compares times starts afresh.
        """
        for handler in list(self._handlers.values()):
            if handler.stamps is not None:
                self._route_admitted(handler, handler.stamps.release())
        while self._held is not None:
            self._finish_held()
        self.stats.time_resets += 1
        episode = self._episode
        for handler in self._handlers.values():
            handler.stamps = None
            handler.last_kept_ns = None
            if handler.gaps is not None:
                handler.gaps.reset()
        self._ended_until_ns = None
        if episode is None or episode.skipping:
            return
        self._finish(EndEpisode(episode.last_ns))
        self._ended_until_ns = None
        self._start(self._next_part(episode, t_ns))

    def _next_part(self, episode: _Episode, t_ns: int) -> StartEpisode:
        """The episode that goes on after ``episode`` was split at ``t_ns``: in the same attached
        session, or in a new own one that names the one before as ``task.continues``."""
        task = dict(episode.task, continues=episode.context.session_id) if episode.owned else episode.task
        marker = dict(episode.marker, task=task) if task else episode.marker
        return StartEpisode(t_ns, marker, session_id=None if episode.owned else episode.context.session_id,
                            owned=episode.owned)

    def episode(self, action: EpisodeAction) -> None:
        """Start or end an episode directly, as a marker would (for callers that know the boundaries).

        ``StartEpisode(t_ns, session_id=..., owned=False)`` attaches the episode to a session
        someone else opened; see :class:`~bridges.pipeline.episodes.StartEpisode`.
        """
        self._route(action)

    def flush(self) -> None:
        """Write every buffered chunk now; the episode stays open."""
        if self._episode is not None:
            self._drain(self._converters())
        self.writer.drain()

    def close(self) -> PipelineStats:
        """Flush, finish the held episode and what waited behind it, end the open one, return the counters.

        Nothing more will arrive, so no episode waits for late messages (stop, Ctrl-C, end of a recording).
        """
        try:
            for handler in list(self._handlers.values()):
                if handler.stamps is not None:
                    self._route_admitted(handler, handler.stamps.release())
            while self._held is not None:
                self._finish_held()
            if self._episode is not None:
                self._finish(EndEpisode(self._episode.last_ns))
        finally:
            self.writer.close()
        return self.stats

    def abandon(self) -> None:
        """The stream failed (a recording that cannot be read on, a store that fails): stop
        writing. An episode left open is rewritten whole by the next replay."""
        self._episode = None
        self._held = None
        self.writer.abandon()

    @property
    def plan(self) -> list[dict[str, Any]]:
        """Dry run: everything that would have been written."""
        return self.writer.plan

    # -- dispatch ------------------------------------------------------------------------
    def _route_admitted(self, handler: _Handler, messages: list[RosMessage]) -> None:
        """Route what the topic's stamp check let through, at the times it believes (stamps.py)."""
        assert handler.stamps is not None
        handler.stats.stamps_replaced = handler.stamps.replaced
        for msg in messages:
            self._route(msg)

    def _route(self, item: RosMessage | EpisodeAction) -> None:
        """Handle a message or an episode action now, or keep it until the held episode is finished."""
        arrived = item.arrived_ns if isinstance(item, RosMessage) and item.arrived_ns is not None else item.t_ns
        # A late message's stamp is old; its arrival says how late it is. The later of the two
        # is how far time has come (clocks differ a little: either alone may lag).
        self._pass_time(item.t_ns, max(item.t_ns, arrived))  # may end an idle episode: then it is held
        held = self._held
        if held is None:
            self._handle(item)
        elif isinstance(item, RosMessage) and self._late_for_held(item, held):
            self._handlers[(item.topic, item.msgtype)].stats.late += 1
            self._handle(item)  # the held episode is still self._episode: the message goes into it
        else:
            held.waiting.append(item)
            if len(held.waiting) > _HELD_MAX:
                log.warning("%d messages arrived within late_grace_s of an episode's end: finishing it early",
                            _HELD_MAX)
                self._finish_held()

    def _late_for_held(self, msg: RosMessage, held: _Held) -> bool:
        """Data or a note stamped at or before the held episode's end. Markers always wait: an
        ``end`` or ``start`` concerns the episodes after it, whatever its stamp."""
        return msg.t_ns <= held.end_ns and self._handlers[(msg.topic, msg.msgtype)].kind != "episode"

    def _handle(self, item: RosMessage | EpisodeAction) -> None:
        if not isinstance(item, RosMessage):
            self._apply([item])
            return
        handler = self._handlers[(item.topic, item.msgtype)]
        if handler.kind == "episode":
            self._on_marker(item, handler)
            return
        if handler.gaps is not None:
            gap = handler.gaps.observe(item.t_ns)
            if gap is not None:
                self._record_gap(gap)
        if self._sampled_out(item.t_ns, handler):
            handler.stats.sampled_out += 1
        elif handler.kind == "learn":
            self._on_learn(item, handler)
        else:
            self._on_data(item, handler)

    def _new_handler(self, topic: str, msgtype: str) -> _Handler:
        stats = self.stats.topic(topic)
        stats.msgtype = msgtype
        rules = self.config.rules_for(topic, msgtype)
        handler = _Handler("ignored", stats)
        if rules:
            rule = rules[0]
            handler = _Handler(rule.converter, stats, rule, sample_ns=self._sample_ns(topic, rule))
            if rule.converter not in ("learn", "episode"):
                handler.gaps = GapDetector(topic, self.config.gap_min_s, self.config.gap_periods)
                shared = self._shared_converter(rule.converter)
                handler.converter = shared or make_converter(topic, msgtype, rule, self.config)
                if shared is None:
                    self._connect_pose(handler.converter, rule.converter)
        stats.converter = handler.kind
        self._handlers[(topic, msgtype)] = handler
        return handler

    def _sample_ns(self, topic: str, rule: TopicRule) -> int:
        """The rule's sampling interval, or 0 when the source has already sampled the topic.

        rosbridge throttles on its own clock and the pipeline samples on message stamps. On a
        loaded machine two frames the server sent a second apart can be stamped 0.6 s apart,
        and sampling them again would drop one of the frames the throttle chose.
        """
        interval_s = rule.sample_every_s
        if self._upstream_interval_s is not None and 0 < interval_s <= self._upstream_interval_s(topic):
            return 0
        return int(interval_s * 1e9)

    def _shared_converter(self, kind: str) -> Converter | None:
        """/tf and /tf_static feed one tf converter (a chain uses links of both)."""
        if kind != "tf_trajectory":
            return None
        return next((h.converter for h in self._converters() if h.kind == kind), None)

    def _connect_pose(self, converter: Converter, kind: str) -> None:
        """Pose streams report the robot's pose; images, scans and joint chunks record it."""
        if kind in ("pose_trajectory", "tf_trajectory"):
            converter.pose_sink = self._robot_pose.note
        elif kind in _POSE_TAKERS:
            converter.robot_pose = self._robot_pose.at

    def _converters(self) -> list[_Handler]:
        """One handler per converter (topics sharing a converter, as /tf and /tf_static do, appear once)."""
        seen: set[int] = set()
        result = []
        for handler in self._handlers.values():
            if handler.converter is not None and id(handler.converter) not in seen:
                seen.add(id(handler.converter))
                result.append(handler)
        return result

    def _record_gap(self, gap: Gap) -> None:
        """Into the open episode and the converters it concerns (their chunks carry it)."""
        episode = self._episode
        if episode is None or episode.skipping or gap.end_ns < episode.start_ns:
            return
        if self._held is not None and gap.start_ns >= self._held.end_ns:
            return  # after the held episode's end: in no episode yet, as when none is open
        episode.gaps.append(gap)
        self.stats.gaps += 1
        for handler in self._converters():
            assert handler.converter is not None
            if gap.topic is None or gap.topic == handler.converter.topic:
                handler.converter.gaps.append(gap)

    def _sampled_out(self, t_ns: int, handler: _Handler) -> bool:
        """Keep one message per ``sample_every_s`` on a fixed grid, with a tolerance.

        rosbridge throttles a camera to one frame per second, so its frames arrive about, not
        exactly, a second apart; "keep when a full second has passed since the last kept" then
        drops every frame that comes a little early (half of them). Here a frame is kept when it
        is at most a quarter interval before the next slot, and the slot advances by whole
        intervals: on average never more than one per interval, and about one per interval.
        """
        if not handler.sample_ns:
            return False
        due = handler.last_kept_ns  # the next slot
        if due is not None and t_ns < due - handler.sample_ns // _SAMPLE_EARLY_FRACTION:
            return True
        handler.last_kept_ns = due + handler.sample_ns if due is not None and t_ns < due + handler.sample_ns \
            else t_ns + handler.sample_ns
        return False

    def _log_malformed(self, msg: RosMessage, handler: _Handler, exc: Exception) -> None:
        handler.stats.malformed += 1
        count = handler.stats.malformed
        if count <= _LOG_FIRST or count % 1000 == 0:
            log.warning("%s (%s): malformed message #%d skipped: %s: %s", msg.topic, msg.msgtype, count,
                        type(exc).__name__, exc)

    # -- data ----------------------------------------------------------------------------
    def _on_data(self, msg: RosMessage, handler: _Handler) -> None:
        converter = handler.converter
        assert converter is not None
        if self._episode is None and not self._open_for(msg, handler):
            return
        episode = self._episode
        assert episode is not None
        try:
            moved = converter.feed(msg)
        except _MALFORMED as exc:
            self._log_malformed(msg, handler, exc)
            return
        if episode.skipping:
            handler.stats.already_stored += 1
        episode.messages[msg.topic] = episode.messages.get(msg.topic, 0) + 1
        # Bounds from the earliest and latest message, not the first: stamps may be a little out of order.
        episode.start_ns = min(episode.start_ns, msg.t_ns)
        episode.last_ns = max(episode.last_ns, msg.t_ns)
        if converter.motion_aware:
            episode.saw_motion_source = True
        if moved or not episode.saw_motion_source:
            episode.last_motion_ns = max(episode.last_motion_ns, msg.t_ns)
        if converter.ready:
            self._drain([h for h in self._converters() if h.converter is not None and h.converter.ready], ready=True)

    def _open_for(self, msg: RosMessage, handler: _Handler) -> bool:
        """No episode is open: does this message start one?"""
        converter = handler.converter
        assert converter is not None
        if not self.policy.opens_on_data or self._late(msg.t_ns):
            handler.stats.outside_episode += 1
            return False
        try:  # a malformed message must not open an (empty) episode: validate first
            if self._idle and not converter.would_move(msg):
                handler.stats.outside_episode += 1
                return False
            converter.check(msg)
        except _MALFORMED as exc:
            self._log_malformed(msg, handler, exc)
            return False
        self._start(StartEpisode(msg.t_ns))
        return True

    def _late(self, t_ns: int) -> bool:
        """Stamped before the end of the episode finished last, arriving after its ``late_grace_s``:
        it must not open an episode that starts before the previous one ended (docs/bridge.md,
        "Late messages")."""
        return self._ended_until_ns is not None and t_ns <= self._ended_until_ns

    def _on_learn(self, msg: RosMessage, handler: _Handler) -> None:
        try:
            insight, context = _parse_learn(msg.data)
        except _MALFORMED as exc:
            self._log_malformed(msg, handler, exc)
            return
        if self._episode is None and self.policy.notes_open_episodes and not self._late(msg.t_ns):
            self._start(StartEpisode(msg.t_ns))  # a note belongs to the episode its recording is in
        episode = self._episode
        if episode is not None and episode.skipping:
            handler.stats.already_stored += 1
            return
        if episode is None and self._stored_until_ns is not None and msg.t_ns < self._stored_until_ns:
            self.writer.skip_note(msg.topic, insight)  # other options put it in a stored episode
            return
        context.setdefault("source", {}).update({"topic": msg.topic, **self._source_meta})
        if self.robot_id:
            context.setdefault("robot", {}).setdefault("id", self.robot_id)
        if episode is not None:
            context.setdefault("episode", {}).setdefault("key", episode.context.session_id)
            context = record_metadata(episode.context, context)
        session_id = episode.context.session_id if episode is not None else None
        once_key = None
        if episode is None and self._note_key_for is not None:
            once_key = self._note_key_for(msg.t_ns)
            context["source"].update({"note_key": once_key, "t_ns": msg.t_ns})
        self.writer.learn(msg.topic, insight, context, self.collection, session_id, once_key, occurred_at(msg.t_ns))
        if episode is not None:
            episode.facts += 1
            episode.messages[msg.topic] = episode.messages.get(msg.topic, 0) + 1

    def _drain(self, handlers: list[_Handler], ready: bool = False) -> None:
        """Write the handlers' buffers: everything, or (``ready``) what their ``ready`` announced."""
        episode = self._episode
        assert episode is not None
        records: list[tuple[str, Record]] = []
        for handler in handlers:
            converter = handler.converter
            assert converter is not None
            if episode.skipping:
                converter.discard()
            else:
                drained = converter.drain_ready(episode.context) if ready else converter.drain(episode.context)
                records.extend((converter.topic, r) for r in drained)
        self.writer.write(records)

    # -- episodes ------------------------------------------------------------------------
    def _on_marker(self, msg: RosMessage, handler: _Handler) -> None:
        try:
            actions = self.policy.on_marker(msg, self._episode is not None)
        except _MALFORMED as exc:
            self._log_malformed(msg, handler, exc)
            return
        self._apply(actions)

    def _apply(self, actions: list[EpisodeAction]) -> None:
        for i, action in enumerate(actions):
            if self._held is not None:  # a `start` that ended the open episode: it opens the next one later
                self._held.waiting.extend(actions[i:])
                return
            if isinstance(action, StartEpisode):
                self._start(action)
            elif self._episode is not None and action.session_id in (None, self._attached_session()):
                self._end(action)
            elif action.session_id is not None:
                log.info("end of session %s ignored: the open episode is not attached to it", action.session_id)

    def _attached_session(self) -> str | None:
        episode = self._episode
        return episode.context.session_id if episode is not None and not episode.owned else None

    def _advance(self, now_ns: int) -> None:
        """Apply the idle-gap and maximum-duration rules to the open episode (not to a held one: it has ended)."""
        episode = self._episode
        if episode is None or self._held is not None:
            return
        # An attached episode ends when the session's owner says so, never for idleness.
        if self._idle_ns and episode.owned and now_ns - episode.last_motion_ns > self._idle_ns:
            self._end(EndEpisode(episode.last_motion_ns))
            self._idle = True
        elif self._max_ns and now_ns - episode.start_ns >= self._max_ns:
            # Not held for late messages: the next part opens at once and takes them.
            self._finish(EndEpisode(now_ns))
            self._start(self._next_part(episode, now_ns))

    def _start(self, action: StartEpisode) -> None:
        self._idle = False
        self._robot_pose.reset()
        context = _session_context(action.context, self.robot_id, self._source_meta, self.policy.name, action.t_ns)
        status: str | None
        if not action.owned and action.session_id is not None and self._can_attach(action.session_id):
            session_id, status = action.session_id, "attached"
            self.writer.attach_session(session_id)
            self.stats.episodes_attached += 1
        else:
            if not action.owned and action.session_id is not None and isinstance(context.get("episode"), dict):
                context["episode"]["requested_session_id"] = action.session_id
            session_id, status = self._own_session(action, context)
        self.stats.session_ids.append(session_id)
        if status != "ended":
            self.stats.episodes_started += 1
        episode_context = EpisodeContext(session_id, action.t_ns, self.collection, self.robot_id, self._source_meta,
                                         marker=action.context)
        task = context.get("task", {}) if isinstance(context.get("task"), dict) else {}
        self._episode = _Episode(episode_context, action.t_ns, action.t_ns, action.t_ns, task, marker=action.context,
                                 owned=status != "attached", skipping=status == "ended")
        for handler in self._converters():
            assert handler.converter is not None
            handler.converter.start_episode()
            handler.converter.gaps = []
            if handler.gaps is not None:
                handler.gaps.reset()

    def _can_attach(self, session_id: str) -> bool:
        """Whether a session someone else opened can take this episode's records."""
        info = self.writer.session_info(session_id)
        if info is not None and info.get("status") == "open" and info.get("collection") == self.collection:
            return True
        why = "does not exist" if info is None else (
            f"belongs to collection {info.get('collection')!r}" if info.get("collection") != self.collection
            else "has already ended")
        log.warning("cannot attach the episode to session %s: it %s; the episode gets a session of its own",
                    session_id, why)
        return False

    def _own_session(self, action: StartEpisode, context: dict[str, Any]) -> tuple[str, str | None]:
        """Open (or find, or skip) the session the pipeline owns: (session id, prior status)."""
        session_id = action.session_id if action.owned else None
        if session_id is None and self._session_id_for is not None:
            session_id = self._session_id_for(action.t_ns)
        status = self.writer.session_status(session_id) if session_id is not None else None
        if status is None and self._stored_until_ns is not None and action.t_ns < self._stored_until_ns:
            status = "ended"  # its data is stored under another episode's id: skipped, not written twice
            self.stats.episodes_stored_by_other_options += 1
        if status == "open":
            self.writer.forget_session_records(session_id or "")
            self.stats.episodes_rewritten += 1
        elif status is None:
            session_id = self.writer.start_session(self.collection, context, session_id)
        else:
            self.writer.skip_session(session_id or "")
            self.stats.episodes_skipped += 1
        assert session_id is not None
        return session_id, status

    def _end(self, action: EndEpisode) -> None:
        """The open episode ended: hold it for late messages, or finish it now without ``late_grace_s``."""
        episode = self._episode
        assert episode is not None
        if not self._grace_ns:
            self._finish(action)
            return
        end_ns = episode.end_ns(action)
        self._held = _Held(action, end_ns, end_ns + self._grace_ns)

    def _pass_time(self, now_ns: int, arrived_ns: int) -> None:
        """A message of time ``now_ns`` arrived at ``arrived_ns``: finish a held episode whose window is
        over, apply the idle and maximum-duration rules to the open one (on message time, as always).
        An idle end is found ``idle_gap_s`` after the last motion, so its window may be over at once:
        hence the second check."""
        self._expire(arrived_ns)
        self._advance(now_ns)
        self._expire(arrived_ns)

    def _expire(self, now_ns: int) -> None:
        """Message time has passed the held episode's grace window: finish it."""
        if self._held is not None and now_ns > self._held.until_ns:
            self._finish_held()

    def _finish_held(self) -> None:
        """Finish the held episode, then handle what waited behind it (it may open and end the next ones)."""
        held, self._held = self._held, None
        assert held is not None
        self._finish(held.end)
        for item in held.waiting:
            self._route(item)

    def _finish(self, action: EndEpisode) -> None:
        """Write the episode's last chunks and summary and end its session (release an attached one)."""
        episode = self._episode
        assert episode is not None
        self._drain(self._converters())
        self._episode = None
        if episode.skipping:
            return
        self._ended_until_ns = episode.end_ns(action)
        summaries = [s for h in self._converters() if h.converter is not None
                     for s in [h.converter.episode_summary()] if s is not None]
        summary = episode_summary_record(
            episode.context, policy=self.policy.name, start_ns=episode.start_ns, end_ns=self._ended_until_ns,
            messages=episode.messages, facts=episode.facts, topic_summaries=summaries, task=episode.task,
            outcome_score=action.score, gaps=episode.gaps,
        )
        self.writer.write([("(episode)", _storable(summary))])
        if episode.owned:
            self.writer.end_session(episode.context.session_id, action.score)
        else:
            self.writer.release_session(episode.context.session_id)  # its owner ends the session
        self.stats.episodes_ended += 1


def _storable(value: Any) -> Any:
    """``value`` with each NUL and lone surrogate in its text (keys too) replaced by U+FFFD.

    The summary gathers text from every message of the episode (a pose topic's frame ids): one
    message whose frame_id held a NUL or a lone surrogate is refused on its own, but its frame
    in the summary's metadata got the whole summary refused as well, on both stores. Replaced,
    the summary is stored and still shows that an unreadable frame was there."""
    if isinstance(value, str):
        if value.isascii() and "\x00" not in value:
            return value
        return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    return value


#: the sections of a note's context the bridge writes a key into (_on_learn), and that key
_NOTE_SECTIONS = {"source": "topic", "robot": "id", "episode": "key"}


def _parse_learn(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Plain text, or JSON ``{"insight": ..., "context": {...}}``."""
    text = data["data"]
    if not isinstance(text, str) or not text.strip():
        raise ValueError("learn: 'data' must be a non-empty string")
    stripped = text.strip()
    if stripped.startswith("{"):
        obj = json.loads(stripped)
        if not isinstance(obj, dict) or not isinstance(obj.get("insight"), str) or not obj["insight"].strip():
            raise ValueError("learn: JSON form needs a non-empty string 'insight'")
        context = obj.get("context") or {}
        if not isinstance(context, dict):
            raise ValueError("learn: 'context' must be a JSON object")
        for section in _NOTE_SECTIONS:
            if section in context and not isinstance(context[section], dict):
                # _on_learn adds its keys inside: a string there raised AttributeError out of
                # feed, which stopped a replay of the recording (every time) and lost the note live.
                raise ValueError(f"learn: context '{section}' must be a JSON object (the bridge adds "
                                 f"{section}.{_NOTE_SECTIONS[section]} to it)")
        return obj["insight"].strip(), dict(context)
    return stripped, {}


def _session_context(
    marker: dict[str, Any], robot_id: str | None, source: dict[str, str], policy: str, start_ns: int
) -> dict[str, Any]:
    context: dict[str, Any] = {"source": dict(source, policy=policy), "episode": {"t_start_ns": start_ns}}
    if robot_id:
        context["robot"] = {"id": robot_id}
    for key, value in marker.items():
        if isinstance(value, dict) and isinstance(context.get(key), dict):
            context[key] = {**context[key], **value}
        else:
            context[key] = value
    return context
