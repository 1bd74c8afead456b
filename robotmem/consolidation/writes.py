"""The state changes of consolidation, each one set-based SQL inside the caller's write transaction.

Plans are passed to SQLite as one JSON array per statement (``UPDATE ... FROM
json_each(?)``), so merging 500 facts is three statements, not 500 round trips.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import apsw

from ..context import canonical_json, load_stored_json
from ..store.backend import dialect_of
from ..store.decay import effective_confidence, effective_confidence_sql
from .plan import Absorption
from .pool import FactRow

__all__ = ["MergeCounts", "apply_absorptions", "attach_outcome", "fact_basis", "with_basis"]


def attach_outcome(conn: apsw.Connection, session_id: str, score: float, now: float) -> int:
    """Write ``episode.outcome`` into the context of every memory of the session that has none.

    A context whose ``episode`` key holds something other than an object is left alone (its
    owner chose that key), and so is one that holds ``episode.outcome`` already: the caller's
    own value (of any type, null too), or the score this wrote before, so running this again
    changes nothing. Overwriting a caller's value destroyed it, and ``update`` without a context
    could no longer tell the context the caller gave, so a later ``learn`` of the new text with
    that context was a second live copy. ``update`` with a context keeps the same rule
    (service ``_with_session_outcome``). The content hash is kept: it identifies what the
    caller wrote, so a later ``learn`` of the same text and context is still a duplicate
    (import checks an exported hash against the context without this, import_checks.py).
    """
    if dialect_of(conn) == "postgresql":
        # The score as JSON text ("0.0"), which jsonb keeps as written: a float8 (to_jsonb, or
        # jsonb_build_object of one) is written out as "0" and read back as the integer 0, where
        # SQLite's JSON keeps 0.0.
        outcome = json.dumps(float(score))
        conn.execute(
            "UPDATE memories SET context = jsonb_set(context, '{episode}', coalesce(context -> 'episode', '{}') "
            "|| jsonb_build_object('outcome', ?::jsonb)), updated_at = ? "
            "WHERE session_id = ? AND coalesce(jsonb_typeof(context -> 'episode'), 'object') = 'object' "
            "AND context #> '{episode,outcome}' IS NULL",
            (outcome, now, session_id),
        )
    else:
        conn.execute(
            "UPDATE memories SET context = jsonb_set(context, '$.episode.outcome', ?), updated_at = ? "
            "WHERE session_id = ? AND coalesce(json_type(context, '$.episode'), 'object') = 'object' "
            "AND json_type(context, '$.episode.outcome') IS NULL",
            (score, now, session_id),
        )
    return int(conn.changes())


@dataclass(frozen=True)
class MergeCounts:
    #: facts absorbed by another fact of the same episode
    merged: int
    #: memories of earlier episodes reinforced by this one
    reinforced: int


@dataclass(frozen=True)
class _Current:
    status: str
    protected: bool
    evidence: int
    first_seen: float
    last_seen: float
    absorbed: list[int]
    basis: str
    confidence: float
    reinforced_at: float


def fact_basis(content: str, context: Any) -> str:
    """What a merge plan relies on about one memory: its text as stored and its context without
    ``episode.outcome`` (which ``attach_outcome`` writes between the plan and the merge, and which
    the merge rule does not compare; an ``episode`` left empty counts as none, as attach_outcome
    turns both into ``{"episode": {"outcome": s}}``). ``update`` changing either changes this."""
    if isinstance(context, dict) and isinstance(context.get("episode"), dict):
        episode = {k: v for k, v in context["episode"].items() if k != "outcome"}
        context = {k: v for k, v in context.items() if k != "episode"} | ({"episode": episode} if episode else {})
    return hashlib.sha256(f"{content}\x00{canonical_json(context)}".encode("utf-8", "surrogatepass")).hexdigest()


def with_basis(plan: list[Absorption], rows: Sequence[FactRow]) -> list[Absorption]:
    """``plan`` with the basis of every memory it names, from the rows the plan was made of."""
    by_id = {row.id: row for row in rows}
    return [replace(a, basis=tuple((i, fact_basis(by_id[i].content, by_id[i].context))
                                   for i in (a.target, *a.sources))) for a in plan]


def _current_rows(conn: apsw.Connection, ids: Iterable[int]) -> dict[int, _Current]:
    if dialect_of(conn) == "postgresql":
        # Locked in id order: another writer's change waits for this merge (or this one for it).
        rows = conn.execute(
            "SELECT id, status, protected, evidence_count, first_seen, last_seen, absorbed::text, content, "
            "context::text, confidence, reinforced_at FROM memories WHERE id = ANY(?) ORDER BY id FOR UPDATE",
            (sorted(set(ids)),),
        )
    else:
        rows = conn.execute(
            "SELECT id, status, protected, evidence_count, first_seen, last_seen, absorbed, content, json(context), "
            "confidence, reinforced_at FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(ids))),),
        )
    return {r[0]: _Current(r[1], bool(r[2]), int(r[3]), float(r[4]), float(r[5]), json.loads(r[6]),
                           fact_basis(r[7], load_stored_json(r[8]) if r[8] else {}), float(r[9]), float(r[10]))
            for r in rows}


def _still_valid(plan: list[Absorption], current: dict[int, _Current]) -> list[Absorption]:
    """Drop what another writer changed since the plan was made: forgotten, merged, protected, or
    given another text or context by ``update`` (``fact_basis`` differs from the plan's, or the
    plan has none for it).

    A changed target drops its whole absorption; so does a changed survivor of an episode group
    that an earlier fact absorbs (its members were matched to the target through it). Other
    changed sources are dropped one by one: each was compared with the target itself.
    """
    valid = []
    for absorption in plan:
        planned = dict(absorption.basis)
        unchanged = {i for i in (absorption.target, *absorption.sources)
                     if i in current and planned.get(i) == current[i].basis}
        target = current.get(absorption.target)
        if target is None or target.protected or target.status not in ("active", "archived"):
            continue
        if absorption.target not in unchanged or (absorption.reinforcing and absorption.sources[0] not in unchanged):
            continue
        sources = tuple(s for s in absorption.sources if s in unchanged and current[s].status == "active"
                        and not current[s].protected and s != absorption.target)
        if sources:
            valid.append(Absorption(absorption.target, sources, absorption.reinforcing, absorption.basis))
    return valid


def apply_absorptions(
    conn: apsw.Connection, plan: list[Absorption], now: float, *, step: float, ceiling: float, half_life_s: float
) -> MergeCounts:
    """Supersede the sources, point them (and what they had absorbed) at the target, reinforce the target.

    The target gains the sources' evidence, their ids (each followed by what it had
    absorbed), the widest first/last seen, and confidence
    ``min(ceiling, max(its own decayed to now, the sources' best decayed to now) + step * evidence
    gained)`` (store.decay.reinforced_confidence): a fact confirmed is never less recallable than
    the fresh copy was. Its decay clock restarts at ``now`` but never moves back.
    """
    if not plan:
        return MergeCounts(0, 0)
    current = _current_rows(conn, [i for a in plan for i in (a.target, *a.sources)])
    plan = _still_valid(plan, current)
    merged = sum(len(a.sources) - (1 if a.reinforcing else 0) for a in plan)
    reinforced = {a.target for a in plan if a.reinforcing}
    by_target: dict[int, list[int]] = {}  # two groups of an episode may repeat the same earlier fact
    for absorption in plan:
        by_target.setdefault(absorption.target, []).extend(absorption.sources)
    pairs: list[list[int]] = []
    targets: list[list[Any]] = []
    for target, sources in by_target.items():
        absorbed = list(current[target].absorbed)
        for source in sources:
            absorbed += [source, *current[source].absorbed]
            pairs += [[moved, target] for moved in (source, *current[source].absorbed)]
        rows = [current[s] for s in sources]
        fresh = max(effective_confidence(r.confidence, r.reinforced_at, False, now, half_life_s) for r in rows)
        targets.append([target, sum(r.evidence for r in rows), min(r.first_seen for r in rows),
                        max(r.last_seen for r in rows), json.dumps(absorbed), fresh])
    _supersede(conn, pairs, now)
    _reinforce_targets(conn, targets, now, step=step, ceiling=ceiling, half_life_s=half_life_s)
    return MergeCounts(merged=merged, reinforced=len(reinforced))


def _supersede(conn: apsw.Connection, pairs: list[list[int]], now: float) -> None:
    """``pairs`` of [memory id, live target]: sources become superseded, earlier-absorbed ones are re-pointed."""
    conn.execute(
        "UPDATE memories SET status = 'superseded', superseded_by = j.target, updated_at = ? "
        f"FROM (SELECT {_field(conn, 0, 'bigint')} AS id, {_field(conn, 1, 'bigint')} AS target "
        f"FROM {_elements(conn)}) AS j "
        "WHERE memories.id = j.id AND memories.status IN ('active', 'superseded')",
        (now, json.dumps(pairs)),
    )


def _elements(conn: Any) -> str:
    """The rows of the JSON array parameter, each as ``value``."""
    return "jsonb_array_elements(?::jsonb) AS value" if dialect_of(conn) == "postgresql" else "json_each(?)"


def _field(conn: Any, index: int, sql_type: str) -> str:
    if dialect_of(conn) == "postgresql":
        return f"(value ->> {index})::{sql_type}"
    return f"value ->> {index}"


def _reinforce_targets(
    conn: apsw.Connection, rows: list[list[Any]], now: float, *, step: float, ceiling: float, half_life_s: float
) -> None:
    pg = dialect_of(conn) == "postgresql"
    decayed, decay_params = effective_confidence_sql(now, half_life_s, table="memories",
                                                     dialect="postgresql" if pg else "sqlite")
    least, greatest = ("least", "greatest") if pg else ("min", "max")
    conn.execute(
        "UPDATE memories SET "
        f"confidence = {least}(?, {greatest}({decayed}, j.fresh) + ? * j.ev), "
        f"reinforced_at = {greatest}(memories.reinforced_at, ?), evidence_count = memories.evidence_count + j.ev, "
        f"first_seen = {least}(memories.first_seen, j.fs), last_seen = {greatest}(memories.last_seen, j.ls), "
        "absorbed = j.absorbed, status = 'active', updated_at = ? "
        f"FROM (SELECT {_field(conn, 0, 'bigint')} AS id, {_field(conn, 1, 'integer')} AS ev, "
        f"{_field(conn, 2, 'float8')} AS fs, {_field(conn, 3, 'float8')} AS ls, "
        f"{_field(conn, 4, 'jsonb')} AS absorbed, {_field(conn, 5, 'float8')} AS fresh FROM {_elements(conn)}) AS j "
        "WHERE memories.id = j.id",
        (ceiling, *decay_params, step, now, now, json.dumps(rows)),
    )
