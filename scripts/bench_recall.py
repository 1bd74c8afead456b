"""Recall benchmark at 100,000 and 1,000,000 memories, against numpy brute force in the same run.

Synthetic 384-d unit vectors with cluster structure (2,000 centres) stand in for
embeddings (the model is measured by scripts/bench_embed.py), so the figures are the
store's own cost. Each store is generated once into --store-dir (outside the repo) and
reused; the memory-mapped vector index is built by the same code as `robotmem reindex`.
Figures: recall p50/p95 (plain, broad filter, selective filter 0.05 %, spatial,
filter + spatial; each after WARM_UP untimed recalls of its own) with top-10 agreement against exact numpy over the rows each filter
leaves, and each case's p50 as a multiple of numpy's p50 timed query by query beside it;
a filter leaving exactly 30 rows; learn p50 excluding embedding; bulk insert (on SQLite also
into an empty store right after, so that what the store's size costs shows apart from how
fast the host is that minute); first recall
in a fresh process; RSS of a second process on the same store; reindex time.

``--backend postgresql`` measures the same figures on PostgreSQL + pgvector: a database
``robotmem_bench_<size>`` on the server at ``--url`` (kept, and reused by the next run), or
on a temporary pgserver; ``--backend both`` prints SQLite's and PostgreSQL's of one run.
On PostgreSQL the generation is a bulk load (the HNSW index is built after it, timed as
the index build) and "bulk insert into this store" goes into the indexed store.

    python scripts/bench_recall.py --sizes 100000 1000000 [--queries 200] [--store-dir /tmp/robotmem-bench]
    python scripts/bench_recall.py --sizes 100000 --backend both [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Before numpy loads OpenBLAS. Its workers spin for about 0.1 s after each product; the
# reference is computed before every timed recall, so that spin took the second core from
# the recall measured next (plain recall at 1,000,000: 17-18 ms after a reference scan,
# 13-15 ms without one). At the minimum timeout they sleep once the product is done; the
# reference's own time does not grow (76 against 80-83 ms here). robotmem's own scans use no BLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402
from bench_postgres import postgres_database  # noqa: E402

from robotmem import Memory  # noqa: E402
from robotmem.config import is_postgres_url  # noqa: E402
from robotmem.store.backend import as_vector_bytes  # noqa: E402

DIM = 384
CENTRES = 2000
BASE = ["grip", "force", "slip", "wet", "glass", "bottle", "cube", "push", "door", "dock", "lidar", "wheel", "joint",
        "torque", "camera", "shelf", "bin", "arm", "gripper", "conveyor", "pallet", "pick", "place", "drawer", "cable",
        "valve", "sensor"]
# A Zipf-like vocabulary: a few words everywhere, most words rare, as in real logs.
WORDS = BASE + [f"{BASE[i % len(BASE)]}{i}" for i in range(5000)]
ZIPF = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
ZIPF /= ZIPF.sum()
SPATIAL = {"field": "spatial.object_position", "target": [1.0, 2.0, 0.5]}
CASES: dict[str, dict[str, Any]] = {
    "plain": {},
    "broad filter (grip_force >= 3, ~90 %)": {"context_filter": {"params.grip_force.value": {"$gte": 3}}},
    "selective filter (0.05 %)": {"context_filter": {"task.batch": 7, "task.success": True}},
    "spatial": {"spatial_sort": SPATIAL},
    "filter + spatial": {"context_filter": {"task.name": "pick", "task.success": True}, "spatial_sort": SPATIAL},
}
MIN_SIMILARITY = 0.2  # recall's default floor
#: Untimed recalls before each case's timed ones, with their own words and vectors: a control loop
#: calling recall every cycle finds the store's upper pages in SQLite's cache; the first recalls of
#: an opened store do not (measured separately: the first recall in a fresh process).
WARM_UP = 50
NO_TEXT_MATCH = "zzqxv"  # matches no memory: the answer is the vector side's alone
#: Each run writes 10,000 memories into the store it measures (the bulk-insert figures) and keeps them;
#: a SQLite store grown past this share above its nominal size is written again, so that "100,000"
#: measures at most 110,000 (the top-10 agreement falls as the IVF snapshot covers more rows).
GROWTH = 0.10


class BenchVectors:
    """Stand-in embedder: returns the vectors it is given (no model cost)."""

    model_id = "bench-clustered/384"
    dim = DIM

    def __init__(self) -> None:
        self.batch: np.ndarray | None = None
        self.next: np.ndarray | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) > 1 and self.batch is not None:
            return self.batch[: len(texts)]
        if self.next is not None:
            return self.next[None, :]
        v = np.random.default_rng(abs(hash(texts[0])) % 2**32).standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.9
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def record(i: int, size: int, rng: np.random.Generator) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS, size=8, p=ZIPF))
    return {
        "description": f"episode {i}: {words}",
        "perception_type": "tactile",
        "metadata": {
            "params": {"grip_force": {"value": round(float(rng.uniform(1, 30)), 2), "unit": "N"}},
            "task": {"name": str(rng.choice(["pick", "place", "push", "open"])), "success": bool(rng.random() < 0.5),
                     "batch": int(i % 1000), "slot": int(i % (size // 30))},
            "spatial": {"object_position": [round(float(x), 3) for x in rng.uniform(-5, 5, size=3)]},
            "robot": {"id": f"arm-{i % 4}"},
        },
    }


def wal_frames(path: Path | str) -> int:
    """Frames the WAL file has room for (it keeps its size when SQLite starts it again from the first)."""
    wal = Path(f"{path}-wal")
    return wal.stat().st_size // (4096 + 24) if wal.exists() else 0


def ms(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000


GENERATION = "generation insert rate, bulk_writer() (records/s)"


def generate(path: Path | str, size: int, centres: np.ndarray) -> float:
    """Write the store once through one ``Memory.bulk_writer()``; returns its rate over the whole store
    (records/s, batches of 1,000, records drawn ten batches at a time before the clock starts and
    the tenth batch's commit waited for inside the time)."""
    rng = np.random.default_rng(size)
    embedder = BenchVectors()
    elapsed = 0.0
    with Memory(path, embedder=embedder) as mem, mem.bulk_writer(write_indexes=False) as writer:
        for first in range(0, size, 10_000):
            chunk = [(clustered(rng, centres, 1000), [record(i, size, rng) for i in range(start, start + 1000)])
                     for start in range(first, min(first + 10_000, size), 1000)]
            t0 = time.perf_counter()
            for vectors, records in chunk:
                embedder.batch = vectors
                writer.save_perceptions(records)
            writer.flush()
            elapsed += time.perf_counter() - t0
            if first % 100_000 == 0:
                print(f"  generated {first:,} of {size:,} ({first / max(elapsed, 1e-9):,.0f}/s)", flush=True)
    return size / elapsed


def reference_rows(location: Path | str) -> list[tuple[Any, ...]]:
    """(id, vector bytes, task.batch, task.success, grip_force, task.name, task.slot) of every active memory."""
    if is_postgres_url(location):
        import psycopg
        from pgvector.psycopg import register_vector

        with psycopg.connect(str(location)) as pg:
            register_vector(pg)
            rows = pg.execute(
                "SELECT m.id, e.vector, (m.context #> '{task,batch}')::int, (m.context #> '{task,success}')::bool, "
                "(m.context #> '{params,grip_force,value}')::float8, m.context #>> '{task,name}', "
                "(m.context #> '{task,slot}')::int FROM memories m JOIN embeddings e ON e.memory_id = m.id "
                "WHERE m.status = 'active' ORDER BY m.id").fetchall()
        return [(r[0], as_vector_bytes(r[1]), *r[2:]) for r in rows]
    import apsw

    conn = apsw.Connection(str(location), flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute(
        "SELECT m.id, e.vector, json_extract(m.context, '$.task.batch'), json_extract(m.context, '$.task.success'), "
        "json_extract(m.context, '$.params.grip_force.value'), json_extract(m.context, '$.task.name'), "
        "json_extract(m.context, '$.task.slot') FROM memories m JOIN embeddings e ON e.memory_id = m.id "
        "WHERE m.status = 'active' ORDER BY m.id").fetchall()
    conn.close()
    return rows


def load_reference(location: Path | str) -> dict[str, np.ndarray]:
    """Every vector and the filter fields, read back from the store: the exact reference."""
    ids, blobs, batch, success, force, name, slot = zip(*reference_rows(location))
    return {
        "ids": np.asarray(ids, dtype=np.int64),
        "matrix": np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, DIM),
        "batch": np.asarray([-1 if b is None else b for b in batch]),
        "success": np.asarray([bool(s) for s in success]),
        "force": np.asarray([0.0 if f is None else f for f in force]),
        "pick": np.asarray([n == "pick" for n in name]),
        "slot": np.asarray([-1 if s is None else s for s in slot]),
    }


def exact_top(ref: dict[str, np.ndarray], q: np.ndarray, mask: np.ndarray | None, k: int = 10) -> dict[int, float]:
    """The exact top-k (above recall's default similarity floor, 0.2) among the rows ``mask`` leaves,
    with their cosines."""
    # Rows the mask drops are scored and then ruled out: selecting them first would copy up to
    # 1.4 GB per query at 1,000,000 (a broad filter), evicting the caches of the recall timed next.
    ids = ref["ids"]
    scores = ref["matrix"] @ q
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
    top = top[scores[top] >= MIN_SIMILARITY]
    return dict(zip(ids[top].tolist(), scores[top].tolist()))


def agreement(expected: dict[int, float], hits: list[dict[str, Any]]) -> float:
    """The share of the exact top k that the hits hold; a hit tied with the exact k-th (equal
    vectors: the store holds copies) counts as the one it displaced."""
    floor = min(expected.values()) - 1e-5
    agreeing = sum(1 for h in hits if h["id"] in expected or (h.get("similarity") or -1.0) >= floor)
    return min(agreeing, len(expected)) / len(expected)


def child(db: str, mode: str, queries: str) -> None:
    """Run in a fresh process: first recall after open, or RSS after many recalls."""
    t0 = time.perf_counter()
    qs = np.load(queries)
    with Memory(db if is_postgres_url(db) else Path(db), embedder=BenchVectors()) as mem:
        opened = time.perf_counter() - t0
        mem.recall("pallet cube", n=10, query_vector=qs[0])
        first = time.perf_counter() - t0
        if mode == "rss":
            for i, q in enumerate(qs):
                for kwargs in CASES.values():
                    mem.recall(" ".join(WORDS[j] for j in (i, i + 7, i + 13)), n=10, query_vector=q, **kwargs)
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        print(json.dumps({"open_s": opened, "first_recall_s": first,
                          **{k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}}))


def run_child(db: Path | str, mode: str, queries: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", str(db), mode, str(queries)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bulk_batches(mem: Memory, embedder: BenchVectors, batches: list[tuple[list[dict[str, Any]], np.ndarray]]
                 ) -> float:
    """Seconds to write the batches through one ``Memory.bulk_writer()``, its closing included
    (the last batch's commit): each batch commits on the writer's worker while the next is prepared.
    The vector snapshot is not written at its close (``write_indexes=False``): the figure is the write path's."""
    t = time.perf_counter()
    with mem.bulk_writer(write_indexes=False) as writer:
        for records, vectors in batches:
            embedder.batch = vectors
            writer.save_perceptions(records)
    return time.perf_counter() - t


def empty_store_batches(rng: np.random.Generator, centres: np.ndarray, size: int) -> tuple[list[float], float]:
    """Seconds each of five batches of 1,000 takes into a new, empty store through save_perceptions,
    after one unmeasured batch; then seconds for five more through a bulk writer.

    Run right after the batches into the big store: this host's speed moves by half from one
    minute to the next, so the ratio of the two says what the store's size costs, apart from
    the minute it was measured in."""
    embedder = BenchVectors()
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "empty.db", embedder=embedder) as mem:
        times = []
        for j in range(6):
            records = [record(j * 1000 + i, size, rng) for i in range(1000)]
            embedder.batch = clustered(rng, centres, 1000)
            elapsed = timed(lambda: mem.save_perceptions(records))
            if j:
                times.append(elapsed)
        pipelined = bulk_batches(mem, embedder, new_batches(rng, centres, 6000, size))
    return times, pipelined


def new_batches(rng: np.random.Generator, centres: np.ndarray, first: int, size: int
                ) -> list[tuple[list[dict[str, Any]], np.ndarray]]:
    """Five batches of 1,000 records from record number ``first``, each with its own vectors."""
    return [([record(first + j * 1000 + i, size, rng) for i in range(1000)], clustered(rng, centres, 1000))
            for j in range(5)]


def prepare(size: int, folder: Path, reindex: bool, url: str | None = None) -> dict[str, Any]:
    """Generate the store once (and its vector index); returns the generation and build figures."""
    if url is not None:
        return prepare_postgres(size, url, reindex)
    figures: dict[str, Any] = {}
    centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)
    path = folder / f"bench{size}.db"
    rows = stored_rows(path) if path.exists() else 0
    if rows > size * (1 + GROWTH):
        print(f"{path} has grown to {rows:,} memories; writing it again", flush=True)
        remove_store(path)
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        figures[GENERATION] = generate(path, size, centres)
        print(f"  generated at {figures[GENERATION]:,.0f} records/s", flush=True)
    embedder = BenchVectors()
    with Memory(path, embedder=embedder) as mem:
        if reindex or not any(Path(str(path) + ".vectors").glob("*.faiss")):
            t = time.perf_counter()
            built = mem.rebuild_vector_indexes(force=True)
            figures["reindex (index build) s"] = time.perf_counter() - t
            figures["index rows"] = sum(b["rows"] for b in built)
            print(f"  index build: {figures['reindex (index build) s']:.1f} s for {figures['index rows']:,} rows",
                  flush=True)
        else:
            # Each run adds 10,000 memories; every other run would otherwise start at a snapshot past
            # its rebuild point, and the first recall would rebuild it on a thread beside the timed
            # recalls (a core busy for 20-30 s at 1M). `robotmem reindex` does the same catch-up.
            t = time.perf_counter()
            caught_up = mem.rebuild_vector_indexes()
            if caught_up:
                figures["index catch-up before measuring (s)"] = time.perf_counter() - t
    return figures


def stored_rows(path: Path) -> int:
    with Memory(path, embedder=BenchVectors()) as mem:
        return int(mem.stats()["memories"])


def remove_store(path: Path) -> None:
    """The database file, its WAL and shared-memory files and its vector index folder."""
    for extra in ("", "-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    shutil.rmtree(f"{path}.vectors", ignore_errors=True)


def prepare_postgres(size: int, url: str, reindex: bool) -> dict[str, Any]:
    """The PostgreSQL twin of prepare: a bulk load (no HNSW upkeep), then the index build."""
    figures: dict[str, Any] = {}
    with Memory(url, embedder=BenchVectors()) as mem:
        empty = mem.stats()["memories"] == 0
    if empty:
        centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)
        print(f"generating {size:,} memories in PostgreSQL ...", flush=True)
        figures[GENERATION] = generate(url, size, centres)
        print(f"  generated at {figures[GENERATION]:,.0f} records/s", flush=True)
    with Memory(url, embedder=BenchVectors()) as mem:
        t = time.perf_counter()
        built = mem.rebuild_vector_indexes(force=reindex)
        if built:
            figures["HNSW index build s"] = time.perf_counter() - t
            figures["index rows"] = sum(b["rows"] for b in built)
            print(f"  HNSW build: {figures['HNSW index build s']:.1f} s for {figures['index rows']:,} rows", flush=True)
    return figures


def run(size: int, queries: int, folder: Path, reindex: bool, url: str | None = None) -> dict[str, Any]:
    figures = prepare(size, folder, reindex, url)
    centres = np.random.default_rng(0).standard_normal((CENTRES, DIM)).astype(np.float32)
    path: Path | str = folder / f"bench{size}.db" if url is None else url
    print("reading the reference vectors ...", flush=True)
    ref = load_reference(path)
    figures["memories in the store when measured"] = len(ref["ids"])
    rng = np.random.default_rng(size + 1)
    qs = ref["matrix"][rng.integers(0, len(ref["ids"]), queries)] + rng.standard_normal((queries, DIM)).astype(np.float32) * 0.05
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    qfile = folder / f"queries{size}{'' if url is None else '-pg'}.npy"
    np.save(qfile, qs[:50])

    brute = [timed(lambda q=q: exact_top(ref, q, None)) for q in qs]
    figures["numpy brute force top-10"] = (ms(brute, 50), ms(brute, 95))

    figures["fresh process: open, first recall (s)"] = run_child(path, "first", qfile)
    masks = {
        "plain": None,
        "broad filter (grip_force >= 3, ~90 %)": ref["force"] >= 3,
        "selective filter (0.05 %)": (ref["batch"] == 7) & ref["success"],
        "spatial": None,
        "filter + spatial": ref["pick"] & ref["success"],
    }
    warm_rng = np.random.default_rng(size + 2)
    warm = ref["matrix"][warm_rng.integers(0, len(ref["ids"]), WARM_UP)]
    embedder = BenchVectors()
    with Memory(path, embedder=embedder) as mem:
        for name, kwargs in CASES.items():
            for q in warm:
                mem.recall(" ".join(warm_rng.choice(WORDS, size=3, p=ZIPF)), n=10, query_vector=q, **kwargs)
            samples, agree, brute_here = [], [], []
            for i, q in enumerate(qs):
                text = " ".join(rng.choice(WORDS, size=3, p=ZIPF))
                samples.append(timed(lambda: mem.recall(text, n=10, query_vector=q, **kwargs)))
                # The reference again beside each recall: on a shared machine the load drifts
                # between the cases, and a ratio to a figure taken minutes earlier would drift too.
                brute_here.append(timed(lambda: exact_top(ref, q, None)))
                if "spatial_sort" not in kwargs and i < 100:
                    got = mem.recall(NO_TEXT_MATCH, n=10, query_vector=q, min_relevance=0, **kwargs)["results"]
                    expected = exact_top(ref, q, masks[name])
                    if expected:
                        agree.append(agreement(expected, got))
            figures[f"recall {name}"] = (ms(samples, 50), ms(samples, 95), float(np.mean(agree)) if agree else None)
            figures[f"  x brute force, interleaved ({name})"] = (ms(samples, 50) / ms(brute_here, 50),)

        # A filter that leaves about 30 rows (31 when the size is not a multiple of the slot
        # count): asked for that many, all come back, the related ones by exact cosine.
        slot_rows = ref["slot"] == 5
        q = ref["matrix"][slot_rows][0]
        res = mem.recall(NO_TEXT_MATCH, n=int(slot_rows.sum()), min_confidence=0, min_relevance=0, query_vector=q,
                         context_filter={"task.slot": 5})
        got = [h["id"] for h in res["results"]]
        cosine = dict(zip(ref["ids"][slot_rows].tolist(), (ref["matrix"][slot_rows] @ q).tolist()))
        ranked = [h for h in res["results"] if h.get("similarity") is not None]
        figures["30-row filter"] = {
            "filter rows": int(slot_rows.sum()), "rows returned": len(got), "exactly the filter's rows": set(got) == set(cosine),
            "similarities exact (|d| < 1e-4)": all(abs(h["similarity"] - cosine[h["id"]]) < 1e-4 for h in ranked),
            # A negative cosine means nothing: those rows tie at the bottom, in any order.
            "ranked by cosine": [h["id"] for h in ranked if cosine[h["id"]] > 0]
            == sorted((h["id"] for h in ranked if cosine[h["id"]] > 0), key=lambda m: -cosine[m]),
        }

        # The most common word alone, plain and under the selective filter: full text must not
        # walk all of its matches (robotmem/store/term_rank.py).
        everywhere = WORDS[0]
        for label, extra in (("plain", {}), ("selective filter", CASES["selective filter (0.05 %)"])):
            common = [timed(lambda q=q: mem.recall(everywhere, n=10, query_vector=q, **extra)) for q in qs[:50]]
            figures[f"the most common word ({everywhere!r}), {label}"] = (ms(common, 50), ms(common, 95))

        # A control loop's repeated question: cached embedding vs the vector given.
        embedder.next = qs[1]
        text = "pallet cube gripper"
        mem.recall(text, n=10)
        # In alternating blocks: run one after the other, the first 100 paid for what the store was
        # still settling (6.98 against 5.51 ms at 100,000, while alternating blocks gave 10.71 both).
        repeated: list[float] = []
        given: list[float] = []
        for block in range(10):
            first, second = (repeated, given) if block % 2 == 0 else (given, repeated)
            for samples in (first, second):
                vector = None if samples is repeated else qs[1]
                samples += [timed(lambda: mem.recall(text, n=10, query_vector=vector)) for _ in range(10)]
        figures["repeated query: cached vs vector given"] = (ms(repeated, 50), ms(given, 50))

        # Vectors drawn like the store's own: copies of this run's queries would sit between the
        # clusters and become near neighbours of the next run's (regenerated, similar) queries.
        learned = clustered(rng, centres, 200)
        learn = []
        for i in range(200):
            embedder.next = learned[i]
            learn.append(timed(lambda: mem.learn(f"bench insight {time.time()} {i} {WORDS[i]}", {"task": {"batch": -1}})))
        figures["learn (excluding embedding)"] = (ms(learn, 50), ms(learn, 95))
        embedder.next = None
        # Written before the clock starts: drawing a record's words costs 0.6 ms, more than inserting it.
        # Vectors drawn per batch, as the generator does: one draw for all five would store five
        # copies of each vector per run, and copies tie in every later run's exact top 10.
        batches = new_batches(rng, centres, size, size)
        bulk = []
        notes = []
        for records, vectors in batches:
            embedder.batch = vectors
            cpu = time.thread_time()
            bulk.append(timed(lambda: mem.save_perceptions(records)))
            # This thread's CPU time beside the wall time: on a shared host the same batch's CPU
            # time moves by half from one minute to the next, which the wall time alone hides.
            cpu_ms = (time.thread_time() - cpu) * 1000
            notes.append(f" (CPU {cpu_ms:.0f}" + ("" if url else f", {wal_frames(path):,} WAL frames") + ")")
        figures["bulk insert into this store (records/s)"] = 5000 / sum(bulk)
        # The first batch after the recalls above finds the write path's pages out of SQLite's cache;
        # the WAL grows while the checkpoint thread is still copying when the next batch begins.
        figures["  bulk insert, each batch of 1,000 (ms)"] = ", ".join(f"{b * 1000:.0f}{n}" for b, n in zip(bulk, notes))
        pipelined = bulk_batches(mem, embedder, new_batches(rng, centres, size + 5000, size))
        figures["bulk insert, Memory.bulk_writer() (records/s)"] = 5000 / pipelined
        if url is None:
            empty, empty_pipelined = empty_store_batches(rng, centres, size)
            figures["  same batches into an empty store right after (records/s)"] = 5000 / sum(empty)
            figures["  this store's batch time over the empty store's"] = (sum(bulk) / sum(empty),)
            figures["  bulk_writer() into the empty store (records/s)"] = 5000 / empty_pipelined
    figures["second process on the same store (MB)"] = run_child(path, "rss", qfile)
    t = time.perf_counter()
    stats = subprocess.run([sys.executable, "-m", "robotmem", "--url" if url else "--db", str(path), "stats"],
                           capture_output=True, text=True)
    figures["`robotmem stats` wall time (s)"] = (time.perf_counter() - t, stats.returncode)
    return figures


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/robotmem-bench"))
    parser.add_argument("--reindex", action="store_true", help="rebuild the vector index even when one exists")
    parser.add_argument("--generate-only", action="store_true", help="write the stores (and indexes) and stop")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    parser.add_argument("--url", default=os.environ.get("ROBOTMEM_BENCH_POSTGRES_URL"),
                        help="PostgreSQL server for --backend postgresql (default: a temporary pgserver)")
    args = parser.parse_args()
    args.store_dir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    for size in args.sizes:
        if args.backend != "postgresql":
            measure(size, args, None)
        if args.backend != "sqlite":
            with postgres_database(args.url, f"robotmem_bench_{size}", reuse=True) as url:
                measure(size, args, url)


def measure(size: int, args: argparse.Namespace, url: str | None) -> None:
    if args.generate_only:
        print(prepare(size, args.store_dir, args.reindex, url))
        return
    figures = run(size, args.queries, args.store_dir, args.reindex, url)
    backend = "SQLite" if url is None else "PostgreSQL"
    print(f"\n== {size:,} memories, {backend} ==  (load average {os.getloadavg()[0]:.1f})")
    for key, value in figures.items():
        if isinstance(value, tuple) and len(value) == 3:
            p50, p95, agree = value
            extra = "" if agree is None else f"   top-10 agreement {agree:.3f}"
            print(f"{key:<44} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms{extra}")
        elif isinstance(value, tuple):
            print(f"{key:<44} " + "   ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value))
        elif isinstance(value, dict):
            print(f"{key:<44} " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                             for k, v in value.items()))
        else:
            print(f"{key:<44} {value:,.1f}" if isinstance(value, float) else f"{key:<44} {value}")


if __name__ == "__main__":
    main()
