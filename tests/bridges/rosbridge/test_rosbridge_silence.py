"""A topic that delivers nothing is named only when some node publishes it (silence.py)."""

from __future__ import annotations

import time

from bridges.pipeline.config import parse_bridge_config
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
