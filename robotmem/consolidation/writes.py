"""The state changes of consolidation, each one set-based SQL inside the caller's write transaction.

Plans are passed to SQLite as one JSON array per statement (``UPDATE ... FROM
json_each(?)``), so merging 500 facts is three statements, not 500 round trips.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import apsw

from ..store.decay import effective_confidence_sql
from .plan import Absorption

__all__ = ["MergeCounts", "apply_absorptions", "attach_outcome"]


def attach_outcome(conn: apsw.Connection, session_id: str, score: float, now: float) -> int:
    """Write ``episode.outcome`` into the context of every memory of the session.

    A context whose ``episode`` key holds something other than an object is left alone
    (its owner chose that key). Memories that already carry the score are not touched,
    so running this again changes nothing. The content hash is kept: it identifies what
    the caller wrote, so a later ``learn`` of the same text and context is still a duplicate.
    """
    conn.execute(
        "UPDATE memories SET context = jsonb_set(context, '$.episode.outcome', ?), updated_at = ? "
        "WHERE session_id = ? AND coalesce(json_type(context, '$.episode'), 'object') = 'object' "
        "AND json_extract(context, '$.episode.outcome') IS NOT ?",
        (score, now, session_id, score),
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


def _current_rows(conn: apsw.Connection, ids: Iterable[int]) -> dict[int, _Current]:
    rows = conn.execute(
        "SELECT id, status, protected, evidence_count, first_seen, last_seen, absorbed FROM memories "
        "WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    )
    return {r[0]: _Current(r[1], bool(r[2]), int(r[3]), float(r[4]), float(r[5]), json.loads(r[6])) for r in rows}


def _still_valid(plan: list[Absorption], current: dict[int, _Current]) -> list[Absorption]:
    """Drop what another writer changed since the plan was made (forgotten, merged, protected)."""
    valid = []
    for absorption in plan:
        target = current.get(absorption.target)
        if target is None or target.protected or target.status not in ("active", "archived"):
            continue
        sources = tuple(s for s in absorption.sources if s in current and current[s].status == "active"
                        and not current[s].protected and s != absorption.target)
        if sources:
            valid.append(Absorption(absorption.target, sources, absorption.reinforcing))
    return valid


def apply_absorptions(
    conn: apsw.Connection, plan: list[Absorption], now: float, *, step: float, ceiling: float, half_life_s: float
) -> MergeCounts:
    """Supersede the sources, point them (and what they had absorbed) at the target, reinforce the target.

    The target gains the sources' evidence, their ids (each followed by what it had
    absorbed), the widest first/last seen, and confidence: decayed to ``now`` plus
    ``step`` per unit of evidence gained, capped at ``ceiling``; its decay clock restarts.
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
        targets.append([target, sum(r.evidence for r in rows), min(r.first_seen for r in rows),
                        max(r.last_seen for r in rows), json.dumps(absorbed)])
    _supersede(conn, pairs, now)
    _reinforce_targets(conn, targets, now, step=step, ceiling=ceiling, half_life_s=half_life_s)
    return MergeCounts(merged=merged, reinforced=len(reinforced))


def _supersede(conn: apsw.Connection, pairs: list[list[int]], now: float) -> None:
    """``pairs`` of [memory id, live target]: sources become superseded, earlier-absorbed ones are re-pointed."""
    conn.execute(
        "UPDATE memories SET status = 'superseded', superseded_by = j.target, updated_at = ? "
        "FROM (SELECT value ->> 0 AS id, value ->> 1 AS target FROM json_each(?)) AS j "
        "WHERE memories.id = j.id AND memories.status IN ('active', 'superseded')",
        (now, json.dumps(pairs)),
    )


def _reinforce_targets(
    conn: apsw.Connection, rows: list[list[Any]], now: float, *, step: float, ceiling: float, half_life_s: float
) -> None:
    decayed, decay_params = effective_confidence_sql(now, half_life_s, table="memories")
    conn.execute(
        "UPDATE memories SET "
        f"confidence = min(?, {decayed} + ? * j.ev), "
        "reinforced_at = ?, evidence_count = memories.evidence_count + j.ev, "
        "first_seen = min(memories.first_seen, j.fs), last_seen = max(memories.last_seen, j.ls), "
        "absorbed = j.absorbed, status = 'active', updated_at = ? "
        "FROM (SELECT value ->> 0 AS id, value ->> 1 AS ev, value ->> 2 AS fs, value ->> 3 AS ls, "
        "      value ->> 4 AS absorbed FROM json_each(?)) AS j "
        "WHERE memories.id = j.id",
        (ceiling, *decay_params, step, now, now, json.dumps(rows)),
    )
