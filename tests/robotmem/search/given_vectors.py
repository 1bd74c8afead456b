"""A stand-in embedder that returns the vectors a test gives it (a fast seam: no model cost).

Also runnable as a writer process for the killed-writer test:
``python given_vectors.py DB COLLECTION SEED`` inserts batches of clustered vectors until killed.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DIM = 32


class GivenVectors:
    model_id = "test-given/32"
    dim = DIM

    def __init__(self) -> None:
        self.queue: list[np.ndarray] = []
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.queue:
            out, self.queue = np.stack(self.queue[: len(texts)]), self.queue[len(texts):]
            return out
        return np.stack([vector_of(t) for t in texts])


def vector_of(text: str) -> np.ndarray:
    """A fixed unit vector per text; texts 'c<k> ...' lie near centre k, so neighbours exist."""
    head = text.split()[0]
    rng = np.random.default_rng(int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "big"))
    v = rng.standard_normal(DIM).astype(np.float32) * 0.5
    if head.startswith("c") and head[1:].isdigit():
        v += np.random.default_rng(int(head[1:])).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _write_until_killed(db: str, collection: str, seed: int) -> None:
    from robotmem import Memory

    with Memory(Path(db), embedder=GivenVectors(), collection=collection) as mem:
        batch = 0
        while True:
            mem.save_perceptions([{"description": f"c{(seed + i) % 40} writer {seed} batch {batch} item {i}"}
                                  for i in range(200)])
            print(batch, flush=True)
            batch += 1


if __name__ == "__main__":
    _write_until_killed(sys.argv[1], sys.argv[2], int(sys.argv[3]))
