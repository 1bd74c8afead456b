"""``robotmem consolidate`` / ``Memory.consolidate``: the same consolidation over ended sessions, offline."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import Episode
from test_consolidation_end_session import store_fingerprint

from robotmem import Memory, ValidationError
from robotmem.cli.main import main

LIFT = {"task": {"name": "deliver"}, "robot": {"id": "tb3-1"}}


def unconsolidated_store(mem: Memory, episode: Episode) -> dict[str, int]:
    """Three ended sessions written with merging off, as a bulk import or replay leaves them."""
    first, (original,) = episode(mem, [("the lift to level 3 is out of service", LIFT)])
    mem.end_session(first)
    second, (a, b) = episode(mem, [("The lift to level 3 is out of service.", LIFT),
                                   ("the lift to level 3 is out of service!", LIFT)])
    mem.end_session(second)
    third, _ = episode(mem, [("the cafeteria door opens automatically", LIFT)])
    mem.end_session(third)
    return {"original": original, "a": a, "b": b}


def test_consolidate_merges_ended_sessions_in_the_order_they_ended(
    no_merge_mem: Memory, episode: Episode, db_path: Path, clock
):
    ids = unconsolidated_store(no_merge_mem, episode)
    assert no_merge_mem.get(ids["a"])["status"] == "active"  # nothing merged while writing
    no_merge_mem.close()
    with Memory(db_path, clock=clock) as mem:
        totals = mem.consolidate()
        assert totals == {"collection": None, "sessions": 3, "memories": 4, "perceptions": 0, "merged": 1,
                          "reinforced": 1, "decayed": 0, "archived": 0}
        original = mem.get(ids["original"])
        assert original["evidence_count"] == 3 and original["absorbed"] == [ids["a"], ids["b"]]
        assert {mem.get(ids[k])["superseded_by"] for k in ("a", "b")} == {ids["original"]}


def test_consolidating_twice_changes_nothing_the_second_time(
    no_merge_mem: Memory, episode: Episode, db_path: Path, clock
):
    unconsolidated_store(no_merge_mem, episode)
    no_merge_mem.close()
    with Memory(db_path, clock=clock) as mem:
        mem.consolidate()
        before = store_fingerprint(db_path)
        again = mem.consolidate()
        assert again["merged"] == 0 and again["reinforced"] == 0 and again["archived"] == 0
        assert store_fingerprint(db_path) == before


def test_consolidate_rejects_a_bad_collection_name(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.consolidate("no spaces allowed")
    assert info.value.field == "collection"


def test_the_cli_prints_summed_counts(
    no_merge_mem: Memory, episode: Episode, db_path: Path, capsys, clock
):
    # The CLI reads the real clock: a store stamped ahead of it would rightly warn of a clock set
    # back (store/clockwatch.py), which is not what this test is about.
    clock.now = time.time() - 3600
    unconsolidated_store(no_merge_mem, episode)
    no_merge_mem.close()
    code = main(["--db", str(db_path), "--json", "consolidate", "--collection", "default"])
    captured = capsys.readouterr()
    assert code == 0
    totals = json.loads(captured.out)
    assert totals["collection"] == "default" and totals["sessions"] == 3
    assert totals["merged"] == 1 and totals["reinforced"] == 1
    assert captured.err == ""  # no progress bar: stderr is not a terminal here (tests/robotmem/cli)


def test_the_cli_says_when_the_named_collection_has_no_episodes(
    no_merge_mem: Memory, episode: Episode, db_path: Path, capsys
):
    unconsolidated_store(no_merge_mem, episode)
    no_merge_mem.close()
    before = store_fingerprint(db_path)
    assert main(["--db", str(db_path), "consolidate", "--collection", "elsewhere"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "collection 'elsewhere' has no episodes" in captured.err
    assert store_fingerprint(db_path) == before


def test_the_cli_names_the_field_of_a_bad_collection(db_path: Path, capsys):
    Memory(db_path, embedder=None).close()
    code = main(["--db", str(db_path), "consolidate", "--collection", "bad name"])
    assert code == 1 and "collection" in capsys.readouterr().err


def test_consolidate_after_replaying_a_real_recording_counts_it_and_is_stable(
    shared_datasets: Path, db_path: Path, capsys
):
    bag = shared_datasets / "turtlebot3_nav_ros1_bag" / "rosbag_demo.bag"
    assert main(["--db", str(db_path), "--json", "replay", str(bag), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db_path), "--json", "consolidate"]) == 0
    totals = json.loads(capsys.readouterr().out)
    with Memory(db_path, embedder=None) as mem:
        stats = mem.stats()
    assert totals["sessions"] == stats["sessions"] >= 1
    assert totals["perceptions"] == stats["perceptions"] > 0 and totals["memories"] == stats["facts"]
    assert totals["merged"] == 0  # a replay stores perceptions, which are never merged
    before = store_fingerprint(db_path)
    assert main(["--db", str(db_path), "--json", "consolidate"]) == 0
    assert json.loads(capsys.readouterr().out)["reinforced"] == 0
    assert store_fingerprint(db_path) == before
