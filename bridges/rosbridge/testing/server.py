"""A rosbridge v2 protocol server on loopback, standing in for a robot's rosbridge.

It speaks the wire protocol of ``rosbridge_server`` (JSON text frames over a
websocket): clients ``subscribe`` (with ``throttle_rate``/``queue_length``),
``advertise``/``publish``, ``call_service``/``service_response`` and
``advertise_service``; the server ``publish``-es topic messages, answers the
rosapi services ``/rosapi/topics``, ``/rosapi/topic_type``, ``/rosapi/topics_for_type``
and ``/rosapi/publishers`` and reports problems with ``status`` messages. As the real
rosapi does, ``/rosapi/topics`` lists a topic that only has subscribers (a client's
subscription makes one) and ``/rosapi/publishers`` names no publisher for it.

It is also the "ROS graph": a message a client publishes reaches every other
subscriber, and the test itself acts as a ROS node through :meth:`publish`,
:meth:`wait_for_message` and :meth:`call_service`. It can drop every connection
mid-stream (:meth:`drop_connections`) or stop and come back on the same port
(:meth:`restart`), which is what a robot or simulator restarting looks like.

The server runs its own asyncio loop on a daemon thread; every public method is
thread-safe and blocks until the loop has done the work.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11 on

__all__ = ["RosbridgeTestServer", "StreamHandle", "Subscription"]

T = TypeVar("T")
_ROSAPI_TOPICS = "/rosapi/topics"
_ROSAPI_TOPIC_TYPE = "/rosapi/topic_type"
_ROSAPI_TOPICS_FOR_TYPE = "/rosapi/topics_for_type"
_ROSAPI_PUBLISHERS = "/rosapi/publishers"
#: the node the test acts as when it publishes (add_topic, publish)
TEST_NODE = "/test_node"
#: the node a client's advertised topic is published by, as with the real server
_ROSBRIDGE_NODE = "/rosbridge_websocket"


@dataclass
class Subscription:
    """One client's ``subscribe`` op, as the server received it."""

    client: int
    sub_id: str | None
    topic: str
    msgtype: str | None
    throttle_rate: int
    queue_length: int
    last_sent: float = 0.0


@dataclass
class StreamHandle:
    """A running :meth:`RosbridgeTestServer.start_stream`; ``done`` is set when it ends."""

    topic: str
    sent: int = 0
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Client:
    ident: int
    connection: ServerConnection
    advertised_services: set[str] = field(default_factory=set)


class RosbridgeTestServer:
    """A loopback rosbridge v2 server. Use as a context manager or call start()/close()."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, ros_version: int = 2,
                 rosapi: bool = True) -> None:
        if ros_version not in (1, 2):
            raise ValueError("ros_version must be 1 or 2")
        self.host = host
        self.port = port
        self.ros_version = ros_version
        self.rosapi = rosapi
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rosbridge-test-server",
                                        daemon=True)
        self._server: Server | None = None
        self._clients: dict[int, _Client] = {}
        self._client_ids = itertools.count(1)
        self._call_ids = itertools.count(1)
        self._topics: dict[str, str] = {}
        self._subscriptions: list[Subscription] = []
        #: topic -> the nodes publishing it (the test node, rosbridge for clients' advertisements)
        self._publishers: dict[str, set[str]] = defaultdict(set)
        self._pending_calls: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._changed = threading.Condition()
        self._received: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._ops: list[dict[str, Any]] = []
        self._connections_total = 0

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def start(self) -> None:
        """Start listening (on ``port``; 0 picks a free port, kept for restarts)."""
        if not self._thread.is_alive():
            self._thread.start()
        self._run(self._listen())

    def stop(self) -> None:
        """Stop listening and close every connection abruptly, like a crashed server."""
        self._run(self._shutdown())

    def restart(self) -> None:
        """Stop, forget all subscriptions (a new process knows none), listen again on the same port."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and end the loop thread."""
        if self._thread.is_alive():
            self.stop()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def drop_connections(self) -> None:
        """Abort every client connection mid-stream; the server keeps listening."""
        self._run(self._abort_clients())

    # ------------------------------------------------------------------ the ROS graph

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare a topic as existing (a ROS node publishes it), so rosapi lists it."""
        with self._changed:
            self._topics[topic] = msgtype
            self._publishers[topic].add(TEST_NODE)

    def topic_type(self, topic: str) -> str | None:
        with self._changed:
            return self._topics.get(topic)

    def publish(self, topic: str, msg: dict[str, Any]) -> int:
        """Publish as a ROS node: deliver to every subscribed client. Returns deliveries."""
        with self._changed:
            self._publishers[topic].add(TEST_NODE)
        return self._run(self._deliver(topic, msg))

    def publish_raw(self, client_text: str) -> int:
        """Send one raw text frame to every client (for malformed-input tests)."""
        return self._run(self._send_raw_to_all(client_text))

    def start_stream(self, topic: str, make_msg: Callable[[int], dict[str, Any]], rate_hz: float,
                     count: int) -> StreamHandle:
        """Publish ``make_msg(i)`` for i in 0..count-1 at ``rate_hz`` on the server loop."""
        handle = StreamHandle(topic)
        asyncio.run_coroutine_threadsafe(self._stream(handle, make_msg, rate_hz, count), self._loop)
        return handle

    def call_service(self, service: str, args: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Call a service a client advertised; returns the ``service_response`` op."""
        return self._run(self._call_client_service(service, args, timeout), timeout + 1)

    # ------------------------------------------------------------------ observation

    def subscriptions(self, topic: str | None = None) -> list[Subscription]:
        with self._changed:
            return [s for s in self._subscriptions if topic is None or s.topic == topic]

    def received(self, topic: str) -> list[dict[str, Any]]:
        """Messages clients published on ``topic`` (the ``msg`` field), in arrival order."""
        with self._changed:
            return list(self._received[topic])

    def ops(self, op: str | None = None) -> list[dict[str, Any]]:
        """Every op clients sent, in arrival order (optionally only one kind)."""
        with self._changed:
            return [o for o in self._ops if op is None or o.get("op") == op]

    @property
    def connections_total(self) -> int:
        with self._changed:
            return self._connections_total

    @property
    def client_count(self) -> int:
        with self._changed:
            return len(self._clients)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate()`` holds after some server event; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_for_subscription(self, topic: str, timeout: float = 10.0, *, count: int = 1) -> Subscription:
        """Block until at least ``count`` subscriptions to ``topic`` exist; return the latest."""
        if not self.wait_until(lambda: len(self._subs_locked(topic)) >= count, timeout):
            raise TimeoutError(f"no subscription to {topic} within {timeout} s")
        return self.subscriptions(topic)[-1]

    def wait_for_message(self, topic: str, predicate: Callable[[dict[str, Any]], bool] = lambda m: True,
                         timeout: float = 10.0) -> dict[str, Any]:
        """Block until a client publishes a message on ``topic`` matching ``predicate``."""
        found: list[dict[str, Any]] = []

        def seen() -> bool:
            found[:] = [m for m in self._received[topic] if predicate(m)]
            return bool(found)

        if not self.wait_until(seen, timeout):
            raise TimeoutError(f"no matching message on {topic} within {timeout} s")
        return found[0]

    # ------------------------------------------------------------------ loop-side internals

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _subs_locked(self, topic: str) -> list[Subscription]:
        return [s for s in self._subscriptions if s.topic == topic]

    async def _listen(self) -> None:
        if self._server is not None:
            return
        # max_size=None: camera frames are bigger than websockets' 1 MiB default, as on rosbridge.
        self._server = await serve(self._handle, self.host, self.port, max_size=None,
                                   ping_interval=None)
        sockets = self._server.sockets
        self.port = sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is None:
            return
        self._server.close(close_connections=False)
        await self._abort_clients()
        await self._server.wait_closed()
        self._server = None
        with self._changed:
            self._subscriptions.clear()

    async def _abort_clients(self) -> None:
        for client in list(self._clients.values()):
            client.connection.transport.abort()
        # Let the handlers observe the abort and unregister before returning.
        while self._clients:
            await asyncio.sleep(0.001)

    async def _handle(self, connection: ServerConnection) -> None:
        client = _Client(next(self._client_ids), connection)
        with self._changed:
            self._clients[client.ident] = client
            self._connections_total += 1
            self._changed.notify_all()
        try:
            async for frame in connection:
                await self._dispatch(client, frame)
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                self._clients.pop(client.ident, None)
                self._subscriptions = [s for s in self._subscriptions if s.client != client.ident]
                self._changed.notify_all()

    async def _dispatch(self, client: _Client, frame: str | bytes) -> None:
        try:
            op = json.loads(frame)
        except ValueError as exc:
            await self._status(client, "error", f"cannot parse frame: {exc}")
            return
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            await self._status(client, "error", "cannot parse frame: not a rosbridge op object")
            return
        with self._changed:
            self._ops.append(op)
        handler = self._handlers().get(op["op"])
        if handler is None:
            await self._status(client, "error", f"unknown op {op['op']!r}", op.get("id"))
        else:
            await handler(client, op)
        self._notify()

    def _handlers(self) -> dict[str, Callable[[_Client, dict[str, Any]], Coroutine[Any, Any, None]]]:
        return {
            "subscribe": self._on_subscribe,
            "unsubscribe": self._on_unsubscribe,
            "advertise": self._on_advertise,
            "unadvertise": self._ignore,
            "publish": self._on_publish,
            "call_service": self._on_call_service,
            "advertise_service": self._on_advertise_service,
            "unadvertise_service": self._on_unadvertise_service,
            "service_response": self._on_service_response,
            "set_level": self._ignore,
        }

    async def _ignore(self, client: _Client, op: dict[str, Any]) -> None:
        return None

    async def _on_subscribe(self, client: _Client, op: dict[str, Any]) -> None:
        topic = op.get("topic")
        if not isinstance(topic, str):
            await self._status(client, "error", "subscribe: missing topic", op.get("id"))
            return
        msgtype = op.get("type")
        known = self._topics.get(topic)
        if known is None and not msgtype:
            # rosbridge (ROS 2) cannot subscribe to an unknown topic without a type.
            await self._status(client, "error",
                               f"Cannot infer topic type for topic {topic} as it is not yet advertised", op.get("id"))
            return
        with self._changed:
            if known is None and isinstance(msgtype, str):
                self._topics[topic] = msgtype
            self._subscriptions.append(Subscription(
                client.ident, op.get("id"), topic, msgtype if isinstance(msgtype, str) else None,
                int(op.get("throttle_rate") or 0), int(op.get("queue_length") or 0)))

    async def _on_unsubscribe(self, client: _Client, op: dict[str, Any]) -> None:
        with self._changed:
            self._subscriptions = [
                s for s in self._subscriptions
                if not (s.client == client.ident and s.topic == op.get("topic")
                        and (op.get("id") is None or s.sub_id == op.get("id")))]

    async def _on_advertise(self, client: _Client, op: dict[str, Any]) -> None:
        topic, msgtype = op.get("topic"), op.get("type")
        if isinstance(topic, str) and isinstance(msgtype, str):
            with self._changed:
                self._topics.setdefault(topic, msgtype)
                self._publishers[topic].add(_ROSBRIDGE_NODE)

    async def _on_publish(self, client: _Client, op: dict[str, Any]) -> None:
        topic, msg = op.get("topic"), op.get("msg")
        if not isinstance(topic, str) or not isinstance(msg, dict):
            await self._status(client, "error", "publish: needs topic and msg", op.get("id"))
            return
        with self._changed:
            self._received[topic].append(msg)
        await self._deliver(topic, msg)

    async def _on_advertise_service(self, client: _Client, op: dict[str, Any]) -> None:
        service = op.get("service")
        if isinstance(service, str):
            client.advertised_services.add(service)

    async def _on_unadvertise_service(self, client: _Client, op: dict[str, Any]) -> None:
        client.advertised_services.discard(str(op.get("service")))

    async def _on_service_response(self, client: _Client, op: dict[str, Any]) -> None:
        future = self._pending_calls.pop(str(op.get("id")), None)
        if future is not None and not future.done():
            future.set_result(op)

    async def _on_call_service(self, client: _Client, op: dict[str, Any]) -> None:
        service = op.get("service")
        args = op.get("args") or {}
        result: tuple[bool, Any]
        if service == _ROSAPI_TOPICS and self.rosapi:
            with self._changed:
                result = True, {"topics": list(self._topics), "types": list(self._topics.values())}
        elif service == _ROSAPI_TOPIC_TYPE and self.rosapi:
            with self._changed:
                result = True, {"type": self._topics.get(str(args.get("topic")), "")}
        elif service == _ROSAPI_PUBLISHERS and self.rosapi:
            with self._changed:
                result = True, {"publishers": sorted(self._publishers.get(str(args.get("topic")), ()))}
        elif service == _ROSAPI_TOPICS_FOR_TYPE and self.rosapi:
            with self._changed:
                result = True, {"topics": [t for t, ty in self._topics.items() if ty == args.get("type")]}
        else:
            provider = next((c for c in self._clients.values() if service in c.advertised_services), None)
            if provider is None:
                result = False, f"Service {service} does not exist"
            else:
                response = await self._forward_call(provider, str(service), args, 10.0)
                result = bool(response.get("result", True)), response.get("values")
        reply: dict[str, Any] = {"op": "service_response", "service": service, "values": result[1],
                                 "result": result[0]}
        if "id" in op:
            reply["id"] = op["id"]
        await self._send(client, reply)

    async def _forward_call(self, provider: _Client, service: str, args: dict[str, Any],
                            timeout: float) -> dict[str, Any]:
        call_id = f"service_request:{service}:{next(self._call_ids)}"
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._pending_calls[call_id] = future
        await self._send(provider, {"op": "call_service", "id": call_id, "service": service, "args": args})
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending_calls.pop(call_id, None)

    async def _call_client_service(self, service: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        provider = next((c for c in self._clients.values() if service in c.advertised_services), None)
        if provider is None:
            raise LookupError(f"no client advertises {service}")
        return await self._forward_call(provider, service, args, timeout)

    async def _deliver(self, topic: str, msg: dict[str, Any]) -> int:
        frame = json.dumps({"op": "publish", "topic": topic, "msg": msg})
        now = time.monotonic()
        delivered = 0
        for sub in self._due_subscriptions(topic, now):
            client = self._clients.get(sub.client)
            if client is not None and await self._send_text(client, frame):
                delivered += 1
        return delivered

    def _due_subscriptions(self, topic: str, now: float) -> Iterator[Subscription]:
        """Subscriptions to deliver to now; throttle_rate (ms) drops what comes too soon, as rosbridge does."""
        with self._changed:
            subs = self._subs_locked(topic)
        for sub in subs:
            if sub.throttle_rate and (now - sub.last_sent) * 1000.0 < sub.throttle_rate:
                continue
            sub.last_sent = now
            yield sub

    async def _stream(self, handle: StreamHandle, make_msg: Callable[[int], dict[str, Any]],
                      rate_hz: float, count: int) -> None:
        # Publish on a fixed schedule; when the loop falls behind, catch up in a burst so the
        # average rate holds (asyncio timers are coarser than 1 ms).
        period = 1.0 / rate_hz
        start = time.monotonic()
        try:
            for i in range(count):
                due = start + i * period
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._deliver(handle.topic, make_msg(i))
                handle.sent += 1
        finally:
            handle.done.set()
            self._notify()

    async def _send(self, client: _Client, op: dict[str, Any]) -> bool:
        return await self._send_text(client, json.dumps(op))

    async def _send_text(self, client: _Client, text: str) -> bool:
        try:
            await client.connection.send(text)
            return True
        except ConnectionClosed:
            return False

    async def _send_raw_to_all(self, text: str) -> int:
        sent = 0
        for client in list(self._clients.values()):
            sent += await self._send_text(client, text)
        return sent

    async def _status(self, client: _Client, level: str, msg: str, op_id: Any = None) -> None:
        status: dict[str, Any] = {"op": "status", "level": level, "msg": msg}
        if op_id is not None:
            status["id"] = op_id
        await self._send(client, status)
