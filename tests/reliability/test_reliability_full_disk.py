"""A store whose disk fills up under each writer, then gets space back.

Two disks: a real one (a small tmpfs filled with a ballast file, which needs root and ``mount``) and,
always, SQLite's own page quota (``PRAGMA max_page_count`` on the connections that write), which gives
the same SQLITE_FULL without a mount. Oracle, read with apsw directly after the store is closed: every
acknowledged write is there, every refused one is not, and nothing is half written (integrity check,
the full-text index's own check and one entry per live memory, one vector per memory, no payload
without its memory); the error says the disk is full and is transient; the call after space is freed
succeeds on the same ``Memory``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from robotmem import Memory
from robotmem.errors import StorageError

NO_QUOTA = 1_073_741_823


class Disk:
    """Where the store lives, and how it fills up and gets space back."""

    folder: Path

    def fill(self, mem: Memory, extra: list[apsw.Connection]) -> None:
        raise NotImplementedError

    def free(self) -> None:
        raise NotImplementedError


class Tmpfs(Disk):
    def __init__(self, small: Any) -> None:
        self.small = small
        self.folder = small.folder

    def fill(self, mem: Memory, extra: list[apsw.Connection]) -> None:
        # An empty WAL: a WAL file kept from earlier commits has room a write could reuse.
        mem._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        self.small.fill()

    def free(self) -> None:
        self.small.free()


class PageQuota(Disk):
    """SQLite's page quota on the connections that write: SQLITE_FULL without a mount."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conns: list[apsw.Connection] = []

    def fill(self, mem: Memory, extra: list[apsw.Connection]) -> None:
        self.conns = [mem._db.connection(), *extra]
        for conn in self.conns:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}").fetchall()

    def free(self) -> None:
        for conn in self.conns:
            conn.execute(f"PRAGMA max_page_count = {NO_QUOTA}").fetchall()


@pytest.fixture(params=["tmpfs", "page_quota"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Disk:
    if request.param == "tmpfs":
        return Tmpfs(request.getfixturevalue("small_disk")("16m"))
    return PageQuota(tmp_path)


def _check(path: Path, acked: list[str], refused: list[str]) -> None:
    """The oracle, on the closed store, without robotmem's code."""
    conn = apsw.Connection(str(path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        live = conn.execute("SELECT count(*) FROM memories WHERE status IN ('active', 'archived')").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM memories_fts_docsize").fetchone()[0] == live
        memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == memories  # each embedded
        assert conn.execute("SELECT count(*) FROM embeddings WHERE memory_id NOT IN (SELECT id FROM memories)"
                            ).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM payloads WHERE memory_id NOT IN (SELECT id FROM memories)"
                            ).fetchone()[0] == 0
        stored = [row[0] for row in conn.execute("SELECT content FROM memories")]
        assert sorted(t for t in stored if t in acked) == sorted(acked)  # each once
        assert not set(refused) & set(stored)
    finally:
        conn.close()


def _attempts(writer: str, mem: Memory) -> Iterator[tuple[list[str], Callable[[], Any]]]:
    """Calls of one writer, each with the texts it stores when it is acknowledged."""
    bulk = mem.bulk_writer() if writer == "bulk_writer" else None
    for i in range(200):
        if bulk is not None:
            texts = [f"sample {i}.{k} of the wrist joint" for k in range(20)]

            def batch(bulk: Any = bulk, texts: list[str] = texts) -> None:
                bulk.save_perceptions([{"description": t, "data": [1.0] * 200} for t in texts])
                bulk.flush()  # the batch is stored (or its failure raised) when this returns

            yield texts, batch
        elif writer == "learn":
            text = f"fact {i}: the gripper slipped on the blue box at station {i}"
            yield [text], lambda text=text: mem.learn(text)
        else:
            text = f"scan {i} of the shelf with the lidar"
            yield [text], lambda text=text, i=i: mem.save_perception(text, data=[float(i)] * 3000)


def _fill_until_refused(disk: Disk, writer: str, mem: Memory, acked: list[str],
                        refused: list[str]) -> Callable[[], None]:
    """Writes until the disk refuses one (checking the error); returns a call to make after space is freed."""
    attempts = _attempts(writer, mem)
    texts, first = next(attempts)  # a bulk writer opens its own connection here
    first()
    acked.extend(texts)
    disk.fill(mem, [conn for conn in _open_connections(mem) if conn is not mem._db.connection()])
    for texts, call in attempts:
        try:
            call()
        except StorageError as err:
            assert "the disk is full" in err.message and "free space" in err.message, err.message
            assert err.transient
            refused.extend(texts)
            texts_after, call_after = next(attempts)

            def after() -> None:
                call_after()
                acked.extend(texts_after)

            return after
        acked.extend(texts)
    raise AssertionError("the disk never filled up")


def _open_connections(mem: Memory) -> list[apsw.Connection]:
    return [conn for conn, _ in mem._db._all.values()]


@pytest.mark.parametrize("writer", ["learn", "save_perception", "bulk_writer"])
def test_a_full_disk_refuses_whole_writes_and_the_same_memory_writes_again_once_space_is_freed(
        disk: Disk, writer: str) -> None:
    path = disk.folder / "s.db"
    acked: list[str] = []
    refused: list[str] = []
    with Memory(path) as mem:
        for i in range(5):
            acked.append(f"before: marker {i} is at the dock")
            mem.learn(acked[-1])
        after = _fill_until_refused(disk, writer, mem, acked, refused)
        assert mem.recall("marker dock", n=5)["count"] == 5  # reads go on
        disk.free()
        after()
    _check(path, acked, refused)


def test_end_session_on_a_full_disk_leaves_the_episode_open_and_unmerged_then_ends_it(disk: Disk) -> None:
    path = disk.folder / "s.db"
    context = {"robot": {"id": "r1"}, "task": {"name": "pick"}}
    with Memory(path) as mem:
        session = mem.start_session(context=context)["session_id"]
        facts = [f"the gripper slips on the wet blue box {i % 5}" for i in range(30)]
        for i, fact in enumerate(facts):
            mem.learn(fact, context={**context, "n": i}, session_id=session)
        disk.fill(mem, [])
        with pytest.raises(StorageError) as err:
            mem.end_session(session, outcome_score=0.8)
        assert "the disk is full" in err.value.message and err.value.transient
        assert mem.get_session(session)["status"] == "open"
        assert mem.stats()["memories"] == 30 and mem.recall("gripper", n=100, min_relevance=0)["count"] == 30
        disk.free()
        summary = mem.end_session(session, outcome_score=0.8)
        assert summary["status"] == "ended" and summary["merged"] > 0
    _check(path, facts, [])


def test_an_import_stopped_by_a_full_disk_keeps_its_batches_and_the_rerun_stores_the_rest_once(
        disk: Disk, tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    with Memory(tmp_path / "source.db") as src:
        src.save_perceptions([{"description": f"scan {i} of aisle {i % 40}", "data": [float(i)] * 100}
                              for i in range(1500)])
        src.export(source)
    uids = [record["uid"] for record in map(json.loads, source.read_text().splitlines()) if "uid" in record]
    assert len(uids) == 1500
    path = disk.folder / "s.db"
    with Memory(path) as mem:
        mem.learn("before: the dock is behind the shelf")
        disk.fill(mem, [])
        with pytest.raises(StorageError) as err:
            mem.import_(source)
        assert "the disk is full" in err.value.message and err.value.transient
        disk.free()
        mem.import_(source)
    conn = apsw.Connection(str(path))
    try:
        stored = [row[0] for row in conn.execute("SELECT uid FROM memories WHERE type = 'perception'")]
    finally:
        conn.close()
    assert sorted(stored) == sorted(uids)
    _check(path, ["before: the dock is behind the shelf"], [])
