"""Choose the vector index: usearch, hnswlib and faiss-cpu against exact numpy top-10.

For each size: build time, on-disk size, open time (and whether the file can be
memory-mapped instead of read into private memory), single-query p50/p95, and
recall@10 agreement with numpy's exact top-10 over the same float32 vectors. The
HNSW rows ask for the top 10; the IVF rows (what robotmem uses) ask for the top 56
(4k + 16, what recall re-ranks exactly) at 16 probes and count how many of the exact
top 10 are among them.
Vectors are synthetic with cluster structure (unit vectors around 2,000 centres),
queries are stored vectors plus noise, as in scripts/bench_recall.py.

    python scripts/bench_ann.py --sizes 100000 1000000 [--queries 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from robotmem.search.ann_index import open_snapshot

DIM = 384
K = 10
M = 16
EF_CONSTRUCTION = 128
EF_SEARCH = 64


def clustered(n: int, rng: np.random.Generator, centres: int = 2000) -> np.ndarray:
    c = rng.standard_normal((centres, DIM)).astype(np.float32)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        out[start:stop] = c[rng.integers(0, centres, stop - start)] + rng.standard_normal((stop - start, DIM)).astype(np.float32) * 0.9
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def exact_top(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = matrix @ q
    top = np.argpartition(-scores, K)[:K]
    return top[np.argsort(-scores[top])]


def p(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000


def measure_queries(search: Callable[[np.ndarray], np.ndarray], qs: np.ndarray, truth: list[set[int]]) -> dict[str, float]:
    times, agree = [], []
    for q, t in zip(qs, truth):
        t0 = time.perf_counter()
        got = search(q)
        times.append(time.perf_counter() - t0)
        agree.append(len(t & {int(x) for x in got}) / K)
    return {"p50_ms": p(times, 50), "p95_ms": p(times, 95), "recall@10": float(np.mean(agree))}


def bench_usearch(data: np.ndarray, qs: np.ndarray, truth: list[set[int]], folder: Path, dtype: str, threads: int) -> dict:
    from usearch.index import Index

    keys = np.arange(len(data), dtype=np.uint64)
    index = Index(ndim=DIM, metric="cos", dtype=dtype, connectivity=M, expansion_add=EF_CONSTRUCTION,
                  expansion_search=EF_SEARCH)
    t0 = time.perf_counter()
    index.add(keys, data, threads=threads)
    build = time.perf_counter() - t0
    path = folder / f"usearch-{dtype}.usearch"
    index.save(str(path))
    del index
    gc.collect()
    t0 = time.perf_counter()
    view = Index.restore(str(path), view=True)
    assert view is not None
    view.expansion_search = EF_SEARCH
    opened = time.perf_counter() - t0
    res = measure_queries(lambda q: view.search(q, K).keys, qs, truth)
    return {"lib": f"usearch {dtype}", "build_s": build, "file_MB": path.stat().st_size / 1e6, "open_s": opened,
            "mmap": "yes (view=True)", **res}


def bench_hnswlib(data: np.ndarray, qs: np.ndarray, truth: list[set[int]], folder: Path, threads: int) -> dict:
    import hnswlib

    index = hnswlib.Index(space="cosine", dim=DIM)
    index.init_index(max_elements=len(data), ef_construction=EF_CONSTRUCTION, M=M)
    t0 = time.perf_counter()
    index.add_items(data, np.arange(len(data)), num_threads=threads)
    build = time.perf_counter() - t0
    path = folder / "hnswlib.bin"
    index.save_index(str(path))
    del index
    gc.collect()
    t0 = time.perf_counter()
    loaded = hnswlib.Index(space="cosine", dim=DIM)
    loaded.load_index(str(path), max_elements=len(data))
    loaded.set_ef(EF_SEARCH)
    loaded.set_num_threads(1)
    opened = time.perf_counter() - t0
    res = measure_queries(lambda q: loaded.knn_query(q, k=K)[0][0], qs, truth)
    return {"lib": "hnswlib f32", "build_s": build, "file_MB": path.stat().st_size / 1e6, "open_s": opened,
            "mmap": "no (read into private memory)", **res}


def bench_faiss(data: np.ndarray, qs: np.ndarray, truth: list[set[int]], folder: Path, threads: int) -> dict:
    import faiss

    faiss.omp_set_num_threads(threads)
    index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    t0 = time.perf_counter()
    index.add(data)
    build = time.perf_counter() - t0
    path = folder / "faiss.index"
    faiss.write_index(index, str(path))
    del index
    gc.collect()
    t0 = time.perf_counter()
    try:
        loaded = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        mmap = "yes (IO_FLAG_MMAP)"
    except RuntimeError as exc:
        loaded = faiss.read_index(str(path))
        mmap = f"no ({str(exc).splitlines()[0][:60]})"
    opened = time.perf_counter() - t0
    loaded.hnsw.efSearch = EF_SEARCH
    faiss.omp_set_num_threads(1)
    res = measure_queries(lambda q: loaded.search(q[None, :], K)[1][0], qs, truth)
    return {"lib": "faiss HNSWFlat f32", "build_s": build, "file_MB": path.stat().st_size / 1e6, "open_s": opened,
            "mmap": mmap, **res}


def bench_faiss_ivf(data: np.ndarray, qs: np.ndarray, truth: list[set[int]], folder: Path, kind: str,
                    threads: int) -> dict:
    import faiss

    faiss.omp_set_num_threads(threads)
    nlist = int(min(4096, max(16, round(len(data) ** 0.5))))
    quantizer = faiss.IndexFlatIP(DIM)
    if kind == "sq8":
        index = faiss.IndexIVFScalarQuantizer(quantizer, DIM, nlist, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFFlat(quantizer, DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    t0 = time.perf_counter()
    sample = np.random.default_rng(0).choice(len(data), min(len(data), 40 * nlist), replace=False)
    index.train(data[np.sort(sample)])
    index.add_with_ids(data, np.arange(len(data), dtype=np.int64))
    build = time.perf_counter() - t0
    path = folder / f"faiss-ivf-{kind}.index"
    faiss.write_index(index, str(path))
    del index
    gc.collect()
    t0 = time.perf_counter()
    loaded = open_snapshot(path)  # as robotmem opens its snapshots
    opened = time.perf_counter() - t0
    faiss.omp_set_num_threads(1)
    params = faiss.SearchParametersIVF()
    params.nprobe = 16
    res = measure_queries(lambda q: loaded.search(q[None, :], 4 * K + 16, params=params)[1][0], qs, truth)
    return {"lib": f"faiss IVF{nlist}-{kind} k56", "build_s": build, "file_MB": path.stat().st_size / 1e6,
            "open_s": opened, "mmap": "yes (IO_FLAG_MMAP_IFC)", **res}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--libs", nargs="+", default=["faiss-ivf-sq8", "faiss-ivf-flat", "usearch-i8", "usearch-f16",
                                                      "usearch-f32", "hnswlib", "faiss"])
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"HNSW M={M}, ef_construction={EF_CONSTRUCTION}, ef_search={EF_SEARCH}, build threads {args.threads}")
    for size in args.sizes:
        rng = np.random.default_rng(size)
        data = clustered(size, rng)
        qs = data[rng.integers(0, size, args.queries)] + rng.standard_normal((args.queries, DIM)).astype(np.float32) * 0.05
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        t_exact = []
        truth = []
        for q in qs:
            t0 = time.perf_counter()
            top = exact_top(data, q)
            t_exact.append(time.perf_counter() - t0)
            truth.append({int(x) for x in top})
        print(f"\n== {size:,} x {DIM} ==  numpy exact top-{K}: p50 {p(t_exact, 50):.2f} ms, p95 {p(t_exact, 95):.2f} ms")
        print(f"{'library':<22}{'build s':>9}{'file MB':>9}{'open s':>8}{'p50 ms':>8}{'p95 ms':>8}{'rec@10':>8}  memory map")
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            for lib in args.libs:
                if lib.startswith("faiss-ivf"):
                    row = bench_faiss_ivf(data, qs, truth, Path(tmp), lib.rsplit("-", 1)[1], args.threads)
                elif lib.startswith("usearch"):
                    row = bench_usearch(data, qs, truth, Path(tmp), lib.split("-")[1], args.threads)
                elif lib == "hnswlib":
                    row = bench_hnswlib(data, qs, truth, Path(tmp), args.threads)
                else:
                    row = bench_faiss(data, qs, truth, Path(tmp), args.threads)
                print(f"{row['lib']:<22}{row['build_s']:>9.1f}{row['file_MB']:>9.0f}{row['open_s']:>8.3f}"
                      f"{row['p50_ms']:>8.3f}{row['p95_ms']:>8.3f}{row['recall@10']:>8.3f}  {row['mmap']}", flush=True)
                gc.collect()
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
