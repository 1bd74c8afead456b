"""RosbridgeConnection against the loopback rosbridge server: subscribe, rosapi, reconnect."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bridges.rosbridge.connection import RosbridgeConnection, validate_url
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem.errors import ConfigError


class Collector:
    """A subscriber callback that lets the test wait for a number of messages."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.messages) >= count, timeout)


@pytest.fixture
def connection(rosbridge_server: RosbridgeTestServer,
               fast_reconnect: dict[str, float]) -> Iterator[RosbridgeConnection]:
    conn = RosbridgeConnection(rosbridge_server.url, **fast_reconnect)
    conn.open()
    assert conn.wait_connected(10)
    yield conn
    conn.close()


def test_subscribed_topic_delivers_published_messages_in_order(rosbridge_server: RosbridgeTestServer,
                                                               connection: RosbridgeConnection) -> None:
    got = Collector()
    connection.subscribe("/odom", "nav_msgs/msg/Odometry", got, throttle_rate_ms=0, queue_length=5)
    sub = rosbridge_server.wait_for_subscription("/odom")
    assert (sub.msgtype, sub.queue_length) == ("nav_msgs/msg/Odometry", 5)
    for i in range(20):
        rosbridge_server.publish("/odom", m.odometry(100 + i, float(i), 0.0))
    assert got.wait_for(20)
    assert [msg["pose"]["pose"]["position"]["x"] for msg in got.messages] == [float(i) for i in range(20)]


def test_rosapi_lists_topics_with_their_types(rosbridge_server: RosbridgeTestServer,
                                              connection: RosbridgeConnection) -> None:
    rosbridge_server.add_topic("/odom", "nav_msgs/msg/Odometry")
    rosbridge_server.add_topic("/camera/image_raw", "sensor_msgs/msg/Image")
    assert connection.available_topics() == {"/odom": "nav_msgs/msg/Odometry",
                                             "/camera/image_raw": "sensor_msgs/msg/Image"}


def test_server_without_rosapi_gives_no_topic_list(ros1_server_without_rosapi: RosbridgeTestServer,
                                                   fast_reconnect: dict[str, float]) -> None:
    conn = RosbridgeConnection(ros1_server_without_rosapi.url, rosapi_timeout_s=5, **fast_reconnect)
    conn.open()
    try:
        assert conn.wait_connected(10)
        assert conn.available_topics() is None
    finally:
        conn.close()


def test_subscriptions_and_advertisements_are_restored_after_server_restart(
        rosbridge_server: RosbridgeTestServer, connection: RosbridgeConnection) -> None:
    got = Collector()
    connection.subscribe("/joint_states", "sensor_msgs/msg/JointState", got)
    connection.advertise("/robotmem/recall/response", "std_msgs/String")
    rosbridge_server.wait_for_subscription("/joint_states")
    rosbridge_server.publish("/joint_states", m.joint_state(1.0, ["a"], [0.1]))
    assert got.wait_for(1)

    rosbridge_server.restart()
    assert rosbridge_server.wait_until(lambda: rosbridge_server.connections_total >= 2, 10)
    rosbridge_server.wait_for_subscription("/joint_states")
    assert connection.wait_connected(10)
    rosbridge_server.publish("/joint_states", m.joint_state(2.0, ["a"], [0.2]))
    assert got.wait_for(2)
    assert connection.publish("/robotmem/recall/response", {"data": "after restart"})
    assert rosbridge_server.wait_for_message("/robotmem/recall/response")["data"] == "after restart"
    assert connection.counters.connects == 2 and connection.counters.disconnects == 1


def test_publish_while_disconnected_is_refused_and_counted(rosbridge_server: RosbridgeTestServer,
                                                           connection: RosbridgeConnection) -> None:
    connection.advertise("/robotmem/recall/response", "std_msgs/String")
    rosbridge_server.stop()
    assert connection.wait_disconnected(10)
    assert connection.publish("/robotmem/recall/response", {"data": "lost"}) is False
    assert connection.counters.unsent == 1


@pytest.mark.parametrize("url", ["http://127.0.0.1:9090", "127.0.0.1:9090", "ws://", "ws://host:notaport"])
def test_url_that_is_not_a_websocket_address_is_a_config_error_naming_url(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_url(url)
    assert caught.value.field == "url"
