"""Code that runs in writer processes (spawned, so it must be importable by name)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from robotmem import Memory


def learn_same_sentence(db: str, rounds: int, barrier: Any, embedder: str | None) -> list[str]:
    """Each round: wait for every process, then all learn one sentence at the same instant."""
    statuses = []
    with Memory(db, embedder=embedder) as memory:
        for r in range(rounds):
            barrier.wait()
            statuses.append(memory.learn(f"round {r}: the red cup slips at 8 N")["status"])
    return statuses


def mixed_writer(db: str, worker: int, operations: int, seed: int) -> list[tuple[int, str]]:
    """Learn, save, recall, sessions in random order; returns every acknowledged (id, text)."""
    rng = random.Random(seed)
    acknowledged: list[tuple[int, str]] = []
    with Memory(db, embedder=None) as memory:
        session = None
        for i in range(operations):
            roll = rng.random()
            if roll < 0.35:
                text = f"worker {worker} lesson {i}: approach shelf {rng.randint(1, 9)} from the left"
                acknowledged.append((memory.learn(text, context={"task": {"name": "mixed"}})["memory_id"], text))
            elif roll < 0.65:
                text = f"worker {worker} saw object {i} at {rng.random():.3f}"
                result = memory.save_perception(text, data={"joints": [rng.random() for _ in range(6)]},
                                                session_id=session)
                acknowledged.append((result["memory_id"], text))
            elif roll < 0.9:
                memory.recall("shelf approach", n=5)
            elif session is None:
                session = memory.start_session(context={"task": {"name": f"w{worker}"}})["session_id"]
            else:
                memory.end_session(session, outcome_score=0.5)
                session = None
    return acknowledged


def acknowledged_writer(db: str) -> None:
    """Write until killed; print each write's id and text only after the call returned."""
    rng = random.Random()
    with Memory(db, embedder=None) as memory:
        i = 0
        while True:
            i += 1
            text = f"kill test write {i} {rng.random():.6f}"
            if i % 3:
                memory_id = memory.learn(text, context={"params": {"i": i}})["memory_id"]
            else:
                memory_id = memory.save_perception(text, data=[rng.random() for _ in range(256)])["memory_id"]
            sys.stdout.write(json.dumps([memory_id, text]) + "\n")
            sys.stdout.flush()


def bulk_acknowledged_writer(db: str) -> None:
    """Bulk-write batches until killed; print a batch's ids and texts once the call after it returned
    (a bulk writer's batch is stored when the next call returns)."""
    rng = random.Random()
    with Memory(db, embedder=None) as memory, memory.bulk_writer() as writer:
        handed_over: list[tuple[int, str]] = []
        i = 0
        while True:
            texts = [f"bulk kill test {i + k} {rng.random():.6f}" for k in range(rng.randint(1, 40))]
            i += len(texts)
            ids = writer.save_perceptions([{"description": text, "metadata": {"params": {"i": i}, "task": {
                "name": f"batch {i}"}}, "data": [rng.random() for _ in range(32)]} for text in texts])
            for acknowledged in handed_over:
                sys.stdout.write(json.dumps(acknowledged) + "\n")
            sys.stdout.flush()
            handed_over = list(zip(ids, texts))


if __name__ == "__main__":
    if sys.argv[2:] == ["bulk"]:
        bulk_acknowledged_writer(str(Path(sys.argv[1])))
    else:
        acknowledged_writer(str(Path(sys.argv[1])))
