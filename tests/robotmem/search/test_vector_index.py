"""The in-process vector scan (search/vector_index.py): exact products, and no core left spinning."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from robotmem import Memory
from robotmem.search.vector_index import cosines

DIM = 384


class _Wide:
    """A stand-in embedder of MiniLM's width: OpenBLAS threads a product only past a few hundred thousand
    elements, which a 32-d test store never reaches."""

    model_id = "test-wide/384"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(tuple(texts))) % 2**32)
        v = rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("rows", [0, 1, 7, 216, 5000])
def test_cosines_are_the_matrix_vector_product(rows: int):
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, DIM)).astype(np.float32)
    query = rng.standard_normal(DIM).astype(np.float32)
    got = cosines(matrix, query)
    assert got.shape == (rows,) and got.dtype == np.float32
    np.testing.assert_allclose(got, matrix @ query, rtol=1e-5, atol=1e-4)


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@pytest.mark.sqlite_only
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a BLAS thread can only spin beside recall on two or more cores")
def test_a_control_loop_leaves_the_cpu_idle_between_its_recalls(tmp_path: Path):
    """OpenBLAS workers spin for about 0.1 s after a threaded product: with BLAS in the scan, a loop
    recalling every 50 ms from 4,000 memories kept a core busy through every pause."""
    with Memory(tmp_path / "memory.db", embedder=_Wide()) as mem:
        mem.save_perceptions([{"description": f"grasp note {i} cube {i % 50}"} for i in range(4000)])
        mem.recall("cube", n=10)
        busy = paused = 0.0
        for i in range(12):
            mem.recall(f"cube {i}", n=10)
            cpu, wall = _cpu_seconds(), time.perf_counter()
            time.sleep(0.05)
            busy += _cpu_seconds() - cpu
            paused += time.perf_counter() - wall
    assert busy < 0.2 * paused, f"{busy:.3f} s of CPU during {paused:.3f} s of pauses between recalls"


@pytest.mark.sqlite_only
def test_loading_the_mirror_holds_little_more_than_its_matrix(tmp_path: Path):
    """The mirror of a collection is a float32 matrix (4 x dim bytes a row); loading it read every row
    as a Python tuple and joined their vectors into one bytes object first, holding about three times
    the matrix at the peak (a million MiniLM vectors: 4.7 GB for a 1.5 GB mirror). Measured against
    the matrix this run loads, with tracemalloc (numpy's arrays are traced too): beside the matrix, the
    load may hold a few chunks of rows, whatever the collection's size."""
    import tracemalloc

    from robotmem.search.vector_index import _FETCH_CHUNK, VectorIndex

    with Memory(tmp_path / "memory.db", embedder=_Wide()) as mem:
        for start in range(0, 20_000, 2000):
            mem.save_perceptions([{"description": f"grasp note {i}"} for i in range(start, start + 2000)])
    import apsw

    conn = apsw.Connection(str(tmp_path / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    mirror = VectorIndex("default", _Wide.model_id, DIM)
    tracemalloc.start()
    try:
        mirror.sync(conn)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        conn.close()
    matrix = len(mirror) * DIM * 4
    assert len(mirror) == 20_000
    chunks = 4 * _FETCH_CHUNK * DIM * 4
    assert peak < 1.1 * matrix + chunks, f"loading a {matrix / 1e6:.1f} MB mirror peaked at {peak / 1e6:.1f} MB"


def _mirrors(mem: Memory) -> dict[tuple[str, str], object]:
    return mem.recall_engine._vectors._mirrors  # type: ignore[attr-defined, no-any-return]


@pytest.mark.sqlite_only
def test_a_process_serving_many_collections_keeps_a_bounded_set_of_mirrors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each collection below the snapshot's size is scanned from an exact mirror in the process;
    a server answering for a fleet of them kept every one it had loaded, for as long as it ran."""
    from robotmem.search import vectors

    path = tmp_path / "fleet.db"
    with Memory(path, embedder=_Wide()) as mem:
        for c in range(8):
            mem.save_perceptions([{"description": f"robot {c} saw the cup at {k} cm", "collection": f"robot{c}"}
                                  for k in range(300)])
        mem.recall("cup", n=5, collection="robot0")
        one = sum(m.resident_bytes for m in _mirrors(mem).values())  # type: ignore[attr-defined]
        monkeypatch.setattr(vectors, "MIRROR_BYTES", int(2.5 * one))
        answers = {c: mem.recall("the cup", n=5, collection=f"robot{c}")["results"] for c in range(8)}
        held = sum(m.resident_bytes for m in _mirrors(mem).values())  # type: ignore[attr-defined]
        assert held <= 2.5 * one + one  # the budget, and the newest mirror past it
        assert len(_mirrors(mem)) < 8
        again = mem.recall("the cup", n=5, collection="robot0")["results"]  # its mirror was dropped
    with Memory(path, embedder=_Wide()) as fresh:
        assert [m["id"] for m in again] == [m["id"] for m in answers[0]] == \
            [m["id"] for m in fresh.recall("the cup", n=5, collection="robot0")["results"]]
