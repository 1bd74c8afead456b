"""One rosbridge websocket connection that survives the server coming and going.

Built on ``roslibpy.Ros`` with the asyncio transport: the default Twisted transport
cannot be started again in a process after ``terminate()`` (ReactorNotRestartable),
and the two transports cannot be mixed in one process, so the bridge always uses
asyncio. roslibpy reconnects by itself with exponential backoff (here: first retry after
``reconnect_initial_s``, doubling up to ``reconnect_max_s``, so an outage costs at most
about its own length plus ``reconnect_max_s``); what it does not do well is restore state
afterwards (its ``Topic`` re-sends a subscription one second
after a drop, per topic, racing the reconnect). So this class keeps its own registry of
subscriptions and advertisements and sends all of them again, at once, on every
``ready`` event — before any message of the new connection can be missed by us.

roslibpy keeps the reason a connection attempt failed to a debug log line; a filter on
its logger (:class:`_ConnectFailureWatch`) hands it to us, so the bridge can say why it
cannot connect (refused, unknown host, handshake rejected) instead of only that it cannot.
Each outage (from losing the connection to having it back) is reported to ``on_outage``
listeners, which record it as a gap.

Threads: roslibpy runs its event loop on a thread of its own and calls the subscriber
callbacks and the ready/close handlers there. They must be quick and must not block;
everything blocking (rosapi calls) is for other threads only.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import roslibpy
from roslibpy.comm import select_factory
from roslibpy.core import RosTimeoutError, ServiceException

from bridges.pipeline.messages import normalize_msgtype
from robotmem.errors import ConfigError

__all__ = ["ConnectionCounters", "RosbridgeConnection", "same_type", "validate_url"]

LOG = logging.getLogger("bridges.rosbridge")
MessageCallback = Callable[[Any], None]
#: "('127.0.0.1', 9090)" in a connect error
_ADDRESS = re.compile(r"\('([^']*)', (\d+)")
#: backoff growth between reconnect attempts (roslibpy's default, e = 2.7, waited 9.8 s by the 4th try)
RECONNECT_FACTOR = 2.0


def validate_url(url: str) -> str:
    """A ``ws://host:port`` (or ``wss://``) URL, or ConfigError naming ``url``."""
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("ws", "wss") or not parsed.hostname:
        raise ConfigError(f"url: expected ws://HOST:PORT or wss://HOST:PORT, got {url!r}", field="url")
    try:
        _ = parsed.port  # urllib raises only when the port is read
    except ValueError as exc:
        raise ConfigError(f"url: bad port in {url!r}", field="url") from exc
    return url


@dataclass
class ConnectionCounters:
    connects: int = 0
    disconnects: int = 0
    published: int = 0
    unsent: int = 0
    #: frames roslibpy could not handle (not JSON, no op, publish without topic, ...)
    bad_frames: int = 0
    #: ``status`` ops from the server (rosbridge reports errors this way)
    server_status: int = 0


class _FrameErrorCounter(logging.Handler):
    """Counts the frames roslibpy drops.

    roslibpy's receive path catches every exception of a frame (bad JSON, unknown op,
    a handler failing) and only logs it, on the ``roslibpy`` logger, from its
    ``onMessage``; counting those records is the one way to see them without patching it.
    """

    def __init__(self, counters: ConnectionCounters) -> None:
        super().__init__(level=logging.ERROR)
        self.counters = counters

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and str(record.msg).startswith("Exception on start_listening"):
            self.counters.bad_frames += 1


class _ConnectFailureWatch(logging.Filter):
    """Takes roslibpy's "Connection attempt failed: <reason>" debug records (see the module docstring).

    Installed on the ``roslibpy`` logger with the logger lowered to DEBUG; every other record
    below the level the logger had before is dropped here, so nothing else gets louder.
    """

    PREFIX = "Connection attempt failed"

    def __init__(self, on_failure: Callable[[str], None], threshold: int) -> None:
        super().__init__()
        self.on_failure = on_failure
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(self.PREFIX):
            self.on_failure(str(record.args[0]) if isinstance(record.args, tuple) and record.args else
                            record.getMessage())
        return record.levelno >= self.threshold


def describe_failure(reason: str) -> str:
    """A connect error as a person would say it."""
    text = reason.lower()
    if "refused" in text or "errno 111" in text or "connect call failed" in text:
        return f"connection refused (is rosbridge running and listening there?): {reason}"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return f"unknown host: {reason}"
    if "timed out" in text:
        return f"no answer (timed out): {reason}"
    return reason


def same_type(a: str, b: str) -> bool:
    """``nav_msgs/Odometry`` and ``nav_msgs/msg/Odometry`` are one type (ROS 1 and ROS 2 spelling)."""
    try:
        return normalize_msgtype(a) == normalize_msgtype(b)
    except ValueError:
        return a == b


@dataclass(frozen=True)
class _Subscription:
    topic: str
    msgtype: str
    throttle_rate_ms: int
    queue_length: int


class RosbridgeConnection:
    """Subscriptions and advertisements that are restored after every reconnect."""

    def __init__(self, url: str, *, reconnect_initial_s: float = 0.3, reconnect_max_s: float = 2.0,
                 rosapi_timeout_s: float = 3.0) -> None:
        self.url = validate_url(url)
        self._port = urlparse(url).port or (443 if url.startswith("wss") else 80)
        self.rosapi_timeout_s = rosapi_timeout_s
        self.counters = ConnectionCounters()
        self._reconnect = (reconnect_initial_s, reconnect_max_s)
        self._lock = threading.Lock()
        self._subscribe_lock = threading.Lock()
        self._connected = threading.Condition(self._lock)
        self._subscriptions: dict[str, _Subscription] = {}
        self._callbacks: dict[str, MessageCallback] = {}
        self._advertised: dict[str, str] = {}
        self._proto: Any = None
        self._ros: roslibpy.Ros | None = None
        self._closing = False
        self._ready_listeners: list[Callable[[], None]] = []
        self._ids = 0
        self._frame_errors = _FrameErrorCounter(self.counters)
        self._failure_listeners: list[Callable[[str], None]] = []
        self._outage_listeners: list[Callable[[int, int], None]] = []
        #: wall-clock ns when the connection was lost (None: connected, or never connected)
        self._down_since_ns: int | None = None
        self._failure_watch: _ConnectFailureWatch | None = None
        self._roslibpy_level = logging.NOTSET
        #: whether the server answers ``/rosapi/publishers`` (None: not asked yet, or no answer either way)
        self.publishers_service: bool | None = None
        #: connection attempts that failed since the last successful one
        self.failed_attempts = 0
        self.last_failure: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Start connecting in the background; returns at once (the server may not be up yet)."""
        factory = select_factory("asyncio")
        # Class-level in roslibpy: applies to every asyncio connection of this process.
        factory.set_initial_delay(self._reconnect[0])
        factory.set_max_delay(self._reconnect[1])
        factory.factor = RECONNECT_FACTOR
        roslibpy_log = logging.getLogger("roslibpy")
        roslibpy_log.addHandler(self._frame_errors)
        self._roslibpy_level = roslibpy_log.level
        self._failure_watch = _ConnectFailureWatch(self._on_attempt_failed, roslibpy_log.getEffectiveLevel())
        roslibpy_log.addFilter(self._failure_watch)
        roslibpy_log.setLevel(logging.DEBUG)
        ros = roslibpy.Ros(self.url, transport="asyncio")
        ros.on("ready", self._on_ready)
        ros.on("close", self._on_close)
        # The connection may already be up (Ros connects in its constructor): catch that one
        # too. A distinct callable, because roslibpy keys listeners by function.
        ros.factory.on_ready(lambda proto: self._on_ready(proto))
        self._ros = ros

    def on_ready(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (on roslibpy's thread: keep it short) after every (re)connect."""
        self._ready_listeners.append(listener)

    def on_failure(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(reason)`` (roslibpy's thread) for every failed connection attempt."""
        self._failure_listeners.append(listener)

    def on_outage(self, listener: Callable[[int, int], None]) -> None:
        """Call ``listener(lost_ns, back_ns)`` (wall clock, roslibpy's thread) when a lost connection is back."""
        self._outage_listeners.append(listener)

    def wait_connected(self, timeout: float) -> bool:
        with self._connected:
            return self._connected.wait_for(lambda: self._proto is not None, timeout)

    def wait_disconnected(self, timeout: float) -> bool:
        with self._connected:
            return self._connected.wait_for(lambda: self._proto is None, timeout)

    @property
    def is_connected(self) -> bool:
        with self._lock:
            return self._proto is not None

    def close(self) -> None:
        """Disconnect for good: no more reconnect attempts."""
        with self._lock:
            self._closing = True
            proto = self._proto
        ros = self._ros
        if ros is None:
            return
        roslibpy_log = logging.getLogger("roslibpy")
        roslibpy_log.removeHandler(self._frame_errors)
        if self._failure_watch is not None:
            roslibpy_log.removeFilter(self._failure_watch)
            roslibpy_log.setLevel(self._roslibpy_level)
            self._failure_watch = None
        # roslibpy has no public "stop reconnecting" for a connection that is down; its
        # factory checks this flag before scheduling each retry.
        ros.factory._stop = True
        if proto is not None:
            proto.send_close()

    # ------------------------------------------------------------------ topics

    def subscribe(self, topic: str, msgtype: str, callback: MessageCallback, *, throttle_rate_ms: int = 0,
                  queue_length: int = 0) -> str | None:
        """Subscribe (now if connected, and again after every reconnect). None if already subscribed
        with this type; else the type it was subscribed with before ("" for a new subscription).

        A topic republished with another type is subscribed again with it: the server delivers
        nothing on a subscription of the old type (ROS 1 refuses the publisher's connection)."""
        sub = _Subscription(topic, msgtype, int(throttle_rate_ms), int(queue_length))
        assert self._ros is not None, "open() first"
        # Not under self._lock: roslibpy's emitter lock is held while it calls _on_ready,
        # which takes self._lock; taking them in the other order here could deadlock.
        with self._subscribe_lock:
            with self._lock:
                old = self._subscriptions.get(topic)
                old_callback = self._callbacks.get(topic)
            if old is not None and same_type(old.msgtype, msgtype):
                return None
            # The listener goes first: a reconnect may send the subscription any moment.
            self._ros.on(topic, callback)
            if old_callback is not None:
                self._ros.off(topic, old_callback)
            with self._lock:
                self._subscriptions[topic] = sub
                self._callbacks[topic] = callback
                proto = self._proto
        if proto is not None:
            if old is not None:
                self._send(proto, {"op": "unsubscribe", "id": f"subscribe:{topic}", "topic": topic})
            self._send(proto, self._subscribe_op(sub))
        return "" if old is None else old.msgtype

    def subscribed_topics(self) -> dict[str, str]:
        with self._lock:
            return {t: s.msgtype for t, s in self._subscriptions.items()}

    def advertise(self, topic: str, msgtype: str) -> None:
        with self._lock:
            self._advertised[topic] = msgtype
            proto = self._proto
        if proto is not None:
            self._send(proto, self._advertise_op(topic, msgtype))

    def publish(self, topic: str, msg: dict[str, Any]) -> bool:
        """Publish on an advertised topic; False (counted as unsent) when disconnected."""
        with self._lock:
            proto = self._proto
        if proto is None or topic not in self._advertised:
            self.counters.unsent += 1
            return False
        self._send(proto, {"op": "publish", "id": self._next_id("publish", topic), "topic": topic, "msg": msg})
        self.counters.published += 1
        return True

    # ------------------------------------------------------------------ rosapi

    def available_topics(self) -> dict[str, str] | None:
        """Topic -> type through rosapi; None when the server has no rosapi or does not answer.

        Blocks up to ``rosapi_timeout_s``; never call it from a subscriber callback.
        """
        if self._ros is None or not self.is_connected:
            return None
        service = roslibpy.Service(self._ros, "/rosapi/topics", "rosapi/Topics")
        try:
            result = service.call(roslibpy.ServiceRequest(), timeout=self.rosapi_timeout_s)
        except (ServiceException, RosTimeoutError, RuntimeError) as exc:
            LOG.info("rosapi topic discovery unavailable on %s: %s", self.url, exc)
            return None
        topics, types = result.get("topics"), result.get("types")
        if not isinstance(topics, list):
            return None
        if isinstance(types, list) and len(types) == len(topics):
            return {str(t): str(ty) for t, ty in zip(topics, types)}
        return {str(t): self._topic_type(str(t)) for t in topics}

    def topic_publishers(self, topic: str) -> list[str] | None:
        """The nodes publishing ``topic`` through rosapi (``/rosapi/publishers``, in rosbridge
        0.11 and every ROS 2 one); None when the server cannot tell. Blocks like available_topics."""
        if self._ros is None or not self.is_connected:
            return None
        service = roslibpy.Service(self._ros, "/rosapi/publishers", "rosapi/Publishers")
        try:
            result = service.call(roslibpy.ServiceRequest({"topic": topic}), timeout=self.rosapi_timeout_s)
        except ServiceException as exc:
            LOG.info("rosapi publishers unavailable on %s: %s", self.url, exc)
            self.publishers_service = False
            return None
        except (RosTimeoutError, RuntimeError) as exc:  # the connection went (a server restart) while asking
            LOG.info("rosapi publishers not answered on %s: %s", self.url, exc)
            return None
        self.publishers_service = True
        publishers = result.get("publishers")
        return [str(p) for p in publishers] if isinstance(publishers, list) else None

    def _topic_type(self, topic: str) -> str:
        assert self._ros is not None
        try:
            return str(self._ros.get_topic_type(topic))
        except (ServiceException, RosTimeoutError, RuntimeError, AssertionError):
            return ""

    # ------------------------------------------------------------------ roslibpy thread

    def _on_ready(self, proto: Any) -> None:
        with self._lock:
            if proto is self._proto:
                return  # the same connection reported twice (see open())
            closing = self._closing
            down_since, back_ns = self._down_since_ns, time.time_ns()
            if not closing:
                self._proto = proto
                self.counters.connects += 1
                subs = list(self._subscriptions.values())
                ads = dict(self._advertised)
                self._down_since_ns = None
                self.failed_attempts = 0
            self._connected.notify_all()
        if closing:
            proto.send_close()  # a retry that was already scheduled when we closed
            return
        # roslibpy 2.1 registers no handler for rosbridge's "status" op (a TODO in its
        # source), so server errors would surface as anonymous frame errors; log them.
        proto._message_handlers["status"] = self._on_status
        LOG.info("connected to %s (%d subscriptions restored)", self.url, len(subs))
        for topic, msgtype in ads.items():
            self._send(proto, self._advertise_op(topic, msgtype))
        for sub in subs:
            self._send(proto, self._subscribe_op(sub))
        for listener in self._ready_listeners:
            try:
                listener()
            except Exception:  # a listener bug must not kill roslibpy's loop
                LOG.exception("ready listener failed")
        if down_since is not None:
            for outage in self._outage_listeners:
                try:
                    outage(down_since, back_ns)
                except Exception:
                    LOG.exception("outage listener failed")

    def _on_attempt_failed(self, reason: str) -> None:
        # roslibpy's logger is shared by every connection of the process (a closed one may still
        # have a retry scheduled): a failure naming another address is not ours.
        address = _ADDRESS.search(reason)
        if address is not None and int(address.group(2)) != self._port:
            return
        with self._lock:
            if self._closing:
                return
            self.failed_attempts += 1
            self.last_failure = reason
        for listener in self._failure_listeners:
            try:
                listener(reason)
            except Exception:
                LOG.exception("failure listener failed")

    def _on_status(self, message: Any) -> None:
        self.counters.server_status += 1
        level = str(message.get("level", "info"))
        LOG.log(logging.WARNING if level in ("error", "warning") else logging.INFO,
                "rosbridge %s: %s", level, message.get("msg"))

    def _on_close(self, proto: Any) -> None:
        with self._lock:
            if proto is not self._proto:
                handshake = proto is not None and self._proto is None and not self._closing
            else:
                handshake = False
        if handshake:  # the socket opened, the websocket handshake did not
            reason = getattr(proto, "wasNotCleanReason", None) or "closed during the websocket handshake"
            self._on_attempt_failed(f"websocket handshake failed: {reason}")
            return
        with self._lock:
            if proto is not self._proto:
                return
            self._proto = None
            self._down_since_ns = time.time_ns()
            self.counters.disconnects += 1
            closing = self._closing
            self._connected.notify_all()
        if not closing:
            LOG.warning("lost connection to %s; retrying within %.1f s, then at most every %.1f s",
                        self.url, self._reconnect[0], self._reconnect[1])

    # ------------------------------------------------------------------ wire ops

    def _send(self, proto: Any, op: dict[str, Any]) -> None:
        proto.send_ros_message(roslibpy.Message(op))

    def _next_id(self, kind: str, topic: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{kind}:{topic}:{self._ids}"

    def _subscribe_op(self, sub: _Subscription) -> dict[str, Any]:
        return {"op": "subscribe", "id": f"subscribe:{sub.topic}", "topic": sub.topic, "type": sub.msgtype,
                "throttle_rate": sub.throttle_rate_ms, "queue_length": sub.queue_length,
                "compression": "none"}

    def _advertise_op(self, topic: str, msgtype: str) -> dict[str, Any]:
        return {"op": "advertise", "id": f"advertise:{topic}", "topic": topic, "type": msgtype,
                "latch": False, "queue_size": 100}
