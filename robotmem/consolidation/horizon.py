"""Two end_sessions of the same robot/task at once must end as if one had run after the other.

end_session plans outside the write lock, so each of two episodes ending together would see the
other as still open and merge nothing into it (two live copies of every fact they share, where
either serial order leaves one). The plan therefore records its *horizon* (the sessions still
open when it was read and the newest memory id it could see), and the write transaction, after
taking a lock per (collection, robot.id, task.name) of the episode's facts, asks whether a fact
that could absorb the episode's has appeared beyond that horizon: a session open at planning
time has ended since, or a fact was written since. Only then is the plan made again, under the
lock, against what the other writer committed (docs/consolidation.md, *Concurrency*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..store.backend import dialect_of
from .reads import _EARLIER

__all__ = ["Horizon", "changed_since", "lock_identities", "read_horizon"]

#: First key of the PostgreSQL advisory locks taken here ("rmcs"); the second is the identity's hash.
_LOCK_CLASS = 0x726D6373


@dataclass(frozen=True)
class Horizon:
    #: other sessions of the collection that had not ended when the plan was read
    open_sessions: tuple[str, ...]
    #: the highest memory id the plan could see: ids are handed out in increasing order, so a fact
    #: written after the plan's snapshot has a higher one
    last_id: int


def read_horizon(conn: Any, collection: str, session_id: str) -> Horizon:
    """In the plan's read transaction: what that plan could not know about."""
    open_sessions = tuple(r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE collection = ? AND ended_at IS NULL AND id <> ?", (collection, session_id)))
    row = conn.execute("SELECT max(id) FROM memories").fetchone()
    return Horizon(open_sessions, int(row[0]) if row is not None and row[0] is not None else 0)


def lock_identities(conn: Any, collection: str, session_id: str) -> None:
    """Inside the write: wait for any other end_session of a robot/task this episode's facts have.

    SQLite needs nothing (``BEGIN IMMEDIATE`` already makes writers take turns). PostgreSQL writers
    run side by side, so without it each could check before the other committed; the locks are
    per identity, not per store, so robots of other tasks do not wait. Taken in sorted order (two
    episodes sharing two identities take them alike); a hash collision only makes two identities
    wait for each other, and a deadlock between them is one run_write re-runs.
    """
    if dialect_of(conn) != "postgresql":
        return
    sql = _EARLIER["postgresql"]  # the identity the earlier-facts rule and changed_since compare
    keys = sorted({f"{collection}\n{r[0]}\n{r[1]}" for r in conn.execute(
        f"SELECT DISTINCT coalesce(({sql['robot'].format(t='m')})::text, ''), "
        f"coalesce(({sql['task'].format(t='m')})::text, '') FROM memories m "
        "WHERE m.session_id = ? AND m.type = 'fact' AND m.status = 'active' AND NOT m.protected",
        (session_id,))})
    for key in keys:
        conn.execute("SELECT pg_advisory_xact_lock(?::int4, hashtext(?))", (_LOCK_CLASS, key))


def changed_since(conn: Any, horizon: Horizon, collection: str, session_id: str) -> bool:
    """Whether a fact that the plan's earlier-facts rule would now take, sharing robot.id,
    task.name and task.success with one of the episode's facts, lies beyond ``horizon``: in a
    session that was open then and has ended, or written since (sessionless, or in a session
    that has ended since). One look-up of the horizon's sessions that have ended since, the
    memories of those alone (sessions a killed process left open for months are not read: with
    100 of them of 1,000 records each, reading them cost 47 ms at every end_session), and one id
    range, whatever the store's size: those rows drive the query (``CROSS JOIN`` fixes SQLite's
    join order, which otherwise scans every fact of the collection and re-derives the keys for
    each)."""
    pg = dialect_of(conn) == "postgresql"
    sql = _EARLIER["postgresql" if pg else "sqlite"]
    sessions_in = "SELECT unnest(?::text[])" if pg else "SELECT value FROM json_each(?)"
    row = conn.execute(
        f"""
        WITH keys(robot, task, success) AS MATERIALIZED (
            SELECT DISTINCT {sql["robot"].format(t="x")}, {sql["task"].format(t="x")}, {sql["success"].format(t="x")}
            FROM memories x WHERE x.session_id = ? AND x.type = 'fact' AND x.status = 'active' AND NOT x.protected
        ),
        ended(id) AS MATERIALIZED (
            SELECT id FROM sessions WHERE id IN ({sessions_in}) AND ended_at IS NOT NULL
        ),
        beyond(id) AS MATERIALIZED (
            SELECT id FROM memories WHERE id > ?
            UNION SELECT x.id FROM ended e CROSS JOIN memories x WHERE x.session_id = e.id
        )
        SELECT 1 FROM beyond b CROSS JOIN memories m LEFT JOIN sessions s ON s.id = m.session_id
        WHERE m.id = b.id AND m.collection = ? AND m.type = 'fact' AND m.status IN ('active', 'archived')
          AND NOT m.protected AND (m.session_id IS NULL OR (s.ended_at IS NOT NULL AND m.session_id <> ?))
          AND EXISTS (
            SELECT 1 FROM keys k WHERE ({sql["robot"].format(t="m")}) {sql["same"]} k.robot
              AND ({sql["task"].format(t="m")}) {sql["same"]} k.task
              AND ({sql["success"].format(t="m")}) {sql["same"]} k.success
          )
        LIMIT 1
        """,
        (session_id, list(horizon.open_sessions) if pg else json.dumps(horizon.open_sessions), horizon.last_id,
         collection, session_id),
    ).fetchone()
    return row is not None
