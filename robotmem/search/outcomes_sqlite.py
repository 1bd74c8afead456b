"""Outcome statistics on SQLite (the semantics: robotmem.search.outcomes).

Two plans give one answer:

* index (the default): the set is id arithmetic on boolean masks over memory ids, each
  condition read from an index (the leaf index robotmem.store.leaves for exact filters,
  FTS5 for query words, the time index, the R*Tree); the counting scans three leaf paths
  of the collection (the group field, ``task.success``, ``episode.outcome``) and joins
  them by memory id in numpy. No memory's JSON is read, except where the leaf index
  cannot answer: a filter clause it cannot evaluate exactly ($ne, $nin, $exists), checked
  on the candidates only; arrays and objects as group values; memories without a leaf at
  the group path (an object whose keys all hold brackets has no leaf row); and a set
  small enough that reading its rows beats scanning three leaf paths. Given the caller's
  cached leaf columns (robotmem.search.leaf_columns, kept current by change_log), the three
  paths are not scanned: each memory of the set is looked up in them by id, whatever the
  set's size, and only building the set's masks costs.
* scan: SQL evaluates the JSON of every memory of the collection (json_type /
  json_extract). It is the reference the index plan is tested and benchmarked against.
"""

from __future__ import annotations

import json
import math
from typing import Any

import apsw
import numpy as np

from ..store.connection import one_row, scalar
from ..store.counts import collection_size
from ..store.leaves import EPOCHS, epochs_through, leaf_path
from .filter_index import LeafSet, exact_clause
from .leaf_columns import LeafColumn, LeafColumns
from .outcome_request import BIG_SCORE, BIG_SCORE_SCALE, OutcomeRequest, Row, common_conditions, neighbourhood
from .spatial import _distances, _frame_sql

__all__ = ["sqlite_rows"]

#: Without cached columns, a set of at most this many memories, or this share of the store, is
#: counted from its JSON rather than by scanning three leaf paths of the collection. Measured at 100,000 (interleaved,
#: same load): 16,787 memories' JSON 97 ms, the three paths' 300,000 leaf rows 81 ms, so
#: the scan wins from about a seventh of the store; a tenth leans towards the cost that does
#: not grow with the set.
SMALL_SET = 2000
JSON_SHARE = 0.1
_NUMBER = "kind IN ('integer', 'real')"


def _leaf_of(dot_path: str) -> str:
    leaf = leaf_path(dot_path)
    assert leaf is not None
    return leaf


_SUCCESS = _leaf_of("task.success")
_OUTCOME = _leaf_of("episode.outcome")

Mask = np.ndarray  # bool, indexed by memory id


def sqlite_rows(conn: apsw.Connection, req: OutcomeRequest, *, use_index: bool = True,
                columns: LeafColumns | None = None) -> list[Row]:
    """``columns``: the process's copies of leaf columns to count from (robotmem.search.leaf_columns)."""
    if req.spatial is not None:
        # A neighbourhood is small: the R*Tree finds it and SQL checks the JSON of its memories only.
        ids = _near(conn, req)
        return _IndexPlan(conn, req, columns).rows_of(ids) if use_index else _scan_ids(conn, req, ids)
    if not use_index:
        where, params = _set_sql(req)
        return _scan(conn, req, where, params)
    return _IndexPlan(conn, req, columns).rows()


# -- the scan plan (the reference) --------------------------------------------------------


def _set_sql(req: OutcomeRequest) -> tuple[str, list[Any]]:
    """WHERE clause over ``m`` for every condition except the spatial one."""
    parts, params = common_conditions(req)
    if req.filter is not None:
        parts.append(req.filter.sql)
        params += list(req.filter.params)
    if req.match is not None:
        hits = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        parts.append(f"(m.id IN ({hits}) OR (m.status = 'superseded' AND m.superseded_by IN ({hits})))")
        params += [req.match, req.match]
    return " AND ".join(parts), params


def _box_sql(req: OutcomeRequest, radius: float | None) -> tuple[str, list[Any]]:
    spatial = req.spatial
    assert spatial is not None
    box, params = "", [spatial.field]  # type: tuple[str, list[Any]]
    if radius is not None:
        for axis, value in zip(("x", "y", "z"), spatial.target):
            box += f" AND r.max{axis} >= ? AND r.min{axis} <= ?"
            params += [value - radius, value + radius]
    return f"r.field = ?{box}", params


def _near(conn: apsw.Connection, req: OutcomeRequest) -> np.ndarray:
    spatial = req.spatial
    assert spatial is not None
    where, params = _set_sql(req)

    def points(radius: float | None) -> dict[int, float]:
        box, box_params = _box_sql(req, radius)
        frame, frame_params = _frame_sql(spatial)
        q = ("SELECT r.memory_id, r.px, r.py, r.pz FROM spatial_points r JOIN memories m ON m.id = r.memory_id "
             f"WHERE {box}{frame} AND {where}")
        return _distances(conn.execute(q, [*box_params, *frame_params, *params]), spatial.target)

    return np.asarray(neighbourhood(req, points), dtype=np.int64)


def _scan(conn: apsw.Connection, req: OutcomeRequest, where: str, params: list[Any]) -> list[Row]:
    """Group rows of the memories ``where`` selects, from their JSON."""
    success = (
        "CASE json_type(m.context, '$.task.success') WHEN 'true' THEN 1 WHEN 'false' THEN 0 ELSE "
        "CASE WHEN json_type(m.context, '$.episode.outcome') IN ('integer', 'real') "
        "THEN json_extract(m.context, '$.episode.outcome') >= ? END END"
    )
    # A real: sum() of integers fails beyond 64 bits, and abs() of -2**63 fails.
    outcome = ("CASE WHEN json_type(m.context, '$.episode.outcome') IN ('integer', 'real') "
               "THEN CAST(json_extract(m.context, '$.episode.outcome') AS REAL) END")
    inner = (
        f"SELECT json_type(m.context, ?) AS gt, json_extract(m.context, ?) AS gv, {success} AS ok, "
        f"{outcome} AS score FROM memories m WHERE {where}"
    )
    totals = ("count(*), count(ok), coalesce(sum(ok), 0), count(score), total(CASE WHEN abs(score) < ? THEN score END), "
              "total(CASE WHEN abs(score) >= ? THEN score * ? END)")
    q = f"SELECT gt, gv, {totals} FROM ({inner}) GROUP BY gt, gv"
    sums = [BIG_SCORE, BIG_SCORE, BIG_SCORE_SCALE]
    return [tuple(row) for row in conn.execute(q, [*sums, req.group_path, req.group_path, req.success_threshold, *params])]


def _scan_ids(conn: apsw.Connection, req: OutcomeRequest, ids: np.ndarray) -> list[Row]:
    if len(ids) == 0:
        return []
    return _scan(conn, req, "m.id IN (SELECT value FROM json_each(?))", [json.dumps(ids.tolist())])


# -- the index plan ----------------------------------------------------------------------


def _parse_ids(text: str | None) -> np.ndarray:
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)


class _IndexPlan:
    def __init__(self, conn: apsw.Connection, req: OutcomeRequest, columns: LeafColumns | None = None) -> None:
        self.conn, self.req, self.columns = conn, req, columns
        self.size = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM memories")) + 1
        # The leaf index's epochs (robotmem.store.leaves.EPOCHS) of the same newest id: read once per plan.
        self.epochs = epochs_through(self.size - 1)
        self._superseded: tuple[np.ndarray, np.ndarray] | None = None

    # ids and masks

    def ids(self, query: str, params: list[Any]) -> np.ndarray:
        """The ids (column ``id``) ``query`` selects, in one string: far fewer rows to hand to Python."""
        return _parse_ids(scalar(self.conn, f"SELECT group_concat(id) FROM ({query})", params))

    def mask(self, ids: np.ndarray) -> Mask:
        out = np.zeros(self.size, dtype=bool)
        out[ids] = True
        return out

    def leaf_mask(self, leaf_set: LeafSet) -> Mask:
        q, p = leaf_set.query(self.req.collection, self.epochs)
        return self.mask(self.ids(q.replace("SELECT memory_id FROM", "SELECT memory_id AS id FROM"), p))

    def superseded(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, the memory that absorbed each) of the collection's superseded memories."""
        if self._superseded is None:
            row = one_row(self.conn, "SELECT group_concat(id), group_concat(superseded_by) FROM memories "
                          "WHERE collection = ? AND status = 'superseded' AND superseded_by IS NOT NULL",
                          [self.req.collection])
            self._superseded = (_parse_ids(row[0]), _parse_ids(row[1]))
        return self._superseded

    def excluded(self) -> Mask:
        """Forgotten memories, and those absorbed by a forgotten one."""
        forgotten = self.mask(self.ids("SELECT id FROM memories WHERE collection = ? AND status = 'forgotten'",
                                       [self.req.collection]))
        if forgotten.any():
            ids, into = self.superseded()
            forgotten[ids[forgotten[into]]] = True
        return forgotten

    def collection_mask(self) -> Mask:
        return self.mask(self.ids("SELECT id FROM memories WHERE collection = ?", [self.req.collection]))

    # the set

    def filter_mask(self, spec: dict[str, Any]) -> tuple[Mask | None, bool]:
        """(memories of the collection that may match ``spec``, from the leaf index, or None for
        any; whether that is exactly the matches)."""
        out: Mask | None = None
        exact = True
        for key, value in spec.items():
            if key in ("$and", "$or"):
                parts = [self.filter_mask(item) for item in value]
                exact = exact and all(e for _, e in parts)
                known = [m for m, _ in parts if m is not None]
                if key == "$or":
                    # One branch that may match anything leaves the union unbounded.
                    part: Mask | None = np.logical_or.reduce(known) if len(known) == len(parts) else None
                else:
                    part = _all_of(known)
            else:
                sets = exact_clause(key, value)
                exact = exact and sets is not None
                part = None if sets is None else _all_of([self.leaf_mask(s) for s in sets])
            if part is not None:
                out = part if out is None else out & part
        return out, exact

    def text_mask(self) -> Mask:
        hits = self.mask(self.ids("SELECT rowid AS id FROM memories_fts WHERE memories_fts MATCH ?", [self.req.match]))
        ids, into = self.superseded()
        hits[ids[hits[into]]] = True
        return hits

    def narrowed(self) -> tuple[Mask | None, bool, bool]:
        """(mask of the set so far or None for the whole collection, whether the mask holds only
        the collection's ids, whether the filter still has to be checked on the rows)."""
        req, mask, scoped, check = self.req, None, False, False

        def narrow(part: Mask) -> Mask:
            return part if mask is None else mask & part

        if req.filter_spec is not None:
            may_match, exact = self.filter_mask(req.filter_spec)
            check = not exact
            if may_match is not None:
                mask, scoped = narrow(may_match), True
        if req.since is not None or req.until is not None:
            q = ("SELECT id FROM memories WHERE collection = ? AND occurred_at >= coalesce(?, -1e300) "
                 "AND occurred_at <= coalesce(?, 1e300)")
            mask, scoped = narrow(self.mask(self.ids(q, [req.collection, req.since, req.until]))), True
        if req.match is not None:
            mask = narrow(self.text_mask())
        return mask, scoped, check

    def checked(self, ids: np.ndarray) -> np.ndarray:
        """The ids among ``ids`` whose JSON matches the whole filter."""
        f = self.req.filter
        assert f is not None
        q = (f"SELECT m.id AS id FROM json_each(?) AS j CROSS JOIN memories m ON m.id = j.value WHERE {f.sql}")
        return self.ids(q, [json.dumps(ids.tolist()), *f.params])

    def final_set(self) -> tuple[Mask | None, Mask]:
        """(the set as a mask, or None for the whole collection but the excluded; the excluded)."""
        mask, scoped, check = self.narrowed()
        excluded = self.excluded()
        if mask is not None and not scoped:
            mask &= self.collection_mask()
        if mask is not None:
            mask &= ~excluded
        if check:
            f = self.req.filter
            assert f is not None
            if mask is None:
                found = self.ids(f"SELECT m.id AS id FROM memories m WHERE m.collection = ? AND {f.sql}",
                                 [self.req.collection, *f.params])
            else:
                found = self.checked(np.flatnonzero(mask))
            mask = self.mask(found)
            mask &= ~excluded
        return mask, excluded

    # counting

    def rows(self) -> list[Row]:
        mask, excluded = self.final_set()
        return self.count(mask, excluded)

    def rows_of(self, ids: np.ndarray) -> list[Row]:
        return self.count(self.mask(ids), np.zeros(self.size, dtype=bool))

    def count(self, mask: Mask | None, excluded: Mask) -> list[Row]:
        """Group rows of the set: ``mask``, or the whole collection but ``excluded``."""
        group_leaf = leaf_path(self.req.group_by)
        # Counting from cached columns costs next to nothing whatever the set's size.
        if mask is not None and (group_leaf is None or (
                self.columns is None and int(mask.sum()) <= max(SMALL_SET, JSON_SHARE * self.size))):
            return _scan_ids(self.conn, self.req, np.flatnonzero(mask))
        if group_leaf is None:  # the whole collection, by a path the index cannot spell
            where, params = _set_sql(self.req)
            return _scan(self.conn, self.req, where, params)
        if mask is None:
            # The count triggers keep (robotmem.store.counts), not a walk of the collection's index.
            total = collection_size(self.conn, self.req.collection)
            return self.tally(group_leaf, ~excluded, total - int(excluded.sum()), whole=True)
        return self.tally(group_leaf, mask, int(mask.sum()), whole=False)

    def verdicts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per memory id: 1 success, 0 failure, -1 no verdict; and the score (NaN for none)."""
        req = self.req
        ok = np.full(self.size, -1, dtype=np.int8)
        # group_concat straight over the index (no subquery around it: a fifth faster).
        leaf = (f"SELECT group_concat(memory_id) FROM context_leaves WHERE collection = ? AND path = ? AND {EPOCHS} "
                "AND value = ? AND kind = ?")
        epochs = self.epochs
        ok[_parse_ids(scalar(self.conn, leaf, [req.collection, _SUCCESS, epochs, 0, "false"]))] = 0
        ok[_parse_ids(scalar(self.conn, leaf, [req.collection, _SUCCESS, epochs, 1, "true"]))] = 1
        score = np.full(self.size, np.nan)
        # By distinct score of an epoch (an episode's memories share one): numbers never pass through
        # text. Numbers sort before text: the bound keeps each epoch's range on the numeric leaves.
        for value, text in self.conn.execute(
                "SELECT value, group_concat(memory_id) FROM context_leaves "
                f"WHERE collection = ? AND path = ? AND {EPOCHS} AND value < '' AND {_NUMBER} GROUP BY epoch, value",
                [req.collection, _OUTCOME, epochs]):
            ids = _parse_ids(text)
            score[ids] = value
            undecided = ids[ok[ids] == -1]
            ok[undecided] = value >= req.success_threshold
        return ok, score

    def group_ids(self, group_leaf: str) -> list[tuple[str, Any, np.ndarray]]:
        """(kind, value, ids) of every leaf at the group path."""
        req = self.req
        found: dict[tuple[str, Any], list[np.ndarray]] = {}
        # GROUP BY epoch, value walks the index in order, so a value recurs once per epoch and its
        # parts are joined here; a value shared by leaves of several kinds (0 and false, 1 and
        # true, 5 and "5") is split by kind in a second look.
        for epoch, value, low, high, text in self.conn.execute(
                "SELECT epoch, value, min(kind), max(kind), group_concat(memory_id) FROM context_leaves "
                "WHERE collection = ? AND path = ? GROUP BY epoch, value", [req.collection, group_leaf]):
            parts: list[Any] = [(low, text)] if low == high else self.conn.execute(
                "SELECT kind, group_concat(memory_id) FROM context_leaves WHERE collection = ? AND path = ? "
                "AND epoch = ? AND value = ? GROUP BY kind", [req.collection, group_leaf, epoch, value]).fetchall()
            for kind, ids in parts:
                found.setdefault((str(kind), value), []).append(_parse_ids(ids))
        return [(kind, value, np.concatenate(ids)) for (kind, value), ids in found.items()]

    def tally(self, group_leaf: str, in_set: Mask, members: int, *, whole: bool) -> list[Row]:
        """Group rows of the ``members`` memories of ``in_set`` (with ``whole``: every id not
        excluded, of any collection; the leaves only hold this one's)."""
        if self.columns is not None:
            with self.columns.lock():
                found = self.columns.get(self.conn, self.req.collection, [group_leaf, _SUCCESS, _OUTCOME])
                if found is not None:
                    return self.tally_columns(found, in_set, members, whole=whole)
        ok, score = self.verdicts()
        has_field = np.zeros(self.size, dtype=bool)
        rows: list[Row] = []
        complex_ids = [self.child_ids(group_leaf)]
        for kind, value, ids in self.group_ids(group_leaf):
            has_field[ids] = True
            if kind in ("array", "object") or (kind == "text" and not isinstance(value, str)):
                complex_ids.append(ids)  # a numeral text is stored as its number (see exact_clause)
                continue
            chosen = ids[in_set[ids]]
            if len(chosen):
                rows.append((kind, _shown(kind, value), *_counts(chosen, ok, score)))
        for ids in complex_ids:
            has_field[ids] = True
        fielded = int((in_set & has_field).sum())
        unread = np.flatnonzero(in_set & ~has_field) if members > fielded else np.zeros(0, dtype=np.int64)
        return rows + self.read_rest([ids[in_set[ids]] for ids in complex_ids], unread, whole)

    def child_ids(self, group_leaf: str) -> np.ndarray:
        """Memories with leaves below the group path (an object there)."""
        return self.ids("SELECT DISTINCT memory_id AS id FROM context_leaves WHERE collection = ? AND path > ? "
                        "AND path < ?", [self.req.collection, group_leaf + ".", group_leaf + "/"])

    def read_rest(self, to_read: list[np.ndarray], unread: np.ndarray, whole: bool) -> list[Row]:
        """Group rows of ``to_read`` and of ``unread``, the set's memories without a leaf at the path
        (with ``whole``: any id not excluded, of any collection), from their JSON: arrays and
        objects are grouped by their JSON, and an object whose keys all hold brackets has no leaf row."""
        if len(unread):
            to_read.append(unread[self.collection_mask()[unread]] if whole else unread)
        return _scan_ids(self.conn, self.req, np.unique(np.concatenate(to_read)))

    def tally_columns(self, columns: list[LeafColumn], in_set: Mask, members: int, *, whole: bool) -> list[Row]:
        """As tally, from the cached columns (group, success, outcome): fancy indexing and bincount
        over the set's memories."""
        group, success, outcome = columns
        # Only the set's ids are looked up: a neighbourhood costs its size, not the store's.
        members_ids = np.flatnonzero(in_set)
        codes = group.at(members_ids)
        has_field = (codes >= 0) | np.isin(members_ids, self.child_ids(group.path))
        chosen, chosen_codes = members_ids[has_field], codes[has_field]
        simple = ~group.per_atom("complex", _complex, bool)[chosen_codes]  # -1, no leaf (an object): not simple
        ids, kept = chosen[simple], chosen_codes[simple]
        verdict = success.per_atom("verdict", _verdict, np.int8)[success.at(ids)]
        score = outcome.per_atom("score", _score, float)[outcome.at(ids)]
        finite = ~np.isnan(score)
        judged = np.where(verdict >= 0, verdict, np.where(finite, score >= self.req.success_threshold, -1))
        found, slot = np.unique(kept, return_inverse=True)
        small, big = _split_scores(np.where(finite, score, 0.0))
        sums = [np.bincount(slot, weights=w, minlength=len(found)) for w in
                (judged >= 0, judged == 1, finite, small, big)]
        n = np.bincount(slot, minlength=len(found))
        rows: list[Row] = []
        for i, code in enumerate(found.tolist()):
            kind, value = group.atoms[code]
            rows.append((kind, _shown(kind, value), int(n[i]), int(sums[0][i]), int(sums[1][i]), int(sums[2][i]),
                         float(sums[3][i]), float(sums[4][i])))
        unread = members_ids[~has_field] if members > len(chosen) else np.zeros(0, dtype=np.int64)
        return rows + self.read_rest([chosen[~simple]], unread, whole)


def _complex(kind: str | None, value: Any) -> bool:
    """Grouped by its JSON: arrays, objects, and no leaf (-1: an object whose keys hold leaves)."""
    # A numeral text is stored as its number (see exact_clause).
    return kind is None or kind in ("array", "object") or (kind == "text" and not isinstance(value, str))


def _verdict(kind: str | None, value: Any) -> int:
    return 1 if kind == "true" else 0 if kind == "false" else -1


def _score(kind: str | None, value: Any) -> float:
    return float(value) if kind in ("integer", "real") else math.nan


def _shown(kind: str, value: Any) -> Any:
    """The value as the JSON holds it (a real stored whole reads back as an integer)."""
    if kind in ("true", "false", "null"):
        return None  # told by the kind
    return float(value) if kind == "real" else value


def _all_of(masks: list[Mask]) -> Mask | None:
    return np.logical_and.reduce(masks) if masks else None


def _split_scores(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The scores as the two parts a Row sums (outcome_request.BIG_SCORE), each 0 where the other holds it."""
    big = np.abs(scores) >= BIG_SCORE
    return np.where(big, 0.0, scores), np.where(big, scores * BIG_SCORE_SCALE, 0.0)


def _counts(ids: np.ndarray, ok: np.ndarray, score: np.ndarray) -> tuple[int, int, int, int, float, float]:
    verdicts, scores = ok[ids], score[ids]
    finite = ~np.isnan(scores)
    small, big = _split_scores(scores[finite])
    return (len(ids), int((verdicts >= 0).sum()), int((verdicts == 1).sum()), int(finite.sum()),
            float(small.sum()), float(big.sum()))
