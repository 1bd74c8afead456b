"""A replay ends as an import does: the vector snapshot of a collection it took past the index
threshold is written, so the next process's first recall reads the snapshot instead of loading an
exact float32 mirror of the whole collection (1.5 KB a vector: 1.5 GB at 1,000,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_paths
from robotmem import Memory
from robotmem.search import ann_index

REPO = Path(__file__).resolve().parents[3]
S = 1_000_000_000
T0 = 1_735_689_600 * S
STRING = "std_msgs/msg/String"
ODOM = "nav_msgs/msg/Odometry"
NOTES = 80
THRESHOLD = 60  # ann_index.MIN_ROWS for this test's process (20,000 otherwise)

#: a new process: one recall of the store, then which collections it searched through a
#: snapshot and which through an exact in-process mirror it loaded
_RECALL = """
import json, sys
from robotmem import Memory
with Memory(sys.argv[1]) as mem:
    found = mem.recall("which shelf was restocked", n=3, min_confidence=0.0)
    vectors = mem.recall_engine._vectors
    print(json.dumps({"hits": found["count"],
                      "mirrors": sorted(key[0] for key, mirror in vectors._mirrors.items() if mirror.loaded),
                      "snapshots": sorted(key[0] for key in vectors._anns)}))
"""


def _recording(make_datasets: ModuleType, path: Path) -> None:
    """One episode: driving, with NOTES notes (each a fact with a vector)."""
    messages = [(T0, "/robotmem/episode", STRING, make_datasets.string("start"))]
    messages += [(T0 + S + i * S // 10, "/odom", ODOM,
                  make_datasets.odometry(T0 + S + i * S // 10, 0.05 * i, 0.0, 0.0, 0.5, 0.0)) for i in range(100)]
    messages += [(T0 + S + i * S // 10 + 1, "/robotmem/learn", STRING,
                  make_datasets.string(f"shelf {i} was restocked with {i % 7 + 2} boxes of part P-{1000 + i}"))
                 for i in range(NOTES)]
    messages.append((T0 + 12 * S, "/robotmem/episode", STRING, make_datasets.string("end 1.0")))
    make_datasets.write_mcap(path, sorted(messages, key=lambda m: m[0]))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def _stats(db: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "robotmem", "--db", str(db), "--json", "stats"], env=_env(),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_replay_past_the_index_threshold_leaves_the_snapshot_and_a_new_process_loads_no_mirror(
        tmp_path: Path, make_datasets: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_index, "MIN_ROWS", THRESHOLD)
    path = tmp_path / "restock.mcap"
    _recording(make_datasets, path)
    db = tmp_path / "memory.db"
    with Memory(db) as mem:
        (result,) = replay_paths(mem, [path], BridgeConfig(), ReplayOptions(episode_split="topic:/robotmem/episode"))
        assert result.stats.facts_learned == NOTES
        collection = ReplayOptions().collection

    seen = json.loads(subprocess.run([sys.executable, "-c", _RECALL, str(db)], env=_env(), capture_output=True,
                                     text=True, check=True).stdout)
    assert seen == {"hits": 3, "mirrors": [], "snapshots": [collection]}

    # `stats` of another process (whose threshold is 20,000) lists the snapshot, current
    states = [(s["collection"], s["built"], s["stale"], s["changes_since"]) for s in _stats(db)["vector_indexes"]]
    assert states == [(collection, True, False, 0)]


def test_a_dry_run_writes_no_snapshot(tmp_path: Path, make_datasets: ModuleType,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_index, "MIN_ROWS", THRESHOLD)
    path = tmp_path / "restock.mcap"
    _recording(make_datasets, path)
    db = tmp_path / "memory.db"
    with Memory(db) as mem:
        mem.save_perceptions([{"description": f"crate {i} on pallet {i % 9}"} for i in range(THRESHOLD + 5)])
        replay_paths(mem, [path], BridgeConfig(), ReplayOptions(dry_run=True))
        [state] = mem.stats()["vector_indexes"]
    assert not state["built"] and not (db.parent / "memory.db.vectors").exists()


def test_the_replay_command_names_the_snapshot_it_writes_before_the_pause(
        tmp_path: Path, make_datasets: ModuleType, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
    """The build is the replay's last step (19-36 s per million vectors): without a line first, the
    command looked hung after its last recording. Under --json nothing but JSON is written."""
    monkeypatch.setattr(ann_index, "MIN_ROWS", THRESHOLD)
    path = tmp_path / "restock.mcap"
    _recording(make_datasets, path)
    code, out, err = run_cli("--db", str(tmp_path / "memory.db"), "replay", "--no-progress", str(path))
    assert code == 0
    collection = ReplayOptions().collection
    [line] = [line for line in err.splitlines() if "vector snapshot" in line]
    vectors = _stats(tmp_path / "memory.db")["vector_indexes"][0]["vectors"]  # the notes and the episode's summary
    assert line == (f"writing the vector snapshot of collection {collection!r} ({vectors:,} vectors; "
                    "what `robotmem reindex` does) ...")
    assert path.name in out  # the table follows on stdout
    code, out, err = run_cli("--db", str(tmp_path / "json.db"), "--json", "replay", str(path))
    assert code == 0 and "vector snapshot" not in err
    json.loads(out)
