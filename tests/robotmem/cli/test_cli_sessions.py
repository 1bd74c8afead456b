"""``robotmem session list`` and ``session show`` give a replayed episode the time it happened.

nav_demo.mcap was recorded from 2025-01-01T00:00:00Z (datasets/README.md); replaying it
today must not make its episodes start today and last as long as storing them took. The
list, the timeline and the web view's rows (robotmem.view.episode_list) must agree, on
either backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import main
from robotmem.view import episode_list

REPO = Path(__file__).resolve().parents[3]
#: the two marker-delimited errands of nav_demo.mcap: (start, duration) in recorded time
RECORDED = [(1735689600.0, 23.1), (1735689625.1, 26.8)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.mark.parametrize("store_kind", ["sqlite", "postgresql"])
def test_session_list_and_show_give_a_replayed_episode_its_recorded_start_and_duration(
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, robotmem_home: Path, store_kind: str
) -> None:
    store = request.getfixturevalue("postgres_url") if store_kind == "postgresql" else str(robotmem_home / "memory.db")
    run(capsys, "--db", store, "replay", str(REPO / "datasets" / "nav_demo.mcap"),
        "--episode-split", "topic:/robotmem/episode", "--no-progress")

    listed = json.loads(run(capsys, "--db", store, "--json", "session", "list"))
    assert sorted((s["start"], s["duration_s"]) for s in listed) == RECORDED
    with Memory(store, embedder=None) as mem:
        web = {row["session_id"]: (row["start"], row["duration_s"]) for row in episode_list(mem)["episodes"]}
    assert {s["session_id"]: (s["start"], s["duration_s"]) for s in listed} == web

    table = run(capsys, "--db", store, "session", "list")
    assert "2025-01-01 00:00:00  23.1 s" in table and "2025-01-01 00:00:25  26.8 s" in table
    for session in listed:
        shown = run(capsys, "--db", store, "session", "show", session["session_id"])
        clock = "00:00:00" if session["start"] == RECORDED[0][0] else "00:00:25"
        assert shown.splitlines()[1].startswith(f"started 2025-01-01 {clock} UTC")


def test_session_list_counts_what_the_web_view_counts_after_a_forget_and_while_open(
    capsys: pytest.CaptureFixture[str], robotmem_home: Path
) -> None:
    with Memory(embedder=None) as mem:
        ended = mem.start_session(context={"robot": {"id": "r7"}})["session_id"]
        ids = [mem.learn(f"door {i} sticks when it rains", session_id=ended)["memory_id"] for i in range(3)]
        mem.end_session(ended, outcome_score=0.5)
        mem.forget(ids[0], "wrong door")  # after end_session took its snapshot of the counts
        still_open = mem.start_session(context={"robot": {"id": "open"}})["session_id"]
        mem.learn("the shelf wobbles", session_id=still_open)
        web = {row["session_id"]: (row["facts"], row["perceptions"]) for row in episode_list(mem)["episodes"]}
    listed = json.loads(run(capsys, "--json", "session", "list"))
    assert {s["session_id"]: (s["facts"], s["perceptions"]) for s in listed} == web == {ended: (2, 0),
                                                                                         still_open: (1, 0)}
    table = run(capsys, "session", "list")
    assert "2 facts, 0 perceptions" in table and "1 facts, 0 perceptions" in table
