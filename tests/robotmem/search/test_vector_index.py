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
