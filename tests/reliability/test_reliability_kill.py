"""SIGKILL a writer at random points: every write it acknowledged must survive each kill."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import apsw

from robotmem import Memory

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KILLS = 6
#: Generous bound for a writer to start and acknowledge its first write: a hang fails
#: the test instead of blocking CI. Not a speed assertion.
START_TIMEOUT_S = 120.0


def _start_writer(db: Path, *mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, str(HERE / "reliability_workers.py"), str(db), *mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put(None)


def _kill_at_random(writer: subprocess.Popen[str], rng: random.Random) -> list[tuple[int, str]]:
    """Let the writer acknowledge at least one write, then SIGKILL it at a random moment."""
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(writer.stdout, lines), daemon=True)
    pump.start()
    first = lines.get(timeout=START_TIMEOUT_S)
    assert first is not None, f"writer died before writing: {writer.stderr.read() if writer.stderr else ''}"
    threading.Event().wait(rng.uniform(0.05, 1.5))
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    pump.join(timeout=30)
    acknowledged = [first]
    while (line := lines.get_nowait()) is not None:
        acknowledged.append(line)
    # A line cut by the kill was never acknowledged (the writer died while printing it).
    return [tuple(json.loads(line)) for line in acknowledged if line.endswith("\n")]  # type: ignore[misc]


def _kill_repeatedly(db: Path, seed: int, *mode: str,
                     check: Callable[[apsw.Connection], None] | None = None) -> None:
    """Start the writer, kill it at random, reopen: KILLS times on one file. After each kill every
    acknowledged write must be there, the file must pass its integrity check, and ``check`` too."""
    Memory(db, embedder=None).close()
    rng = random.Random(seed)
    acknowledged: list[tuple[int, str]] = []
    for kill in range(KILLS):
        writer = _start_writer(db, *mode)
        try:
            acknowledged += _kill_at_random(writer, rng)
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait(timeout=30)
        # Reopening recovers the WAL the killed writer left behind; then every acknowledged write is there.
        with Memory(db, embedder=None) as memory:
            for memory_id, text in acknowledged:
                assert memory.get(memory_id)["content"] == text, f"kill {kill}: write {memory_id} lost"
        conn = apsw.Connection(str(db))
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], f"kill {kill}"
            if check is not None:
                check(conn)
        finally:
            conn.close()
    assert len(acknowledged) > KILLS


def test_acknowledged_writes_survive_sigkill_at_random_points(tmp_path: Path) -> None:
    _kill_repeatedly(tmp_path / "killed.db", 11)


def _indexes_match_the_rows(conn: apsw.Connection) -> None:
    """A bulk batch's leaves and full text are written on the writer's worker thread, in the batch's
    transaction: every stored memory has both (and its payload), and nothing else has either."""
    memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    assert conn.execute("SELECT count(DISTINCT memory_id) FROM context_leaves").fetchone()[0] == memories
    assert conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0] == memories
    assert conn.execute("SELECT count(*) FROM payloads").fetchone()[0] == memories
    assert conn.execute("SELECT count(*) FROM context_leaves WHERE memory_id NOT IN "
                        "(SELECT id FROM memories)").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE rowid NOT IN "
                        "(SELECT id FROM memories)").fetchone()[0] == 0


def test_batches_a_bulk_writer_acknowledged_survive_sigkill_with_their_indexes(tmp_path: Path) -> None:
    _kill_repeatedly(tmp_path / "bulk-killed.db", 12, "bulk", check=_indexes_match_the_rows)


def test_an_io_error_under_the_server_is_reported_with_what_to_do_and_the_server_keeps_serving(
    tmp_path: Path,
) -> None:
    from raw_stdio import RawServer

    server = RawServer(tmp_path, max_file_bytes=400_000)
    try:
        first = server.call(1, "learn", {"insight": "the cup is on the shelf"})["result"]
        assert first["isError"] is False
        error = None
        for i in range(2, 200):
            result = server.call(i, "save_perception", {"description": f"scan {i} of the shelf",
                                                        "data": [float(i)] * 3000})["result"]
            if result["isError"]:
                error = result["structuredContent"]["error"]
                break
        assert error is not None, "the file-size limit was never reached"
        assert error["code"] == "storage_error"
        # EFBIG (the server's RLIMIT_FSIZE), which SQLite reports as an I/O error: named as the limit it is
        assert "a file-size limit" in error["message"] and "raise the limit" in error["message"]
        assert str(tmp_path) not in error["message"]
        recalled = server.call("after", "recall", {"query": "cup shelf"})["result"]
        assert recalled["isError"] is False and recalled["structuredContent"]["count"] >= 1
    finally:
        server.close()
