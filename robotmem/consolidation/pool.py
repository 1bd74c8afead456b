"""A set of facts loaded for comparison: rows, vectors, text signatures and buckets.

Facts are only ever compared inside a *bucket*: the same context identity and params
shape (:func:`context_bucket`) and the same text guard (numbers, negations, contrast
words). Everything in a bucket is then scored at once: cosine by one matrix product,
word Jaccard by one sparse matrix product.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from .context_rule import context_bucket
from .similarity import TextSignature, signature

__all__ = ["FactPool", "FactRow", "pair_scores"]


@dataclass(frozen=True)
class FactRow:
    """One fact as consolidation sees it (columns of ``memories``)."""

    id: int
    content: str
    context: dict[str, Any]
    evidence: int
    first_seen: float
    last_seen: float


@dataclass
class FactPool:
    rows: list[FactRow]
    vectors: np.ndarray  # (n, dim) float32; zero rows where has_vector is False
    has_vector: np.ndarray  # (n,) bool
    signatures: list[TextSignature] = field(init=False)
    bucket_keys: list[Hashable] = field(init=False)
    buckets: dict[Hashable, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.signatures = [signature(r.content) for r in self.rows]
        self.bucket_keys = [(context_bucket(r.context), s.guard) for r, s in zip(self.rows, self.signatures)]
        self.buckets = {}
        for i, key in enumerate(self.bucket_keys):
            self.buckets.setdefault(key, []).append(i)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def from_db_rows(cls, raw: Sequence[tuple[Any, ...]], dim: int | None) -> FactPool:
        """``raw`` rows: (id, content, context_json, evidence, first_seen, last_seen, vector_blob|None)."""
        rows = [
            FactRow(id=int(r[0]), content=r[1], context=json.loads(r[2]) if r[2] else {}, evidence=int(r[3]),
                    first_seen=float(r[4]), last_seen=float(r[5]))
            for r in raw
        ]
        width = dim or 1
        vectors = np.zeros((len(rows), width), dtype=np.float32)
        has_vector = np.zeros(len(rows), dtype=bool)
        if dim:
            for i, r in enumerate(raw):
                blob = r[6]
                if blob is not None and len(blob) == 4 * dim:
                    vectors[i] = np.frombuffer(blob, dtype=np.float32)
                    has_vector[i] = True
        return cls(rows=rows, vectors=vectors, has_vector=has_vector)


def _word_matrix(sigs: Sequence[TextSignature], vocabulary: dict[str, int]) -> sparse.csr_matrix:
    """Binary (texts x vocabulary) matrix: row i marks the words of text i."""
    indptr: list[int] = [0]
    indices: list[int] = []
    for sig in sigs:
        indices.extend(vocabulary[w] for w in sig.words)
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.float32)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(sigs), max(1, len(vocabulary))))


def pair_scores(
    a: FactPool, a_idx: Sequence[int], b: FactPool, b_idx: Sequence[int], *, cosine: float, text: float
) -> tuple[np.ndarray, np.ndarray]:
    """(qualifies, similarity) matrices of shape (len(a_idx), len(b_idx)).

    A pair qualifies when cosine >= ``cosine`` (both have vectors) or word Jaccard >= ``text``;
    ``similarity`` is the larger of the two, used to pick the best partner.
    """
    ai, bi = np.asarray(a_idx, dtype=np.int64), np.asarray(b_idx, dtype=np.int64)
    both = np.outer(a.has_vector[ai], b.has_vector[bi])
    cos = np.where(both, a.vectors[ai] @ b.vectors[bi].T, -1.0)
    sigs_a, sigs_b = [a.signatures[i] for i in a_idx], [b.signatures[i] for i in b_idx]
    vocabulary: dict[str, int] = {}
    for sig in (*sigs_a, *sigs_b):
        for word in sig.words:
            vocabulary.setdefault(word, len(vocabulary))
    wa, wb = _word_matrix(sigs_a, vocabulary), _word_matrix(sigs_b, vocabulary)
    inter = np.asarray((wa @ wb.T).todense())
    size_a = np.asarray(wa.sum(axis=1)).reshape(-1, 1)
    size_b = np.asarray(wb.sum(axis=1)).reshape(1, -1)
    union = size_a + size_b - inter
    jac = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    qualifies = (cos >= cosine) | (jac >= text)
    return qualifies, np.maximum(cos, jac)
