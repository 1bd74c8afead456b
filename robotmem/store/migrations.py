"""Numbered, append-only schema migrations tracked in ``PRAGMA user_version``.

Never change what a shipped migration does: append a new one. How it runs may change (migrations
5, 8 and 19 now run in pages, robotmem.store.paging), never the store it leaves. Full-text search is kept
in sync with ``memories`` by triggers, so every write path (including raw SQL
repairs) updates the index.
"""

from __future__ import annotations

import json
from typing import Any, Final

import apsw

from ..context import load_stored_json
from .connection import scalar
from .rehash import refreshed_hashes
from .change_log import FLOOR_SCHEMA
from .counts import COUNTS_SCHEMA, PAYLOAD_COUNTS_SCHEMA
from .deferred import DEFER_FULL_TEXT, DEFER_INSERT_COUNTS_AND_LOG, UNMARKED_INSERT_TRIGGERS
from . import paging
from .paging import Paged, Progress, Step, run_next_step
from .leaves import DEFER_LEAVES, EPOCH_LEAVES, LEAVES_SCHEMA
from .points import move_exact_columns_out, reindex_all_points, reindex_changed_points, split_points_by_epoch
from .tokens import FTS_TOKENIZE, index_tokens, memory_search_text

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "migrate_step"]

_V1 = f"""
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    collection    TEXT NOT NULL,
    context       BLOB NOT NULL,            -- JSONB
    started_at    REAL NOT NULL,
    ended_at      REAL,
    outcome_score REAL,
    summary       TEXT                      -- JSON summary returned by end_session
);
CREATE INDEX sessions_by_collection ON sessions(collection, ended_at);

CREATE TABLE memories (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    collection      TEXT NOT NULL,
    session_id      TEXT REFERENCES sessions(id),
    type            TEXT NOT NULL CHECK (type IN ('fact', 'perception')),
    perception_type TEXT,
    content         TEXT NOT NULL,
    search_text     TEXT NOT NULL,          -- tokens for FTS (robotmem.store.tokens)
    context         BLOB NOT NULL,          -- JSONB
    content_hash    TEXT NOT NULL,
    protected       INTEGER NOT NULL DEFAULT 0,   -- constraints/safety notes: never merged or decayed
    confidence      REAL NOT NULL,          -- confidence at reinforced_at (decay is applied on read)
    reinforced_at   REAL NOT NULL,
    evidence_count  INTEGER NOT NULL DEFAULT 1,
    first_seen      REAL NOT NULL,
    last_seen       REAL NOT NULL,
    created_at      REAL NOT NULL,
    occurred_at     REAL NOT NULL,          -- when it happened (recordings: the recorded time)
    updated_at      REAL NOT NULL,
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'forgotten', 'superseded', 'archived')),
    superseded_by   INTEGER REFERENCES memories(id),
    absorbed        TEXT NOT NULL DEFAULT '[]',   -- JSON list of ids merged into this one
    forgotten_at    REAL,
    forget_reason   TEXT,
    access_count    INTEGER NOT NULL DEFAULT 0,
    last_accessed   REAL
);
CREATE INDEX memories_by_collection ON memories(collection, status, created_at);
CREATE INDEX memories_by_session ON memories(session_id);
CREATE INDEX memories_by_time ON memories(collection, occurred_at);
CREATE INDEX memories_by_hash ON memories(collection, content_hash);

CREATE TABLE payloads (
    memory_id INTEGER PRIMARY KEY REFERENCES memories(id),
    data      BLOB NOT NULL,                -- msgpack (robotmem.payload)
    summary   TEXT NOT NULL                 -- JSON summary shown by recall
);

CREATE TABLE embeddings (
    memory_id  INTEGER PRIMARY KEY REFERENCES memories(id),
    collection TEXT NOT NULL,
    model_id   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    vector     BLOB NOT NULL                -- float32, L2-normalised (sqlite-vec f32 layout)
);
CREATE INDEX embeddings_by_model ON embeddings(collection, model_id);

-- What changed, for in-process vector indexes to catch up incrementally.
CREATE TABLE change_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id  INTEGER NOT NULL,
    collection TEXT NOT NULL
);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    search_text, content='memories', content_rowid='id', tokenize="{FTS_TOKENIZE}"
);

-- Only active and archived memories are searchable; forgotten and superseded leave the index.
CREATE TRIGGER memories_ai AFTER INSERT ON memories WHEN new.status IN ('active', 'archived') BEGIN
    INSERT INTO memories_fts(rowid, search_text) VALUES (new.id, new.search_text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories WHEN old.status IN ('active', 'archived') BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text);
END;
-- One trigger, two statements in order: SQLite gives no firing order between triggers.
CREATE TRIGGER memories_au_fts AFTER UPDATE OF search_text, status ON memories
    WHEN old.search_text IS NOT new.search_text OR old.status IS NOT new.status BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text)
        SELECT 'delete', old.id, old.search_text WHERE old.status IN ('active', 'archived');
    INSERT INTO memories_fts(rowid, search_text)
        SELECT new.id, new.search_text WHERE new.status IN ('active', 'archived');
END;

CREATE TRIGGER memories_au_log AFTER UPDATE OF status, confidence, reinforced_at, protected ON memories BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.id, new.collection);
END;
CREATE TRIGGER embeddings_ai_log AFTER INSERT ON embeddings BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.memory_id, new.collection);
END;
CREATE TRIGGER embeddings_au_log AFTER UPDATE ON embeddings BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.memory_id, new.collection);
END;
CREATE TRIGGER embeddings_ad_log AFTER DELETE ON embeddings BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (old.memory_id, old.collection);
END;
"""

# Document frequencies per term, so recall can leave out words that occur nearly everywhere.
_V2 = """
CREATE VIRTUAL TABLE memories_fts_vocab USING fts5vocab(memories_fts, 'row');
"""

# Points of every context in an R*Tree, for nearest-first recall (robotmem.store.points).
_V3 = """
CREATE VIRTUAL TABLE spatial_points USING rtree(
    id, minx, maxx, miny, maxy, minz, maxz,
    +memory_id INTEGER, +field TEXT, +px REAL, +py REAL, +pz REAL
);
"""


def _v3(conn: apsw.Connection) -> None:
    conn.execute(_V3)
    reindex_all_points(conn)


# Consolidation reads the facts of a collection; moving between active and archived
# (both searchable) no longer rewrites the full-text entry.
_V4 = """
CREATE INDEX memories_by_type ON memories(collection, type, status);
DROP TRIGGER memories_au_fts;
CREATE TRIGGER memories_au_fts AFTER UPDATE OF search_text, status ON memories
    WHEN old.search_text IS NOT new.search_text
      OR (old.status IN ('active', 'archived')) IS NOT (new.status IN ('active', 'archived')) BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text)
        SELECT 'delete', old.id, old.search_text WHERE old.status IN ('active', 'archived');
    INSERT INTO memories_fts(rowid, search_text)
        SELECT new.id, new.search_text WHERE new.status IN ('active', 'archived');
END;
"""


def _page_of_rows(conn: apsw.Connection, columns: str, after: int) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        f"SELECT id, {columns} FROM memories WHERE id > ? ORDER BY id LIMIT ?", (after, paging.PAGE_ROWS))]


def _v5(conn: apsw.Connection, after: int) -> int | None:
    """Records may opt out of embedding (``embed``), and plain decimals stay one token."""
    if not any(row[1] == "embed" for row in conn.execute("PRAGMA table_info(memories)")):
        conn.execute("ALTER TABLE memories ADD COLUMN embed INTEGER NOT NULL DEFAULT 1")
    rows = _page_of_rows(conn, "content, search_text", after)
    conn.executemany("UPDATE memories SET search_text = ? WHERE id = ?",
                     [(new, memory_id) for memory_id, content, old in rows
                      if (new := index_tokens(str(content))) != old])
    return int(rows[-1][0]) if rows else None


# The inverted index of context leaves for filters (robotmem.store.leaves), filled for existing rows.
_V6 = LEAVES_SCHEMA

# Counts by (collection, type, status) and (collection, model) kept by triggers, for stats.
_V7 = COUNTS_SCHEMA



def _v8(conn: apsw.Connection, after: int) -> int | None:
    """Identifiers that live only in a memory's context (part numbers, versions) join its full-text entry."""
    rows = _page_of_rows(conn, "content, json(context), search_text", after)
    changed = []
    for memory_id, content, context, old in rows:
        new = memory_search_text(str(content), json.loads(str(context)) if context else None)
        if new != old:
            changed.append((new, memory_id))
    conn.executemany("UPDATE memories SET search_text = ? WHERE id = ?", changed)
    return int(rows[-1][0]) if rows else None


# Bulk inserts index a batch's leaves in one statement (robotmem.store.deferred).
_V9 = DEFER_LEAVES

# ... and its full-text entries too.
_V10 = DEFER_FULL_TEXT

# change_log also names memories whose context or collection changed (end_session writes
# episode.outcome into contexts), deleted ones and ones inserted below the newest id (an import
# keeping ids): in-process copies of context leaves (robotmem.search.leaf_columns) catch up by it
# and by ids above the newest they saw. An ordinary insert is not logged: it costs bulk writes a row.
_V11 = """
DROP TRIGGER IF EXISTS memories_au_context_log;
CREATE TRIGGER memories_au_context_log AFTER UPDATE OF context, collection ON memories
    WHEN old.context IS NOT new.context OR old.collection IS NOT new.collection BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.id, new.collection);
    INSERT INTO change_log(memory_id, collection)
        SELECT old.id, old.collection WHERE old.collection IS NOT new.collection;
END;
DROP TRIGGER IF EXISTS memories_ad_log;
CREATE TRIGGER memories_ad_log AFTER DELETE ON memories BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (old.id, old.collection);
END;
DROP TRIGGER IF EXISTS memories_ai_log;
CREATE TRIGGER memories_ai_log AFTER INSERT ON memories WHEN new.id < (SELECT max(id) FROM memories) BEGIN
    INSERT INTO change_log(memory_id, collection) VALUES (new.id, new.collection);
END;
"""

# Bulk inserts count a batch's memories and vectors and log its vectors in one statement each
# (robotmem.store.deferred).
_V12 = DEFER_INSERT_COUNTS_AND_LOG

# Only facts are deduplicated (learn), so only facts need their content hash indexed: a hash is
# random, and at 1,000,000 memories a bulk insert of 1,000 perceptions dirtied 1,439 pages of
# this index alone (a fifth of its WAL). PostgreSQL's unique index is on live facts too.
_V13 = """
DROP INDEX IF EXISTS memories_by_hash;
CREATE INDEX IF NOT EXISTS memories_fact_by_hash ON memories(collection, content_hash) WHERE type = 'fact';
"""

# The leaf index's keys lead with the epoch of the memory id (robotmem.store.leaves): a batch of
# new memories dirties a few hundred leaf pages instead of one per random-valued leaf.
_V14 = EPOCH_LEAVES

# One R*Tree per epoch of memory ids under the view spatial_points (robotmem.store.points): a point
# goes into a small tree instead of one of every memory.
_v15 = split_points_by_epoch

# Each point's memory, field and exact coordinates in a plain table beside its tree instead of the
# tree's auxiliary columns (robotmem.store.points): a bulk insert appends them.
_v16 = move_exact_columns_out

# The insert triggers without their look for the bulk writer's old marker row (robotmem.store.deferred).
_V17 = UNMARKED_INSERT_TRIGGERS

# Payloads counted and summed per collection by triggers, for stats (robotmem.store.counts).
_V18 = PAYLOAD_COUNTS_SCHEMA

# Every memory has an identity that survives export, import and migrate (robotmem.transfer): import
# recognises a record it holds by its uid, where content and times could not tell five identical
# sensor samples apart, nor an updated memory from its older text. Existing rows get a provisional
# one: 12 zero digits where new_uid writes the time, then 80 random bits. Import recognises it as a
# uid robotmem invented, and gives the row the uid of the record it turns out to be by the old rule
# (rows.PROVISIONAL_PREFIX). ``import_links`` holds, until their targets are stored, the links
# (superseded_by, absorbed) of imported memories as the targets' uids: an import writes in
# batches, and one stopped between them finishes its links when run again.
# Safe to run again (tests rewind user_version).
def _v19(conn: apsw.Connection, after: int) -> int | None:
    if not any(row[1] == "uid" for row in conn.execute("PRAGMA table_info(memories)")):
        conn.execute("ALTER TABLE memories ADD COLUMN uid TEXT")
    last = scalar(conn, "SELECT max(id) FROM (SELECT id FROM memories WHERE id > ? ORDER BY id LIMIT ?)",
                  (after, paging.PAGE_ROWS))
    if last is not None:
        conn.execute("UPDATE memories SET uid = '000000000000' || lower(hex(randomblob(10))) "
                     "WHERE id > ? AND id <= ? AND uid IS NULL", (after, last))
        return int(last)
    conn.execute(_V19)
    return None


_V19 = """
UPDATE memories SET uid = '000000000000' || lower(hex(randomblob(10))) WHERE uid IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS memories_by_uid ON memories(uid);
CREATE TABLE IF NOT EXISTS import_links (
    memory_id     INTEGER PRIMARY KEY,
    superseded_by TEXT,                     -- uid of the target, or NULL
    absorbed      TEXT NOT NULL             -- JSON list: uids (strings) and ids kept as they were
);
"""

def _v20(conn: apsw.Connection) -> None:
    """Hashes taken by an earlier rule become today's (context.py ``content_hash``): of texts that
    NFKC folded into another number (``10⁶`` as ``106``), of contexts holding ``-0.0`` (now
    ``0.0``), so a lookup by a text's hash finds that text only and ``-0.0`` is one fact with 0.0."""
    rows = conn.execute("SELECT id, content, json(context), session_id, content_hash FROM memories "
                        f"WHERE {_NOT_ASCII} OR CAST(json(context) AS TEXT) LIKE '%-0.0%'")
    changed = refreshed_hashes((memory_id, content, load_stored_json(context), session_id is not None, digest)
                               for memory_id, content, context, session_id, digest in rows)
    conn.executemany("UPDATE memories SET content_hash = ? WHERE id = ?", changed)


# Only texts that are not ASCII can fold differently: more UTF-8 bytes than characters.
_NOT_ASCII = "length(CAST(content AS BLOB)) <> length(content)"


# The points of memories stored before every point of a context was indexed (not the first 64),
# before a key holding a dot was no step of a point's path and before points inside an {x, y}
# object were found (robotmem.store.points): spatial_sort missed what a filter found, or found what
# a filter reads as another path. Only memories whose index can differ are read.
_v21 = reindex_changed_points

# change_log is pruned behind its readers (robotmem.store.change_log); the highest sequence number
# pruned per collection tells a reader that saw less to load afresh.
_V22 = FLOOR_SCHEMA

# An episode's records in time order (occurred_at, then id), a page at a time from a point in it
# (robotmem.store.outline.session_lines: the web view's timeline, Memory.session_timeline): with an
# index on session_id only, each page read and sorted every id of the episode (about 95 ms at
# 100,000 records). The rowid ends every entry, so (session_id, occurred_at) orders ties by id; it
# serves every lookup by session_id too, so the old index goes. An episode's summary record (the
# last active procedural perception: store.sessions.session_overviews) gets an index of its own,
# so a timeline page's markers do not read every record either, and so do the records that record
# gaps (robotmem.view.paths.GAP_HOLDERS, as robotmem.store.outline.session_outline's ``holding``
# spells them: SQLite uses a partial index only for a query holding the same expression).
# CREATE INDEX statements: an index cannot be built a page at a time (measured in
# docs/reliability.md "Upgrading").
_V23 = """
CREATE INDEX IF NOT EXISTS memories_by_session_time ON memories(session_id, occurred_at);
DROP INDEX IF EXISTS memories_by_session;
CREATE INDEX IF NOT EXISTS memories_summaries ON memories(session_id, occurred_at)
    WHERE type = 'perception' AND perception_type = 'procedural' AND status = 'active';
CREATE INDEX IF NOT EXISTS memories_gap_holders ON memories(session_id, occurred_at)
    WHERE context -> '$.gaps' IS NOT NULL OR context -> '$.episode.gaps' IS NOT NULL
       OR context -> '$.spatial.gaps' IS NOT NULL;
"""

# A purge (robotmem.store.purge) keeps every memory another names as its superseded_by: without
# an index each candidate's look read every memory. Only merged memories have one, so the
# partial index is small.
_V24 = """
CREATE INDEX IF NOT EXISTS memories_supersede_targets ON memories(superseded_by) WHERE superseded_by IS NOT NULL;
"""


#: (version, SQL, a function for steps SQL alone cannot do, or a Paged one). Append only.
MIGRATIONS: Final[tuple[tuple[int, Step], ...]] = (
    (1, _V1), (2, _V2), (3, _v3), (4, _V4), (5, Paged(_v5)), (6, _V6), (7, _V7), (8, Paged(_v8)), (9, _V9),
    (10, _V10), (11, _V11), (12, _V12), (13, _V13), (14, _V14), (15, _v15), (16, _v16), (17, _V17), (18, _V18),
    (19, Paged(_v19)), (20, _v20), (21, _v21), (22, _V22), (23, _V23), (24, _V24))
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]


def migrate_step(conn: apsw.Connection, progress: Progress | None = None) -> Progress:
    """Run the next step, or the next page of a Paged step, inside the caller's write transaction.

    ``progress`` is what the previous call returned: a page continues after its ids only if the
    store is still at its version (another process may have run the step meanwhile)."""
    current = int(scalar(conn, "PRAGMA user_version"))
    if current > SCHEMA_VERSION:
        from ..errors import StorageError

        raise StorageError(
            f"the memory store has schema version {current}, newer than this robotmem "
            f"({SCHEMA_VERSION}); upgrade robotmem"
        )
    if current == SCHEMA_VERSION:
        return Progress(current)
    done = run_next_step(conn, MIGRATIONS, current, progress)
    if done.version != current:
        conn.execute(f"PRAGMA user_version={done.version}")
    return done


def migrate(conn: apsw.Connection, *, to: int = SCHEMA_VERSION) -> int:
    """Bring the schema to version ``to`` inside the caller's one write transaction; returns it. The
    store itself (SqliteStore.migrate) commits each step and page on its own."""
    progress = migrate_step(conn) if int(scalar(conn, "PRAGMA user_version")) < to else Progress(to)
    while progress != Progress(to):
        progress = migrate_step(conn, progress)
    return to
