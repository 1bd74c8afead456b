"""What a store read as a snapshot pays to notice a writer: the check before each read transaction.

A store of 2,000 facts is written in a folder, then read through a read-only bind mount of it
(root only) with no writer there, so it opens as a snapshot (``immutable=1``). In this one
process, runs with the check and runs with it switched off (``stale`` answering False) alternate,
eight of each; each prints the median per call of a bare read transaction, ``get`` and ``recall``.

    sudo python scripts/bench_snapshot_check.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from robotmem import Memory  # noqa: E402
from robotmem.store import connection  # noqa: E402

FACTS = 2000
ROUNDS = 8


def _timed(call: Callable[[int], object], n: int) -> float:
    """Microseconds per call."""
    start = time.perf_counter()
    for i in range(n):
        call(i)
    return (time.perf_counter() - start) / n * 1e6


def _bare_read(reader: Memory) -> Callable[[int], object]:
    def read(_i: int) -> object:
        with reader.store.read() as conn:  # type: ignore[attr-defined]
            return conn.execute("SELECT 1").fetchall()
    return read


def _measure(reader: Memory) -> None:
    check = connection._Snapshot.stale
    snapshot = reader.store.connection()  # type: ignore[attr-defined]
    assert isinstance(snapshot, connection._Snapshot), "not opened as a snapshot"
    print(f"stale() alone: {_timed(lambda _i: snapshot.stale(), 100_000):.2f} us")
    cases: dict[str, tuple[Callable[[int], object], int]] = {
        "read transaction (SELECT 1)": (_bare_read(reader), 3000),
        "get": (lambda i: reader.get(1 + i % FACTS), 3000),
        "recall n=5": (lambda i: reader.recall(f"red door shelf {i % 50}", n=5), 300),
    }
    for name, (call, n) in cases.items():
        _timed(call, n)  # warm the cache
        on: list[float] = []
        off: list[float] = []
        for r in range(ROUNDS * 2):
            checking = r % 4 in (0, 3)  # on, off, off, on, ...: neither side always runs first
            connection._Snapshot.stale = check if checking else (lambda self: False)  # type: ignore[method-assign]
            (on if checking else off).append(_timed(call, n))
        connection._Snapshot.stale = check  # type: ignore[method-assign]
        with_check, without = statistics.median(on), statistics.median(off)
        print(f"{name}: {with_check:.1f} us with the check, {without:.1f} us without "
              f"({with_check - without:+.1f} us; ranges {min(on):.1f}-{max(on):.1f} / {min(off):.1f}-{max(off):.1f})")


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("a read-only bind mount needs root")
    folder = Path(tempfile.mkdtemp(prefix="robotmem-snapshot-"))
    rw, ro = folder / "rw", folder / "ro"
    rw.mkdir()
    ro.mkdir()
    with Memory(rw / "m.db", embedder=None) as writer:
        for i in range(FACTS):
            writer.learn(f"lesson {i} about the red door handle near shelf {i % 50}")
    subprocess.run(["mount", "--bind", str(rw), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
        reader = Memory(ro / "m.db", embedder=None)
        try:
            _measure(reader)
        finally:
            reader.close()
    finally:
        subprocess.run(["umount", str(ro)], check=True)
        subprocess.run(["rm", "-r", str(folder)], check=True)


if __name__ == "__main__":
    main()
