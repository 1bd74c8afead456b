"""The live bridge: rosbridge topics in, robotmem episodes/trajectories/perceptions out.

Threads and hand-overs::

    roslibpy loop thread --(subscriber callback: stamp + put, never blocks)--> BoundedInbox
    writer thread        --(convert, Pipeline.feed/tick, final close)--------> robotmem
    recall worker        --(Memory.recall, publish answer)-------------------> rosbridge
    control thread       --(rosapi discovery, status line)

Only the writer thread touches the pipeline. Stopping closes the websocket first, then
drains the inbox into the pipeline and closes it, so every message that reached the
bridge is written before :meth:`RosBridge.stop` returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridges.pipeline.config import BridgeConfig
from bridges.pipeline.episodes import EpisodePolicy, TopicEpisodes
from bridges.pipeline.outbox import RetryPolicy
from bridges.pipeline.pipeline import Pipeline
from bridges.pipeline.sizes import approx_bytes

from .connection import RosbridgeConnection, describe_failure, same_type
from .discovery import plan_subscriptions
from .inbox import BoundedInbox, Received
from .recall import REQUEST_TOPIC, RESPONSE_TOPIC, RecallResponder
from .sessions import ControlSessionFollower, marker_message
from .silence import SilentTopicWatch
from .status import BridgeSnapshot, format_status, format_summary
from .writer import IngestWriter

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11 on

    from robotmem import Memory

__all__ = ["BridgeOptions", "RosBridge", "default_episode_policy"]

LOG = logging.getLogger("bridges.rosbridge")
STRING_TYPE = "std_msgs/String"


@dataclass(frozen=True)
class BridgeOptions:
    url: str = "ws://127.0.0.1:9090"
    collection: str = "default"
    robot_id: str | None = None
    #: messages held between roslibpy and the writer; beyond this they are dropped (counted)
    queue_capacity: int = 20_000
    #: ... and their bytes (bridges/pipeline/sizes.py), the bound that matters for camera frames and
    #: point clouds: 256 MB is ~48 frames of 4 MB, and leaves a 4 GB board room for the robot's own stack
    queue_max_bytes: int = 256 * 2**20
    batch_size: int = 500
    status_interval_s: float = 5.0
    #: how often rosapi is asked for new topics (also after every reconnect); without rosapi, every 10 s
    discovery_interval_s: float = 1.0
    #: first reconnect attempt after this, then doubling up to reconnect_max_s
    reconnect_initial_s: float = 0.3
    reconnect_max_s: float = 2.0
    rosapi_timeout_s: float = 3.0
    #: a topic rosapi lists that delivers nothing for this long is named (silence.py)
    silent_topic_s: float = 5.0
    #: answer recall requests from ROS nodes (see bridges/rosbridge/recall.py)
    recall: bool = True
    recall_request_topic: str = REQUEST_TOPIC
    recall_response_topic: str = RESPONSE_TOPIC
    #: start/end episodes with sessions a control loop opens in the collection (see sessions.py)
    follow_control_sessions: bool = True
    follow_interval_s: float = 1.0
    #: a busy or failing store: writes are held and retried, bounded (bridges/pipeline/outbox.py)
    write_retry: RetryPolicy = field(default_factory=RetryPolicy)
    dry_run: bool = False


def default_episode_policy(config: BridgeConfig) -> EpisodePolicy:
    """Markers on the episode topic when a node sends them; otherwise automatic episodes
    that end after ``idle_gap_s`` without motion or at ``max_episode_s``."""
    marker = next((r.topic for r in config.explicit_topics() if r.converter == "episode"), "/robotmem/episode")
    return TopicEpisodes(marker, idle_gap_s=config.idle_gap_s, max_episode_s=config.max_episode_s, outside="auto")


class RosBridge:
    """One bridge run: :meth:`start`, then :meth:`stop` (which flushes) — or use ``with``."""

    def __init__(self, memory: Memory | None, config: BridgeConfig, options: BridgeOptions, *,
                 episode_policy: EpisodePolicy | None = None,
                 status_sink: Callable[[str], None] | None = None) -> None:
        self.memory = memory
        self.config = config
        self.options = options
        self._status_sink = status_sink or (lambda line: LOG.info("%s", line))
        self.connection = RosbridgeConnection(options.url, reconnect_initial_s=options.reconnect_initial_s,
                                              reconnect_max_s=options.reconnect_max_s,
                                              rosapi_timeout_s=options.rosapi_timeout_s)
        self.inbox = BoundedInbox(options.queue_capacity, options.queue_max_bytes)
        policy = episode_policy or default_episode_policy(config)
        self._marker_topic = policy.marker_topic
        #: topic -> the throttle it is subscribed with: the server samples those topics already
        self._throttle_ms: dict[str, int] = {}
        self.pipeline = Pipeline(memory, config, collection=options.collection, robot_id=options.robot_id,
                                 episode_policy=policy, source=options.url, dry_run=options.dry_run,
                                 write_retry=options.write_retry,
                                 upstream_interval_s=lambda topic: self._throttle_ms.get(topic, 0) / 1000)
        self.follower: ControlSessionFollower | None = None
        if options.follow_control_sessions and policy.marker_topic is not None and memory is not None:
            marker_topic = policy.marker_topic
            self.follower = ControlSessionFollower(
                memory, options.collection, lambda marker: self._inject(marker_topic, marker_message(marker)))
        self._progress = threading.Condition()
        self.writer = IngestWriter(self.inbox, self.pipeline, batch_size=options.batch_size,
                                   progress=self._progress)
        self.recall = RecallResponder(memory, self.connection.publish, collection=options.collection,
                                      request_topic=options.recall_request_topic,
                                      response_topic=options.recall_response_topic)
        self.discovery_log: list[str] = []
        #: what rosapi listed last (topic -> type); empty without rosapi
        self.listed: dict[str, str] = {}
        self._silence = SilentTopicWatch(options.silent_topic_s)
        self._said_failure: str | None = None
        self._said_retyped: set[tuple[str, str]] = set()
        self._discover_now = threading.Event()
        self._stopping = threading.Event()
        self._control = threading.Thread(target=self._control_loop, name="robotmem-bridge-control", daemon=True)
        self._started_at = 0.0
        self._final: BridgeSnapshot | None = None
        self._last_status: BridgeSnapshot | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._started_at = time.monotonic()
        self.writer.start()
        self.connection.on_ready(self._on_connected)
        self.connection.on_failure(self._on_connect_failure)
        self.connection.on_outage(self.writer.note_outage)
        self.connection.open()
        if self.options.recall:
            self.recall.start()
            self.connection.advertise(self.options.recall_response_topic, STRING_TYPE)
            self.connection.subscribe(self.options.recall_request_topic, STRING_TYPE, self.recall.on_message)
        self._control.start()

    def stop(self, timeout: float = 60.0) -> BridgeSnapshot:
        """Disconnect, write everything received, end the open episode; returns the final counters."""
        if self._final is not None:
            return self._final
        self._stopping.set()
        self._discover_now.set()  # wakes the control thread
        self.connection.close()
        # Frames already on the wire are still accepted until the socket is really closed.
        self.connection.wait_disconnected(5.0)
        self.inbox.close()
        self.recall.stop(timeout)
        self._control.join(timeout)
        self.writer.stop(timeout)
        self._final = self.snapshot()
        self._notify()
        return self._final

    def summary(self) -> str:
        return format_summary(self.snapshot(), time.monotonic() - self._started_at)

    def wait_connected(self, timeout: float) -> bool:
        return self.connection.wait_connected(timeout)

    def wait_until(self, predicate: Callable[[BridgeSnapshot], bool], timeout: float) -> bool:
        """Block until ``predicate(snapshot)`` holds (re-checked on every received/written batch)."""
        deadline = time.monotonic() + timeout
        with self._progress:
            while not predicate(self.snapshot()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._progress.wait(min(remaining, 0.25))
            return True

    # ------------------------------------------------------------------ counters

    def snapshot(self) -> BridgeSnapshot:
        stats = self.pipeline.stats
        counters = self.writer.counters
        conn = self.connection.counters
        malformed = dict(counters.malformed)
        for topic, topic_stats in list(stats.topics.items()):
            if topic_stats.malformed:
                malformed[topic] = malformed.get(topic, 0) + topic_stats.malformed
        return BridgeSnapshot(
            url=self.options.url, connected=self.connection.is_connected, connects=conn.connects,
            disconnects=conn.disconnects, received=self.inbox.accepted(), fed=dict(counters.fed),
            dropped=self.inbox.dropped(), malformed=malformed, bad_frames=conn.bad_frames,
            rejected={topic: t.rejected for topic, t in list(stats.topics.items()) if t.rejected},
            late={topic: t.late for topic, t in list(stats.topics.items()) if t.late},
            outside_episode={topic: t.outside_episode for topic, t in list(stats.topics.items()) if t.outside_episode},
            server_status=conn.server_status, feed_errors=counters.feed_errors, queue=len(self.inbox),
            queue_peak=self.inbox.peak, queue_capacity=self.inbox.capacity, queue_bytes=self.inbox.held_bytes,
            queue_peak_bytes=self.inbox.peak_bytes, queue_max_bytes=self.inbox.max_bytes or 0, lag_s=counters.lag_s,
            max_lag_s=counters.max_lag_s, worst_lag_s=counters.worst_lag_s,
            records_written=stats.records_written, facts_learned=stats.facts_learned,
            episodes_started=stats.episodes_started, episodes_ended=stats.episodes_ended,
            episodes_attached=stats.episodes_attached, write_retries=stats.write_retries,
            held_records=self.pipeline.writer.pending_records, held_bytes=self.pipeline.writer.pending_bytes,
            store_dropped=stats.records_dropped,
            last_write_s=stats.last_write_s, max_write_s=stats.max_write_s, recall_answered=self.recall.answered,
            recall_dropped=self.recall.dropped, subscribed=self.connection.subscribed_topics(),
            failed_attempts=self.connection.failed_attempts, gaps=stats.gaps, clock_resets=counters.time_resets)

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # ------------------------------------------------------------------ subscriptions

    def _on_message_for(self, topic: str, wire_type: str) -> Callable[[Any], None]:
        marker = topic == self._marker_topic

        def on_message(msg: Any) -> None:
            # roslibpy's thread: stamp, size (cheap: sizes.py) and hand over, nothing else.
            self.inbox.put(Received(topic, wire_type, msg, time.time_ns(), time.monotonic_ns(), approx_bytes(msg)),
                           always=marker)
            with self._progress:
                self._progress.notify_all()
        return on_message

    def discover(self) -> None:
        """Ask rosapi (when offered) what exists and subscribe to what the rules match."""
        available = self.connection.available_topics()
        self.listed = dict(available or {})
        report = plan_subscriptions(self.config, available)
        new = []
        for s in report.subscriptions:
            self._throttle_ms[s.topic] = s.throttle_rate_ms
            before = self.connection.subscribe(s.topic, s.wire_type, self._on_message_for(s.topic, s.wire_type),
                                               throttle_rate_ms=s.throttle_rate_ms, queue_length=s.queue_length)
            if before:
                self._status_sink(f"bridge: {s.topic} is now {s.wire_type} (was {before}): subscribed again "
                                  f"with the new type -> {s.converter}")
            if before is not None:
                new.append(s)
        self._warn_retyped()
        if new or not self.discovery_log:
            line = report.describe()
            self.discovery_log.append(line)
            self._status_sink(f"bridge: {line}")
        self._warn_silent()
        self._notify()

    def _warn_retyped(self) -> None:
        """Name, once per type, a subscribed topic the server now lists with a type no rule takes
        (one a rule takes was subscribed again with it)."""
        subscribed = self.connection.subscribed_topics()
        for topic, server_type in self.listed.items():
            if (server_type and topic in subscribed and not same_type(subscribed[topic], server_type)
                    and (topic, server_type) not in self._said_retyped):
                self._said_retyped.add((topic, server_type))
                self._status_sink(f"bridge: WARNING {topic} is now listed as {server_type}, subscribed as "
                                  f"{subscribed[topic]}: no rule takes that type, so nothing of it is stored")

    def _warn_silent(self) -> None:
        received = self.inbox.accepted()
        if self.options.recall:  # requests bypass the inbox
            received[self.options.recall_request_topic] = self.recall.received
        silent = self._silence.check(self.listed, self.connection.subscribed_topics(), received,
                                     time.monotonic(), self._published)
        for topic, msgtype in silent:
            self._status_sink(
                f"bridge: WARNING {topic} [{msgtype}] is listed as published but nothing arrived in "
                f"{self.options.silent_topic_s:.0f} s: the server may have refused the subscription (a message "
                f"type it cannot load?), or the publisher is quiet")

    def _published(self, topic: str) -> bool:
        """Whether a node publishes ``topic`` (rosapi); True when the server cannot tell (it has no
        ``/rosapi/publishers``). A question left unanswered because the connection went (a server
        restarting) says nothing: asked again on the next pass. Taken as True, it named every
        topic that only the bridge subscribes to as silent after a restart."""
        publishers = self.connection.topic_publishers(topic)
        if publishers is None:
            return self.connection.publishers_service is False
        return bool(publishers)

    # ------------------------------------------------------------------ control thread

    def _control_loop(self) -> None:
        """Discovery (on every reconnect and periodically), control-session polling, status."""
        opts = self.options
        jobs: list[tuple[float, Callable[[], None]]] = [(opts.discovery_interval_s, self._discover_if_connected),
                                                        (opts.status_interval_s, self._emit_status)]
        no_rosapi_interval = max(opts.discovery_interval_s, 10.0)  # each failed rosapi call waits its timeout
        if self.follower is not None:
            jobs.append((opts.follow_interval_s, self._follow_safely))
        now = time.monotonic()
        due = [now + interval for interval, _ in jobs]
        while not self._stopping.is_set():
            if self._discover_now.is_set():
                self._discover_now.clear()  # the next (re)connect sets it again
                due[0] = time.monotonic()
            for i, (interval, job) in enumerate(jobs):
                if time.monotonic() >= due[i]:
                    job()
                    if i == 0 and self.discovery_log and not self.listed:
                        interval = no_rosapi_interval
                    due[i] = time.monotonic() + interval
            self._discover_now.wait(max(0.0, min(due) - time.monotonic()))

    def _on_connected(self) -> None:
        # roslibpy's thread: announce, and let the control thread (re)discover topics.
        self._status_sink(f"bridge: connected to {self.options.url} "
                          f"(connection #{self.connection.counters.connects})")
        self._said_failure = None
        self._silence.restart()
        self._discover_now.set()

    def _on_connect_failure(self, reason: str) -> None:
        # roslibpy's thread: say why, once per reason; the status line counts the retries.
        kind = reason.partition(":")[0]  # a handshake's details vary from try to try; its kind does not
        if kind != self._said_failure:
            self._said_failure = kind
            self._status_sink(f"bridge: cannot connect to {self.options.url}: {describe_failure(reason)}; "
                              f"retrying at most every {self.options.reconnect_max_s:g} s")

    def _discover_if_connected(self) -> None:
        if self.connection.is_connected:
            self._discover_safely()

    def _emit_status(self) -> None:
        current = self.snapshot()
        self._status_sink(format_status(self._last_status, current, self.options.status_interval_s))
        self.writer.reset_max_lag()
        self._last_status = current

    def _follow_safely(self) -> None:
        assert self.follower is not None
        try:
            self.follower.poll()
        except Exception:  # a store hiccup must not end the bridge
            LOG.exception("following control sessions failed; will retry")

    def _inject(self, topic: str, msg: dict[str, Any]) -> None:
        """A bridge-made message (episode marker), queued like one from the robot."""
        self.inbox.put(Received(topic, STRING_TYPE, msg, time.time_ns(), time.monotonic_ns(), approx_bytes(msg)),
                       always=True)

    def _discover_safely(self) -> None:
        try:
            self.discover()
        except Exception:  # discovery problems must not end the bridge
            LOG.exception("topic discovery failed; will retry")
