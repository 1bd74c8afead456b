"""The live bridge counts notes robotmem refuses per topic and keeps storing the rest."""

from __future__ import annotations

from rosbridge_helpers import barrier, wait_subscribed

from bridges.rosbridge.status import format_status, format_summary
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

LEARN = "/robotmem/learn"


def test_a_note_robotmem_refuses_is_counted_as_rejected_in_the_status_line(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, LEARN)
    rosbridge_server.publish(LEARN, m.string("y" * 400))  # over robotmem's 300-character limit
    rosbridge_server.publish(LEARN, m.string("a fine short note"))
    barrier(rosbridge_server, "after-notes")
    assert bridge.wait_until(lambda s: s.rejected.get(LEARN, 0) == 1 and s.facts_learned == 1, 20)

    snap = bridge.snapshot()
    assert snap.store_dropped == 0 and snap.feed_errors == 0
    assert f"rejected {LEARN} 1" in format_status(None, snap, 1.0)
    assert "1 rejected by robotmem" in format_summary(snap, 1.0)
    found = memory.recall("", min_confidence=0, context_filter={"source.topic": LEARN})["results"]
    assert [r["content"] for r in found] == ["a fine short note"]
