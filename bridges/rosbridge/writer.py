"""The writer thread: the only thread that touches the (not thread-safe) pipeline.

It drains the inbox in batches, converts each rosbridge message and feeds it to the
pipeline, and lets time pass (``tick``) when the robot is quiet, so idle episodes end
and chunks flush on time. Stopping drains everything already received before the
pipeline is closed: a message that reached the bridge is in the store afterwards.

Until the first stamped message shows which clock the robot stamps with (sim time
starts near zero; wall time does not), messages without a stamp — episode markers,
learn notes — are held back for up to ``clock_grace_s`` and then released in order, so
an episode that starts with a marker does not start decades away from its data.

Time can go back while the bridge runs: Gazebo's "reset world" restarts sim time near 0, a
robot's clock is stepped back by NTP. A stamped message far off the clock (more than
``convert.CLOCK_JUMP_S``, 1 s) is held, with everything after it, until the clock has decided: it
follows a lasting change after a few messages (then the held ones are placed on the new
clock, not the old one) or the next message agrees with it (one bad stamp: released as it
was). When a stamped message lands, on the clock, more than ``CLOCK_JUMP_S`` before the latest
message, and its stamp that far before its topic's last one, the pipeline is told
(``Pipeline.time_reset``): the episode is split there. Its own topic must have gone back too:
topics stamped by clocks a minute apart swing the clock (a median) between them, which puts
arrival times back by as much while no stream's time goes back.

rosbridge forwards each topic on its own queue, so around a reset the topics' messages cross:
one topic's first messages on the new clock arrive before another's last ones on the old. When the
clock has jumped back, the messages on the new clock wait (``_ClockSwitch``) until every topic
heard on the old clock in the last ``SWITCH_RECENT_S`` has sent one on the new clock too (at most
``clock_grace_s``); the ones still on the old clock are fed first, into the episode they belong to.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from bridges.pipeline.messages import RosMessage

from .convert import CLOCK_JUMP_NS, MalformedMessage, MessageClock, has_stamp, raw_stamp_ns, to_ros_message
from .inbox import BoundedInbox, Received

__all__ = ["IngestWriter", "PipelineLike", "WriterCounters"]

LOG = logging.getLogger("bridges.rosbridge")

#: after the clock jumped back, a topic heard on the old clock this recently (receive time) is
#: waited for: its messages still in flight belong before the reset
SWITCH_RECENT_S = 1.0


@dataclass
class _ClockSwitch:
    """The clock jumped back; messages on the new clock wait for the other topics' stragglers."""

    old_offset_ns: int
    #: topics heard on the old clock recently that have sent nothing on the new clock yet
    waiting: set[str]
    #: messages on the new clock (and unstamped ones), fed when no topic waits any more
    held: list[Received]
    #: receive time of the first message on the new clock
    since_ns: int


class PipelineLike(Protocol):
    """What the writer needs from ``bridges.pipeline.Pipeline``."""

    def feed(self, msg: RosMessage) -> None: ...

    def tick(self, now_ns: int) -> None: ...

    def note_gap(self, start_ns: int, end_ns: int, reason: str) -> None: ...

    def close(self) -> Any: ...

    def time_reset(self, t_ns: int) -> None: ...


@dataclass
class WriterCounters:
    """Written only by the writer thread; read (racily, for display) by others."""

    fed: Counter[str] = field(default_factory=Counter)
    #: rejected before the pipeline (not a JSON object, bad base64, bad type name)
    malformed: Counter[str] = field(default_factory=Counter)
    #: the pipeline raised (it should not): logged, counted, the bridge goes on
    feed_errors: int = 0
    #: times the robot's clock went back (see the module docstring)
    time_resets: int = 0
    #: receive -> fed, seconds: the latest, the worst since the last reset, the worst of the run
    lag_s: float = 0.0
    max_lag_s: float = 0.0
    worst_lag_s: float = 0.0


class IngestWriter:
    """Owns the pipeline on a thread of its own."""

    def __init__(self, inbox: BoundedInbox, pipeline: PipelineLike, *, batch_size: int = 500,
                 tick_interval_s: float = 0.5, progress: threading.Condition | None = None,
                 clock_grace_s: float = 2.0) -> None:
        self.inbox = inbox
        self.pipeline = pipeline
        self.batch_size = batch_size
        self.tick_interval_s = tick_interval_s
        self.counters = WriterCounters()
        self.clock = MessageClock()
        self.clock_grace_ns = int(clock_grace_s * 1e9)
        #: unstamped messages waiting for the clock (see the module docstring)
        self._held: list[Received] = []
        #: a stamp far off the clock and everything after it, until the clock decides (module docstring)
        self._suspects: list[Received] = []
        #: the clock's offset when the first suspect came
        self._offset_before_ns = 0
        #: the first suspect's stamp went back on its own topic: a sign of a reset, which another
        #: topic's message on the old clock (one still in flight) does not overrule
        self._suspect_went_back = False
        #: the clock jumped back and messages on the new clock wait for the old one's stragglers
        self._switch: _ClockSwitch | None = None
        #: each stamped topic's latest receive time fed to the pipeline (wall clock)
        self._heard_ns: dict[str, int] = {}
        #: the newest arrival time fed to the pipeline, on the robot's clock
        self._latest_arrival_ns: int | None = None
        #: each topic's newest header stamp since the last reset
        self._latest_stamp_ns: dict[str, int] = {}
        #: receive time (wall clock) of the newest message fed to the pipeline
        self._fed_receive_ns: int | None = None
        self.final_stats: Any = None
        #: notified after every batch, so others can wait for the writer to catch up
        self.progress = progress or threading.Condition()
        self._stop = threading.Event()
        #: connection outages (wall-clock ns) waiting to become gaps, handed over by roslibpy's thread
        self._outages: list[tuple[int, int]] = []
        self._outages_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="robotmem-bridge-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> Any:
        """Feed everything queued, close the pipeline (final flush), return its stats."""
        self._stop.set()
        self._thread.join(timeout)
        return self.final_stats

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def note_outage(self, lost_ns: int, back_ns: int) -> None:
        """The connection was down from ``lost_ns`` to ``back_ns`` (wall clock): a gap. Any thread."""
        with self._outages_lock:
            self._outages.append((lost_ns, back_ns))

    def _record_outages(self) -> None:
        with self._outages_lock:
            outages, self._outages = self._outages, []
        for lost_ns, back_ns in outages:
            to_message_time = self.clock.to_message_time
            self.pipeline.note_gap(to_message_time(lost_ns), to_message_time(back_ns),
                                   f"disconnected from rosbridge for {(back_ns - lost_ns) / 1e9:.1f} s")

    def reset_max_lag(self) -> float:
        worst, self.counters.max_lag_s = self.counters.max_lag_s, 0.0
        return worst

    def _run(self) -> None:
        try:
            while not (self._stop.is_set() and len(self.inbox) == 0):
                batch = self.inbox.take(self.batch_size, timeout=self.tick_interval_s)
                self._record_outages()  # noted before any message of the new connection arrived
                # Popped, not iterated: a message fed is let go at once, not when the batch ends
                # (a store write stalling mid-batch would otherwise keep every frame of it).
                batch.reverse()
                while batch:
                    self._feed(batch.pop())
                self._tick()
                with self.progress:
                    self.progress.notify_all()
        finally:
            self._release_suspects()
            self._end_switch()
            self._release_held(assume_wall=True)
            self.final_stats = self._close_pipeline()
            with self.progress:
                self.progress.notify_all()

    def _feed(self, item: Received) -> None:
        if self._switch is not None:
            self._feed_while_switching(self._switch, item)
        elif self.clock.synced:
            stamp_ns = raw_stamp_ns(item)
            if not self._suspects and not (stamp_ns > 0 and self.clock.disagrees(stamp_ns, item.receive_ns)):
                self._feed_converted(item, self._convert(item))
                return
            if not self._suspects:
                self._offset_before_ns = self.clock.offset_ns
                last = self._latest_stamp_ns.get(item.topic)
                self._suspect_went_back = last is not None and stamp_ns < last - CLOCK_JUMP_NS
            self._suspects.append(item)
            if stamp_ns > 0:
                self._judge_suspects(item.topic, stamp_ns, item.receive_ns)
        elif not has_stamp(item):
            self._held.append(item)
        else:
            msg = self._convert(item)  # observes the clock first ...
            self._release_held()  # ... so the held ones land before it, on its clock
            self._feed_converted(item, msg)

    def _judge_suspects(self, topic: str, stamp_ns: int, receive_ns: int) -> None:
        """A stamped message while suspects wait: release them once the clock has decided.

        A message on the old clock says the first suspect was one bad stamp, unless that suspect's
        stamp went back on its own topic and the message is another topic's: rosbridge forwards
        each topic on its own queue, so after a simulator reset another topic's messages stamped
        before it still arrive for a moment. Then only the suspect's own topic, or the clock's
        lasting change, decides."""
        agrees = not self.clock.disagrees(stamp_ns, receive_ns)
        self.clock.observe(stamp_ns, receive_ns)
        own_verdict = not self._suspect_went_back or topic == self._suspects[0].topic
        if (agrees and own_verdict) or self.clock.moved_from(self._offset_before_ns):
            self._release_suspects()

    def _release_suspects(self) -> None:
        """Feed the held suspects on the clock as it stands (each stamp already observed). After a
        lasting change, those stamped on the old clock (in flight when it jumped) go first, on the
        old clock, so that they land in the episode they belong to, before the reset is noticed."""
        suspects, self._suspects = self._suspects, []
        if self._suspect_went_back and suspects and self.clock.moved_from(self._offset_before_ns):
            since = suspects[0].receive_ns
            recent = {topic for topic, heard in self._heard_ns.items() if heard >= since - int(SWITCH_RECENT_S * 1e9)}
            self._switch = _ClockSwitch(self._offset_before_ns, recent, [], since)
        for item in suspects:  # the switch may end on any of them
            if self._switch is not None:
                self._feed_while_switching(self._switch, item, observed=True)
            else:
                self._feed_converted(item, self._convert(item, observe=False))

    def _feed_while_switching(self, switch: _ClockSwitch, item: Received, *, observed: bool = False) -> None:
        """A straggler on the old clock is fed at once, on the old clock; the rest waits (see the module
        docstring). ``observed``: the clock has seen its stamp (a released suspect)."""
        stamp_ns = raw_stamp_ns(item)
        if stamp_ns > 0:
            with self.clock.as_it_was(switch.old_offset_ns):
                if not self.clock.disagrees(stamp_ns, item.receive_ns):
                    self._feed_converted(item, self._convert(item, observe=False))
                    return
            if not observed:
                self.clock.observe(stamp_ns, item.receive_ns)
            switch.waiting.discard(item.topic)
        switch.held.append(item)
        if not switch.waiting or item.receive_ns - switch.since_ns >= self.clock_grace_ns:
            self._end_switch()

    def _end_switch(self) -> None:
        """Feed the messages on the new clock (the first one's stamp went back: the reset is noticed there)."""
        switch, self._switch = self._switch, None
        if switch is not None:
            for item in switch.held:
                self._feed_converted(item, self._convert(item, observe=False))

    def _release_held(self, *, assume_wall: bool = False) -> None:
        if assume_wall and not self.clock.synced:
            self.clock.assume_wall_clock()
        held, self._held = self._held, []
        for item in held:
            self._feed_converted(item, self._convert(item))

    def _convert(self, item: Received, *, observe: bool = True) -> RosMessage | None:
        try:
            return to_ros_message(item, self.clock, observe=observe)
        except MalformedMessage as exc:
            self.counters.malformed[item.topic] += 1
            LOG.warning("malformed message skipped: %s", exc)
            return None

    def _feed_converted(self, item: Received, msg: RosMessage | None) -> None:
        """Every message taken ends here once (fed, held ones when released, malformed ones as None)."""
        try:
            self._feed_one(item, msg)
        finally:
            self.inbox.done(item)

    def _feed_one(self, item: Received, msg: RosMessage | None) -> None:
        if msg is None:
            return
        stamp_ns = raw_stamp_ns(item)
        try:
            self._notice_time_reset(msg, stamp_ns)
            self.pipeline.feed(msg)
        except Exception:
            self.counters.feed_errors += 1
            LOG.exception("pipeline failed on a message from %s", item.topic)
            return
        self.counters.fed[item.topic] += 1
        self._fed_receive_ns = item.receive_ns
        if stamp_ns > 0:  # an unstamped topic (markers, notes) has no clock to move to
            self._heard_ns[item.topic] = item.receive_ns
        lag = (time.monotonic_ns() - item.receive_mono_ns) / 1e9
        self.counters.lag_s = lag
        self.counters.max_lag_s = max(self.counters.max_lag_s, lag)
        self.counters.worst_lag_s = max(self.counters.worst_lag_s, lag)

    def _notice_time_reset(self, msg: RosMessage, stamp_ns: int) -> None:
        """Tell the pipeline when the robot's clock went back (see the module docstring)."""
        arrived = msg.arrived_ns
        if arrived is None:
            return
        latest = self._latest_arrival_ns
        topic_latest = self._latest_stamp_ns.get(msg.topic)
        if stamp_ns > 0:
            self._latest_stamp_ns[msg.topic] = stamp_ns if topic_latest is None else max(topic_latest, stamp_ns)
        if (latest is not None and arrived < latest - CLOCK_JUMP_NS
                and stamp_ns > 0 and topic_latest is not None and stamp_ns < topic_latest - CLOCK_JUMP_NS):
            self._latest_stamp_ns = {msg.topic: stamp_ns}
            self.counters.time_resets += 1
            LOG.warning("the robot's clock went back %.1f s (a simulator reset, a clock stepped back?) at a "
                        "message on %s: the episode is split there", (latest - arrived) / 1e9, msg.topic)
            self.pipeline.time_reset(arrived)
            latest = None
        self._latest_arrival_ns = arrived if latest is None else max(latest, arrived)

    def _tick(self) -> None:
        if self._suspects and time.monotonic_ns() - self._suspects[0].receive_mono_ns >= self.clock_grace_ns:
            self._release_suspects()  # no majority came: one odd stamp on a quiet robot
        if self._switch is not None and self._switch.held and \
                time.monotonic_ns() - self._switch.held[0].receive_mono_ns >= self.clock_grace_ns:
            self._end_switch()  # a topic fell silent at the reset
        if self._held and time.monotonic_ns() - self._held[0].receive_mono_ns >= self.clock_grace_ns:
            self._release_held(assume_wall=True)
        if not self.clock.synced:
            return  # no message yet: no idea which clock the robot uses
        # While messages wait in the inbox, time has come only as far as the newest one fed: a
        # writer behind the websocket must not close an ended episode's late_grace_s window (or
        # find an idle end) before it has seen the messages that arrived in time.
        # Held suspects (a frame arriving late, far off the clock) count as waiting messages too.
        if self._suspects:
            now_ns = self._suspects[0].receive_ns
        elif len(self.inbox) == 0 or self._fed_receive_ns is None:
            now_ns = time.time_ns()
        else:
            now_ns = self._fed_receive_ns
        try:
            self.pipeline.tick(self.clock.to_message_time(now_ns))
        except Exception:
            self.counters.feed_errors += 1
            LOG.exception("pipeline tick failed")

    def _close_pipeline(self) -> Any:
        try:
            return self.pipeline.close()
        except Exception:
            LOG.exception("closing the pipeline failed: buffered records may be lost")
            self.counters.feed_errors += 1
            return None
