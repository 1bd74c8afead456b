"""A set of facts loaded for comparison: rows, vectors, text signatures and buckets.

Facts are only ever compared inside a *bucket*: the same context identity and params
shape (:func:`context_bucket`) and the same text guard (numbers, negations, contrast
words). Everything in a bucket is then scored at once: cosine by one matrix product,
word Jaccard by one binary word-matrix product.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy import sparse

from ..context import load_stored_json
from ..search.relevance import cjk_share
from .context_rule import context_bucket
from .similarity import TextSignature, signature
from .sized_cache import cache_by_length

__all__ = ["CJK_COSINE_LIMIT", "FactPool", "FactRow", "jaccard_of_counts", "pair_scores"]

#: Above this share of CJK letters a text is one an English-only model cannot read (its cosine
#: is not evidence of a duplicate): mixed notes ("Panda 抓取失败") are read by their English part.
CJK_COSINE_LIMIT = 0.5


class FactRow(NamedTuple):
    """One fact as consolidation sees it (columns of ``memories``); a tuple because thousands
    of earlier facts are loaded at every end_session."""

    id: int
    content: str
    context: dict[str, Any]
    evidence: int
    first_seen: float
    last_seen: float


#: What _parse_context() keeps: 65,536 small contexts (about 200 MB at 156 characters), fewer
#: large ones (a parsed context is 4-20 bytes a character of its JSON: 250 MB at most).
CONTEXT_CACHE_ENTRIES = 65_536
CONTEXT_CACHE_CHARS = 12 << 20


@cache_by_length(CONTEXT_CACHE_ENTRIES, CONTEXT_CACHE_CHARS)
def _parse_context(context_json: str) -> tuple[dict[str, Any], Hashable]:
    """Parsed context and its bucket, cached: the same earlier facts are read at every end_session.

    The returned dict is shared between callers and must not be modified.
    """
    context = load_stored_json(context_json) if context_json else {}
    return context, context_bucket(context)


@dataclass
class FactPool:
    rows: list[FactRow]
    vectors: np.ndarray  # (n, dim) float32; zero rows where has_vector is False
    has_vector: np.ndarray  # (n,) bool
    context_buckets: list[Hashable]
    signatures: list[TextSignature] = field(init=False)
    #: texts whose letters are more than CJK_COSINE_LIMIT CJK: an English-only model cannot read them
    mostly_cjk: np.ndarray = field(init=False)
    bucket_keys: list[Hashable] = field(init=False)
    buckets: dict[Hashable, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.signatures = [signature(r.content) for r in self.rows]
        self.mostly_cjk = np.array([cjk_share(r.content) > CJK_COSINE_LIMIT for r in self.rows], dtype=bool)
        self.bucket_keys = [(c, s.guard) for c, s in zip(self.context_buckets, self.signatures)]
        self.buckets = {}
        for i, key in enumerate(self.bucket_keys):
            self.buckets.setdefault(key, []).append(i)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def from_db_rows(cls, raw: Sequence[tuple[Any, ...]], dim: int | None) -> FactPool:
        """``raw`` rows: (id, content, context_json, evidence, first_seen, last_seen, vector_blob|None)."""
        parsed = [_parse_context(r[2]) for r in raw]
        rows = [FactRow(r[0], r[1], ctx, r[3], r[4], r[5]) for r, (ctx, _) in zip(raw, parsed)]
        vectors = np.zeros((len(rows), dim or 1), dtype=np.float32)
        has_vector = np.zeros(len(rows), dtype=bool)
        if dim:
            present = [i for i, r in enumerate(raw) if r[6] is not None and len(r[6]) == 4 * dim]
            if present:
                blob = b"".join(raw[i][6] for i in present)
                vectors[present] = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
                has_vector[present] = True
        return cls(rows=rows, vectors=vectors, has_vector=has_vector, context_buckets=[b for _, b in parsed])


#: Above this many cells a dense word matrix would waste memory; use a sparse one.
_DENSE_CELLS = 4_000_000


def _word_matrix(sigs: Sequence[TextSignature], vocabulary: dict[str, int]) -> Any:
    """Binary (texts x vocabulary) matrix, row i marking the words of text i: dense when small
    (no per-call overhead for the many small buckets), sparse when large."""
    rows = [i for i, sig in enumerate(sigs) for _ in sig.words]
    cols = [vocabulary[w] for sig in sigs for w in sig.words]
    shape = (len(sigs), max(1, len(vocabulary)))
    if shape[0] * shape[1] <= _DENSE_CELLS:
        dense = np.zeros(shape, dtype=np.float32)
        dense[rows, cols] = 1.0
        return dense
    return sparse.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=shape)


def _jaccard(sigs_a: Sequence[TextSignature], sigs_b: Sequence[TextSignature]) -> np.ndarray:
    vocabulary: dict[str, int] = {}
    for sig in (*sigs_a, *sigs_b):
        for word in sig.words:
            vocabulary.setdefault(word, len(vocabulary))
    wa, wb = _word_matrix(sigs_a, vocabulary), _word_matrix(sigs_b, vocabulary)
    inter = wa @ wb.T
    inter = np.asarray(inter.todense()) if sparse.issparse(inter) else inter
    size_a = np.array([len(s.words) for s in sigs_a], dtype=np.float32)
    size_b = np.array([len(s.words) for s in sigs_b], dtype=np.float32)
    return jaccard_of_counts(inter, size_a, size_b)


def jaccard_of_counts(inter: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """Word Jaccard from the (len(a), len(b)) counts of shared words and each text's number of
    words; two texts without words are alike (1). The exhaustive plan and the candidate search
    (candidates.py) both use this, so they accept exactly the same pairs."""
    union = size_a[:, None] + size_b[None, :] - inter
    return np.asarray(np.where(union > 0, inter / np.maximum(union, np.float32(1.0)), np.float32(1.0)))


def pair_scores(
    a: FactPool, a_idx: Sequence[int], b: FactPool, b_idx: Sequence[int], *, cosine: float, text: float,
    reads_cjk: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(qualifies, similarity) matrices of shape (len(a_idx), len(b_idx)).

    A pair qualifies when both facts are in the same bucket and their cosine >= ``cosine``
    (both have vectors the model could read: not a mostly-CJK text unless ``reads_cjk``) or
    their word Jaccard >= ``text``; ``similarity`` is the larger of the two, used to pick the
    best partner.
    """
    ai, bi = np.asarray(a_idx, dtype=np.int64), np.asarray(b_idx, dtype=np.int64)
    # all-MiniLM-L6-v2 gives unrelated Chinese sentences cosines of 0.5-0.92 (datasets/retrieval):
    # its cosine of a Chinese fact is noise, and a merge on noise loses a fact.
    read_a = a.has_vector[ai] if reads_cjk else a.has_vector[ai] & ~a.mostly_cjk[ai]
    read_b = b.has_vector[bi] if reads_cjk else b.has_vector[bi] & ~b.mostly_cjk[bi]
    both = np.outer(read_a, read_b)
    # In float64, rounded to float32: a float32 product's last bit depends on the matrices' shapes
    # (BLAS kernels, SIMD remainders), and the indexed plan scores a pair inside a smaller matrix
    # than the exhaustive one. Products of float32 are exact in float64 and the sum's rounding
    # error stays far below float32's, so every pair gets the same cosine in both, and equally
    # similar partners tie (then the earlier one wins) in both.
    product = (a.vectors[ai].astype(np.float64) @ b.vectors[bi].astype(np.float64).T).astype(np.float32)
    cos = np.where(both, product, np.float32(-1.0))
    jac = _jaccard([a.signatures[i] for i in a_idx], [b.signatures[i] for i in b_idx])
    numbering: dict[Hashable, int] = {}
    bucket_a = np.array([numbering.setdefault(a.bucket_keys[i], len(numbering)) for i in a_idx])
    bucket_b = np.array([numbering.setdefault(b.bucket_keys[i], len(numbering)) for i in b_idx])
    same_bucket = bucket_a[:, None] == bucket_b[None, :]
    qualifies = same_bucket & ((cos >= cosine) | (jac >= text))
    return qualifies, np.maximum(cos, jac)
