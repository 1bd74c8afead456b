"""outcome_stats through the real stdio server and the SDK's client: the numbers a control loop sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_client_helpers import call_error, call_ok, stdio_session

pytestmark = pytest.mark.anyio

# (object, push factor, success, position): written through the tools, counted by hand below.
TRIALS = [
    ("heavy", 1.0, True, [0.1, 0.1]), ("heavy", 1.0, True, [0.2, 0.1]), ("heavy", 0.25, False, [0.1, 0.2]),
    ("heavy", 1.0, False, [0.9, 0.9]), ("slippery", 0.25, True, [0.1, 0.1]), ("slippery", 1.0, False, [0.15, 0.1]),
]


async def test_outcome_stats_over_episodes_written_through_the_tools(robotmem_home: Path, tmp_path: Path) -> None:
    async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        for obj, factor, ok, position in TRIALS:
            context = {"object": {"type": obj}, "spatial": {"object_position": position}}
            started = await call_ok(session, "start_session", {"collection": "push", "context": context})
            sid = started["session_id"]
            await call_ok(session, "learn", {
                "insight": f"pushed the {obj} block with factor {factor}", "session_id": sid,
                "context": {**context, "params": {"push_factor": factor}, "task": {"success": ok}}})
            await call_ok(session, "end_session", {"session_id": sid, "outcome_score": 1.0 if ok else 0.2})

        heavy = await call_ok(session, "outcome_stats", {
            "group_by": "params.push_factor", "collection": "push", "context_filter": '{"object.type": "heavy"}'})
        assert heavy["matched"] == 4
        assert [(g["value"], g["count"], g["successes"]) for g in heavy["groups"]] == [(0.25, 1, 0), (1.0, 3, 2)]
        one = heavy["groups"][1]
        assert one["success_rate"] == pytest.approx(2 / 3)
        assert one["mean_outcome"] == pytest.approx((1.0 + 1.0 + 0.2) / 3)
        # Wilson 95 % for 2 of 3, by hand: centre (2/3 + z²/6) / (1 + z²/3), half-width as in Wilson (1927).
        assert one["wilson_95"] == pytest.approx([0.2077, 0.9385], abs=1e-4)

        near = await call_ok(session, "outcome_stats", {
            "group_by": "object.type", "query": "pushed block", "collection": "push",
            "spatial_sort": {"field": "spatial.object_position", "target": [0.1, 0.1], "max_distance": 0.11}})
        assert [(g["value"], g["count"], g["successes"]) for g in near["groups"]] == [
            ("heavy", 3, 2), ("slippery", 2, 1)]
        nearest = await call_ok(session, "outcome_stats", {
            "group_by": "object.type", "collection": "push", "k": 2,
            "spatial_sort": '{"field": "spatial.object_position", "target": [0.1, 0.1]}'})
        assert nearest["matched"] == 2

        error = await call_error(session, "outcome_stats", {"group_by": "params.push_factor", "k": 3})
        assert error["field"] == "k"
        error = await call_error(session, "outcome_stats", {"group_by": "x", "bins": [1, 0]})
        assert error["field"] == "bins"
