"""PostgreSQL beside SQLite: learn, bulk insert and recall, the same figures on both stores.

The workload of the core figures (random unit vectors stand in for embeddings, so the
figures are the store's own cost; numpy brute-force top-10 over the same vectors is the
reference of the same run). ``--backend postgresql`` uses the server at ``--url`` (or
$ROBOTMEM_BENCH_POSTGRES_URL), else a temporary one started with pgserver; ``both``
prints SQLite's and PostgreSQL's figures of one run side by side.

    python scripts/bench_postgres.py [--sizes 10000 100000] [--queries 200] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from robotmem import Memory
from robotmem.store.backend import as_vector_bytes

DIM = 384
BASE = ["grip", "force", "slip", "wet", "glass", "bottle", "cube", "push", "door", "dock", "lidar", "wheel", "joint", "torque", "camera", "shelf", "bin", "arm", "gripper", "conveyor", "pallet", "pick", "place", "drawer", "cable", "valve", "sensor"]
# A Zipf-like vocabulary: a few words everywhere, most words rare, as in real logs.
WORDS = BASE + [f"{BASE[i % len(BASE)]}{i}" for i in range(5000)]
ZIPF = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
ZIPF /= ZIPF.sum()


class RandomVectors:
    """Stand-in embedder: a fixed random unit vector per text (hash-seeded), no model cost."""

    model_id = "bench-random/384"
    dim = DIM

    def __init__(self) -> None:
        self.next: np.ndarray | None = None  # the vector for the next single text
        self.batch: np.ndarray | None = None  # the vectors for the next bulk call

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.batch is not None and len(texts) > 1:
            return self.batch[: len(texts)]
        if self.next is not None and len(texts) == 1:
            return self.next[None, :]
        rng = np.random.default_rng(abs(hash(texts[0])) % (2**32))
        v = rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def record(i: int, rng: np.random.Generator) -> dict:
    words = " ".join(rng.choice(WORDS, size=8, p=ZIPF))
    return {
        "description": f"episode {i}: {words}",
        "perception_type": "tactile",
        "metadata": {
            "params": {"grip_force": {"value": round(float(rng.uniform(1, 30)), 2), "unit": "N"}},
            "task": {"name": str(rng.choice(["pick", "place", "push", "open"])), "success": bool(rng.random() < 0.5),
                     "batch": int(i % 1000)},
            "spatial": {"object_position": [round(float(x), 3) for x in rng.uniform(-5, 5, size=3)]},
            "robot": {"id": f"arm-{i % 4}"},
        },
    }


def run(size: int, queries: int, location: str | Path) -> dict[str, float]:
    rng = np.random.default_rng(size)
    embedder = RandomVectors()
    figures: dict[str, float] = {}
    with Memory(location, embedder=embedder) as mem:
        batch = 1000
        elapsed = 0.0
        for start in range(0, size, batch):
            vectors = rng.standard_normal((batch, DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            embedder.batch = vectors
            records = [record(i, rng) for i in range(start, start + batch)]
            t0 = time.perf_counter()
            mem.save_perceptions(records)
            elapsed += time.perf_counter() - t0
        figures["bulk_insert_per_s"] = size / elapsed
        embedder.batch = None

        with mem.store.read() as conn:  # the reference reads the same vectors the store holds
            _ids, blobs = zip(*conn.execute("SELECT memory_id, vector FROM embeddings ORDER BY memory_id"))
        matrix = np.frombuffer(b"".join(as_vector_bytes(b) or b"" for b in blobs), dtype=np.float32).reshape(-1, DIM)
        qs = matrix[rng.integers(0, len(matrix), size=queries)] + rng.standard_normal((queries, DIM)).astype(np.float32) * 0.05
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)

        def brute(q: np.ndarray) -> np.ndarray:
            scores = matrix @ q
            top = np.argpartition(-scores, 10)[:10]
            return top[np.argsort(-scores[top])]

        brute_times = timed(lambda: brute(qs[rng.integers(0, queries)]), queries)
        figures["numpy_top10"], figures["numpy_top10_p95"] = pct(brute_times, 50), pct(brute_times, 95)

        learn_times = []
        for i in range(200):
            embedder.next = qs[i % queries]
            t = time.perf_counter()
            mem.learn(f"bench insight {size} {i} about the {WORDS[i % len(WORDS)]}", {"task": {"batch": -1}})
            learn_times.append(time.perf_counter() - t)
        figures["learn_p50"], figures["learn_p95"] = pct(learn_times, 50), pct(learn_times, 95)

        mem.recall("warm up the vector index")  # the first recall loads the in-process mirror
        cases = {
            "recall": {},
            "recall_filter_selective": {"context_filter": {"task.batch": 7, "task.success": True}},
            "recall_filter_broad": {"context_filter": {"params.grip_force.value": {"$gte": 3}}},
            "recall_spatial": {"spatial_sort": {"field": "spatial.object_position", "target": [1.0, 2.0, 0.5]}},
            "recall_filter_spatial": {"context_filter": {"task.name": "pick", "task.success": True},
                                          "spatial_sort": {"field": "spatial.object_position", "target": [1.0, 2.0, 0.5]}},
        }
        for name, kwargs in cases.items():
            samples = []
            for i in range(queries):
                embedder.next = qs[i]
                text = " ".join(rng.choice(WORDS, size=3, p=ZIPF))
                t = time.perf_counter()
                mem.recall(text, n=10, **kwargs)
                samples.append(time.perf_counter() - t)
            figures[f"{name}_p50"], figures[f"{name}_p95"] = pct(samples, 50), pct(samples, 95)
    return figures


@contextmanager
def postgres_database(url: str | None, name: str, *, reuse: bool = False) -> Iterator[str]:
    """Database ``name`` on the server at ``url`` (or on a temporary pgserver, removed afterwards):
    made afresh, or with ``reuse`` kept when it exists (a generated store measured again)."""
    import psycopg

    server = None
    if url is None:
        import pgserver

        folder = Path(tempfile.mkdtemp(prefix="robotmem-bench-pg-"))
        folder.chmod(0o755)
        server = pgserver.get_server(folder / "data", cleanup_mode="delete")
        url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and not reuse:
            admin.execute(f"DROP DATABASE {name}")
        if not exists or not reuse:
            admin.execute(f"CREATE DATABASE {name}")
    own = urlsplit(url)._replace(path="/" + name).geturl()
    with psycopg.connect(own, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield own
    finally:
        if server is not None:
            server.cleanup()


def print_figures(title: str, figures: dict[str, float]) -> None:
    print(f"\n== {title} ==")
    print(f"bulk insert (save_perceptions): {figures.pop('bulk_insert_per_s'):,.0f} records/s")
    print(f"numpy brute-force top-10: p50 {figures.pop('numpy_top10'):.2f} ms   "
          f"p95 {figures.pop('numpy_top10_p95'):.2f} ms")
    for key in sorted({k.rsplit('_', 1)[0] for k in figures}):
        print(f"{key:<26} p50 {figures[key + '_p50']:7.2f} ms   p95 {figures[key + '_p95']:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--url", default=os.environ.get("ROBOTMEM_BENCH_POSTGRES_URL"),
                        help="PostgreSQL server for --backend postgresql (default: a temporary pgserver)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            for backend in backends:
                if backend == "sqlite":
                    print_figures(f"{size:,} memories, SQLite", run(size, args.queries, Path(folder) / f"bench{size}.db"))
                    continue
                with postgres_database(args.url, f"robotmem_bench_{size}") as url:
                    print_figures(f"{size:,} memories, PostgreSQL", run(size, args.queries, url))


if __name__ == "__main__":
    main()
