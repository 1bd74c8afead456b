"""A topic that delivers nothing is named only when some node publishes it (silence.py)."""

from __future__ import annotations

import json
import time

from bridges.pipeline.config import parse_bridge_config
from bridges.rosbridge.recall import REQUEST_TOPIC, RESPONSE_TOPIC
from bridges.rosbridge.silence import SilentTopicWatch
from bridges.rosbridge.testing.server import RosbridgeTestServer


def test_only_a_published_topic_that_delivers_nothing_is_named(rosbridge_server: RosbridgeTestServer,
                                                               start_bridge) -> None:
    # /blip: a node publishes it but nothing reaches the bridge (what a refused subscription
    # looks like). /odom: configured, subscribed on spec, listed by rosapi only because of that
    # subscription; nobody publishes it, so its silence is no news.
    rosbridge_server.add_topic("/blip", "robotmem_test/Blip")
    config = parse_bridge_config({"topics": [{"topic": "/blip", "converter": "json_perception"}]})
    bridge = start_bridge(rosbridge_server, config, silent_topic_s=0.5, discovery_interval_s=0.2)
    assert rosbridge_server.wait_until(lambda: bool(rosbridge_server.subscriptions("/odom")), 5)
    lines = start_bridge.status_lines
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("WARNING /blip" in line for line in lines):
        time.sleep(0.05)
    time.sleep(1.0)  # /odom has been silent and subscribed for more than twice the limit
    bridge.stop()
    warnings = [line for line in lines if "WARNING" in line]
    assert len(warnings) == 1 and "WARNING /blip [robotmem_test/Blip] is listed as published" in warnings[0], lines


def test_a_recall_request_topic_that_delivered_requests_is_not_named(rosbridge_server: RosbridgeTestServer,
                                                                     start_bridge) -> None:
    # Requests go to the recall worker, not the ingestion inbox, whose counts the watch read: a node
    # whose requests were answered was named as delivering nothing ("the server may have refused
    # the subscription"), the first thing a user of docs/bridge.md's recall example saw.
    bridge = start_bridge(rosbridge_server, silent_topic_s=0.5, discovery_interval_s=0.2)
    rosbridge_server.wait_for_subscription(REQUEST_TOPIC)
    rosbridge_server.add_topic(REQUEST_TOPIC, "std_msgs/msg/String")
    rosbridge_server.publish(REQUEST_TOPIC, {"data": json.dumps({"id": "cli-1", "query": "dock"})})
    rosbridge_server.wait_for_message(RESPONSE_TOPIC, lambda msg: '"cli-1"' in msg["data"])
    time.sleep(1.5)  # three times the limit, discovery every 0.2 s
    bridge.stop()
    assert bridge.recall.answered == 1
    assert not [line for line in start_bridge.status_lines if "WARNING" in line], start_bridge.status_lines


def test_the_clock_starts_when_a_publisher_appears_not_at_the_subscription() -> None:
    # The bridge subscribes to its configured topics at once; a node that starts publishing one
    # ten seconds later was named at its first pass, before its first message could arrive.
    watch = SilentTopicWatch(after_s=5.0)
    topics = {"/odom": "nav_msgs/Odometry"}
    for now in range(10):
        assert watch.check(topics, topics, {}, float(now), published=lambda _: False) == []
    assert watch.check(topics, topics, {}, 10.0, published=lambda _: True) == []
    assert watch.check(topics, topics, {}, 14.9, published=lambda _: True) == []
    assert watch.check(topics, topics, {}, 15.0, published=lambda _: True) == [("/odom", "nav_msgs/Odometry")]
    assert watch.check(topics, topics, {}, 30.0, published=lambda _: True) == []  # named once
