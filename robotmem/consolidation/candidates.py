"""The earlier facts worth scoring against an episode's groups, found without loading every one.

The exhaustive plan (``earlier_facts`` + ``match_earlier``) reads every earlier fact of the
episode's robot/task/success with its context and vector, and scores the episode's groups
against all of them: about 45 ms per 1,000 earlier facts at every end_session. But a fact
can only absorb a group when the pair *qualifies* (cosine >= ``rules.cosine`` with both
vectors present, or word Jaccard >= ``rules.text_similarity``, with equal text guards), and
the best partner is always chosen among qualifying pairs. So it is enough to find every
earlier fact that qualifies with some group survivor, load only those, and run the same
``match_earlier`` on them:

* by vector: the collection's in-process vector mirror (robotmem.search.vector_index,
  exact, kept current from ``change_log``) gives every row with cosine >= the threshold
  to any survivor, in one matrix product per chunk of rows;
* by words: the ids and texts of the earlier facts (no context, no vector) are read, their
  words and guards kept in a cache across calls, and Jaccard computed with one sparse
  product per guard the survivors have.

Both searches are exact and use a threshold a little below the rule's (float rounding
of a different product shape must not drop a pair at the threshold); the rule itself is
then applied by ``pair_scores`` on the loaded candidates, which are read in the order
``earlier_facts`` returns (first_seen, id), so ties between equally similar partners are
broken as in the exhaustive plan. The plans are therefore the same (tests compare them).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import apsw
import numpy as np
from scipy import sparse

from ..search.vector_index import VectorIndex
from .plan import Group, MergeRules
from .pool import FactPool, jaccard_of_counts
from .reads import earlier_facts, earlier_texts
from .similarity import signature

__all__ = ["indexed_earlier"]

#: Candidates are searched this far below the rule's thresholds (the rule is applied after).
_MARGIN = 1e-4
#: Cached word keys; cleared (with the numbering) before it would grow past this many texts.
_CACHE_LIMIT = 1_000_000
#: Once the cache holds more than this many texts (and twice what the last pruning kept), the texts
#: no plan asked for in the last _KEEP_PLANS plans are dropped: the texts of facts since forgotten,
#: merged away or updated are never asked for again, and before they stayed until the cache held
#: a million texts (about 0.7 GB), however few facts the store had left.
_PRUNE_AT = 50_000
_KEEP_PLANS = 64
_ROWS_PER_PRODUCT = 50_000

_vocabulary: dict[str, int] = {}
_guards: dict[Hashable, int] = {}
_keys: dict[str, tuple[int, np.ndarray]] = {}
#: The plan that last asked for each cached text (a count of plans, _plans).
_asked: dict[str, int] = {}
_plans = 0
_pruned_to = 0
#: Held while word numbers are handed out and used: a clear in between would renumber them.
_lock = threading.Lock()


def _key(text: str) -> tuple[int, np.ndarray]:
    """(guard number, sorted word numbers) of a text, cached: the same earlier facts come back at
    every end_session, and 100,000 of them would not fit signature()'s own cache."""
    found = _keys.get(text)
    if found is None:
        sig = signature(text)
        guard = _guards.setdefault(sig.guard, len(_guards))
        words = np.array(sorted(_vocabulary.setdefault(w, len(_vocabulary)) for w in sig.words), dtype=np.int32)
        found = _keys[text] = (guard, words)
    _asked[text] = _plans
    return found


def _prune() -> None:
    """Drop the texts no recent plan asked for, and number the words and guards of the rest afresh
    (with ``_lock`` held, before any number is handed out). Amortised: it runs again only once the
    cache has doubled since, so a cache of texts all still asked for is not scanned at every plan."""
    global _keys, _asked, _vocabulary, _guards, _pruned_to
    if len(_keys) <= max(_PRUNE_AT, 2 * _pruned_to):
        return
    recent = {t: p for t, p in _asked.items() if p > _plans - _KEEP_PLANS}
    kept = {t: _keys[t] for t in recent}
    words = np.unique(np.concatenate([w for _, w in kept.values()])) if kept else np.zeros(0, dtype=np.int32)
    renumber = np.full(len(_vocabulary), -1, dtype=np.int32)
    renumber[words] = np.arange(len(words), dtype=np.int32)  # increasing: each text's words stay sorted
    guards = {g for g, _ in kept.values()}
    guard_renumber = {g: i for i, g in enumerate(sorted(guards))}
    _vocabulary = {w: int(renumber[n]) for w, n in _vocabulary.items() if renumber[n] >= 0}
    _guards = {v: guard_renumber[g] for v, g in _guards.items() if g in guard_renumber}
    _keys = {t: (guard_renumber[g], renumber[w]) for t, (g, w) in kept.items()}
    _asked = recent
    _pruned_to = len(_keys)


def _word_rows(keys: Sequence[np.ndarray], width: int) -> sparse.csr_matrix:
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    indptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int32)
    return sparse.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr), shape=(len(keys), width))


def _guards_of(texts: list[tuple[int, str]], episode: FactPool, survivors: list[int]) -> tuple[
    list[tuple[int, np.ndarray]], dict[int, list[int]]
]:
    """Word keys of the texts and the survivors by guard number (with ``_lock`` held)."""
    global _plans, _pruned_to
    _plans += 1
    _prune()
    if len(_keys) + len(texts) + len(survivors) > _CACHE_LIMIT:  # before any number is handed out
        _keys.clear()
        _vocabulary.clear()
        _guards.clear()
        _asked.clear()
        _pruned_to = 0
    keys = [_key(text) for _, text in texts]
    wanted: dict[int, list[int]] = {}
    for s in survivors:
        wanted.setdefault(_key(episode.rows[s].content)[0], []).append(s)
    return keys, wanted


def _by_words(keys: list[tuple[int, np.ndarray]], queries: list[np.ndarray], positions: np.ndarray,
              threshold: float) -> np.ndarray:
    """Those of ``positions`` (into ``keys``) whose Jaccard with some query reaches ``threshold``."""
    width = len(_vocabulary)
    query_matrix = _word_rows(queries, width).T.tocsc()
    query_sizes = np.fromiter((len(q) for q in queries), dtype=np.float32, count=len(queries))
    found: list[np.ndarray] = []
    for start in range(0, len(positions), _ROWS_PER_PRODUCT):
        chunk = positions[start : start + _ROWS_PER_PRODUCT]
        rows = [keys[p][1] for p in chunk]
        inter = np.asarray((_word_rows(rows, width) @ query_matrix).todense(), dtype=np.float32)
        sizes = np.fromiter((len(r) for r in rows), dtype=np.float32, count=len(rows))
        jac = jaccard_of_counts(inter, sizes, query_sizes)
        found.append(chunk[(jac >= threshold).any(axis=1)])
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def indexed_earlier(
    conn: apsw.Connection, mirror: VectorIndex | None, episode: FactPool, groups: list[Group], rules: MergeRules,
    collection: str, session_id: str, ended_at: float, model_id: str | None, dim: int | None,
) -> FactPool:
    """The earlier facts that qualify with some group's survivor (a subset of ``earlier_facts``
    that ``match_earlier`` answers identically on), loaded with their contexts and vectors.
    ``mirror`` may be None only when the episode has no vectors (no model)."""
    episode_ids = [r.id for r in episode.rows]
    texts = earlier_texts(conn, collection, session_id, ended_at, episode_ids)
    if not texts:
        return earlier_facts(conn, collection, session_id, ended_at, episode_ids, model_id, dim, only=[])
    survivors = [g.survivor for g in groups]
    ids = np.fromiter((i for i, _ in texts), dtype=np.int64, count=len(texts))
    chosen = np.zeros(len(texts), dtype=bool)
    if any(episode.has_vector[s] for s in survivors):
        if mirror is None:
            raise ValueError("the episode has vectors: their candidates need the collection's vector mirror")
        mirror.sync(conn)
    with _lock:
        keys, wanted = _guards_of(texts, episode, survivors)
        guards = np.fromiter((g for g, _ in keys), dtype=np.int64, count=len(keys))
        # A pair qualifies only with equal guards: each guard's rows against its own survivors.
        for guard, members in wanted.items():
            positions = np.flatnonzero(guards == guard)
            if not len(positions):
                continue
            queries = [_key(episode.rows[s].content)[1] for s in members]
            chosen[_by_words(keys, queries, positions, rules.text_similarity - _MARGIN)] = True
            with_vector = [s for s in members if episode.has_vector[s]]
            if with_vector and mirror is not None:
                near = mirror.near_any(episode.vectors[with_vector], ids[positions], rules.cosine - _MARGIN)
                chosen[positions[np.isin(ids[positions], near)]] = True
    only = [texts[p][0] for p in np.flatnonzero(chosen)]
    return earlier_facts(conn, collection, session_id, ended_at, episode_ids, model_id, dim, only=only)
