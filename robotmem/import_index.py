"""What an import knows of every line of its file, on disk: SQLite's private temporary database.

Import checks the whole file before it writes (a uid on two lines, a session neither in the file
nor in the store, an old line that is a newer line's memory) and resolves links, uids and merges
across the file while it writes batch by batch. Held in Python, what each line left for that took
1.4 KB a memory: 1.5 GB to import 1,000,000, more than a robot computer of the Jetson class has
beside its own stack (docs/reliability.md, "Memory on small boards"). Here it takes a page cache
of ``_CACHE_KIB`` whatever the file's size.

``apsw.Connection("")`` is SQLite's private temporary database: its file is created in SQLite's
temporary directory (``SQLITE_TMPDIR``, else ``TMPDIR``, else ``/var/tmp``) only once the cache
spills, and unlinked as soon as it is opened, so neither a failed import nor a killed process
leaves it behind. Nothing here is kept past the import: there is no journal (a failed import
discards the whole index) and one transaction spans the import (no commit per statement).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

import apsw

from .errors import StorageError

__all__ = ["ImportIndex", "key_digest"]

#: The page cache of the index (KiB): what it holds in memory, however long the file.
_CACHE_KIB = 8192

_SCHEMA = """
-- One row per memory line, in file order (seq). file_uid: the uid the line gives (unique in a file
-- that imports); known_uid: the uid the run stores it under (the file's, a newer line's it is paired
-- with, or for a line without one, derived from it); old_line: its uid is none or provisional.
CREATE TABLE memory_lines (
    seq INTEGER PRIMARY KEY, line INTEGER NOT NULL, id INTEGER NOT NULL, file_uid TEXT,
    known_uid TEXT NOT NULL, paired INTEGER NOT NULL DEFAULT 0, old_line INTEGER NOT NULL,
    pair_key BLOB NOT NULL, collection TEXT NOT NULL, type TEXT NOT NULL, created_at REAL NOT NULL,
    created_at_adjusted INTEGER NOT NULL, session_id TEXT);
CREATE UNIQUE INDEX memory_lines_file_uid ON memory_lines (file_uid) WHERE file_uid IS NOT NULL;
CREATE INDEX memory_lines_known_uid ON memory_lines (known_uid);
CREATE INDEX memory_lines_id ON memory_lines (id, seq);
CREATE TABLE session_lines (line INTEGER PRIMARY KEY, id TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX session_lines_id ON session_lines (id);
-- uid -> the memory of the store it is (found by uid, inserted, or the live copy of a fact)
CREATE TABLE ids (uid TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;
-- rows of the store that are a record of this run: the old rule matches each once
CREATE TABLE taken (id INTEGER PRIMARY KEY);
-- keys of the old rule (key_digest) looked up: kind 0, for lines without a uid; kind 1, for lines
-- with one, whose look-up of provisional rows found some and used them all
CREATE TABLE looked_up (kind INTEGER NOT NULL, key BLOB NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID;
-- a uid a waiting link may name -> the uid of that memory now
CREATE TABLE renamed (old TEXT PRIMARY KEY, new TEXT NOT NULL) WITHOUT ROWID;
-- target uid -> memories whose links wait in the store's import_links for it
CREATE TABLE waiting_on (uid TEXT NOT NULL, memory_id INTEGER NOT NULL, PRIMARY KEY (uid, memory_id)) WITHOUT ROWID;
"""

CANDIDATES = 0
PROVISIONAL = 1


def key_digest(key: Iterable[Any]) -> bytes:
    """A fixed-size stand-in for a key of the old rule (it holds the memory's whole text)."""
    text = json.dumps(list(key), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class ImportIndex:
    """The per-line state of one import (see the module's docstring). Use as a context manager."""

    def __init__(self) -> None:
        self._db = apsw.Connection("")
        self.any_renamed = False
        for pragma in (f"cache_size = -{_CACHE_KIB}", "journal_mode = OFF", "synchronous = OFF",
                       "temp_store = FILE"):
            self._run(f"PRAGMA {pragma}")
        self._run(_SCHEMA)
        self._run("BEGIN")

    def _run(self, sql: str, args: Any = None) -> list[Any]:
        """The statement's rows. A failure is the temporary folder's (full, a file-size limit), not the
        store's: told as such, with what to do."""
        try:
            return list(self._db.execute(sql, args))
        except apsw.Error as exc:
            raise self._failed(exc) from exc

    def _one(self, sql: str, args: Any = None) -> Any:
        """The statement's first row, or None."""
        rows = self._run(sql, args)
        return rows[0] if rows else None

    def _failed(self, exc: apsw.Error) -> StorageError:
        try:
            number = self._db.system_errno
        except apsw.Error:
            number = 0
        cause = os.strerror(number) if number else str(exc)
        return StorageError(
            f"import's temporary index could not be written ({cause}); it takes about 250 bytes a memory of the file "
            "in SQLite's temporary folder (SQLITE_TMPDIR, else TMPDIR, else /var/tmp): point SQLITE_TMPDIR at a "
            "folder with room and import again (what was stored is skipped)",
            advice="the import's temporary folder is full or limited; see the log")

    def __enter__(self) -> ImportIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    # --- the first pass

    def add_memory(self, line: int, r: dict[str, Any], known_uid: str, old_line: bool, pair_key: bytes) -> int | None:
        """Record a memory line; the line of another memory line with its uid, if one came first."""
        adjusted = any(name == "created_at" for name, _ in r["times_adjusted"])
        try:
            self._db.execute(
                "INSERT INTO memory_lines (line, id, file_uid, known_uid, old_line, pair_key, collection, type, created_at, "
                "created_at_adjusted, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (line, r["id"], r["uid"], known_uid, old_line, pair_key, r["collection"], r["type"], r["created_at"],
                 adjusted, r["session_id"]))
        except apsw.ConstraintError:
            first = self._one("SELECT line FROM memory_lines WHERE file_uid = ?", (r["uid"],))
            assert first is not None  # the unique index refused the line for it
            return int(first[0])
        except apsw.Error as exc:
            raise self._failed(exc) from exc
        return None

    def add_session(self, line: int, session_id: str, text: str) -> None:
        self._run("INSERT INTO session_lines (line, id, text) VALUES (?, ?, ?)", (line, session_id, text))

    def session_lines(self) -> Iterator[tuple[int, str]]:
        """(line, text) of each session line, in file order."""
        last = 0
        while rows := self._run("SELECT line, text FROM session_lines WHERE line > ? ORDER BY line LIMIT 500",
                                (last,)):
            yield from ((int(n), str(t)) for n, t in rows)
            last = int(rows[-1][0])

    def with_uid(self, after: int, limit: int) -> list[tuple[int, int, str, str, str, float, bool]]:
        """(seq, line, file uid, collection, type, created_at, created_at adjusted) of memory lines that give
        a uid, after ``seq``, in file order."""
        return [(int(s), int(n), str(u), str(c), str(k), float(t), bool(a)) for s, n, u, c, k, t, a in self._run(
            "SELECT seq, line, file_uid, collection, type, created_at, created_at_adjusted FROM memory_lines "
            "WHERE seq > ? AND file_uid IS NOT NULL ORDER BY seq LIMIT ?", (after, limit))]

    def sessions_not_in_file(self) -> Iterator[tuple[str, int]]:
        """(session id, first line naming it) of the sessions memory lines name and no session line
        has, by first line."""
        for sid, line in self._run(
                "SELECT session_id, min(line) AS first FROM memory_lines WHERE session_id IS NOT NULL AND NOT EXISTS "
                "(SELECT 1 FROM session_lines WHERE session_lines.id = memory_lines.session_id) GROUP BY session_id ORDER BY first"):
            yield str(sid), int(line)

    def pair_old_lines(self) -> None:
        """transfer._pair_key: the n-th old line of a key takes the uid of the n-th newer line of it."""
        self._run(
            "UPDATE memory_lines SET known_uid = newer.known_uid, paired = 1 FROM "
            "(SELECT seq, pair_key, row_number() OVER (PARTITION BY pair_key ORDER BY seq) AS n FROM memory_lines "
            " WHERE old_line) AS old JOIN "
            "(SELECT known_uid, pair_key, row_number() OVER (PARTITION BY pair_key ORDER BY seq) AS n FROM memory_lines "
            " WHERE NOT old_line) AS newer ON newer.pair_key = old.pair_key AND newer.n = old.n "
            "WHERE memory_lines.seq = old.seq")

    # --- the second pass

    def batch(self, after: int, limit: int) -> list[tuple[int, int, int, str, str | None, bool, bytes]]:
        """(seq, line, id, known uid, file uid, paired, pair key) of the memory lines after ``seq``."""
        return [(int(s), int(n), int(i), str(k), None if u is None else str(u), bool(p), bytes(key))
                for s, n, i, k, u, p, key in self._run(
                    "SELECT seq, line, id, known_uid, file_uid, paired, pair_key FROM memory_lines WHERE seq > ? "
                    "ORDER BY seq LIMIT ?", (after, limit))]

    def uid_of(self, file_id: int) -> str | None:
        """The uid the run stores the memory of this source id under (the last line with that id)."""
        row = self._one("SELECT known_uid FROM memory_lines WHERE id = ? ORDER BY seq DESC LIMIT 1",
                               (file_id,))
        return None if row is None else str(row[0])

    def has_uid(self, uid: str) -> bool:
        """Whether a line of the file is stored under ``uid`` (its own, paired or derived)."""
        return self._one("SELECT 1 FROM memory_lines WHERE known_uid = ?", (uid,)) is not None

    def gives_uid(self, uid: str) -> bool:
        """Whether a line of the file gives ``uid`` (its own or a newer line's it is paired with)."""
        return self._one("SELECT 1 FROM memory_lines WHERE known_uid = ? AND (file_uid IS NOT NULL OR paired)",
                                (uid,)) is not None

    def ids_of(self, uids: Iterable[str]) -> dict[str, int]:
        """The memories of the store the run found or stored for these uids."""
        out = {}
        for uid in uids:
            row = self._one("SELECT id FROM ids WHERE uid = ?", (uid,))
            if row is not None:
                out[uid] = int(row[0])
        return out

    def set_ids(self, ids: dict[str, int]) -> None:
        for uid, memory_id in ids.items():
            self._run("INSERT OR REPLACE INTO ids (uid, id) VALUES (?, ?)", (uid, memory_id))

    def take(self, row_id: int) -> bool:
        """Mark a row of the store a record of this run; False if it already was."""
        return self._one("INSERT OR IGNORE INTO taken (id) VALUES (?) RETURNING id", (row_id,)) is not None

    def looked_up(self, kind: int, key: bytes) -> bool:
        return self._one("SELECT 1 FROM looked_up WHERE kind = ? AND key = ?", (kind, key)) is not None

    def mark_looked_up(self, kind: int, key: bytes) -> None:
        self._run("INSERT OR IGNORE INTO looked_up (kind, key) VALUES (?, ?)", (kind, key))

    def rename(self, old: str, new: str) -> None:
        self._run("INSERT OR REPLACE INTO renamed (old, new) VALUES (?, ?)", (old, new))
        self.any_renamed = True

    def renamed(self, uid: str) -> str:
        """The uid a memory a waiting link names as ``uid`` has now."""
        row = self._one("SELECT new FROM renamed WHERE old = ?", (uid,))
        return uid if row is None else str(row[0])

    def wait_on(self, uid: str, memory_id: int) -> None:
        self._run("INSERT OR IGNORE INTO waiting_on (uid, memory_id) VALUES (?, ?)", (uid, memory_id))

    def woken_by(self, uid: str) -> list[int]:
        """The memories whose links waited for ``uid``, no longer noted as waiting."""
        return [int(m) for m, in self._run("DELETE FROM waiting_on WHERE uid = ? RETURNING memory_id", (uid,))]

    def forget_waiting(self) -> None:
        self._run("DELETE FROM waiting_on")
