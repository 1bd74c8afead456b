"""Export and import as JSON Lines, and re-embedding a store.

A header line (``"kind": "header"``, ``"format": "robotmem-export/2"``), one line per session
(``"kind": "session"``) then one per memory (``"kind": "memory"``) with everything a memory has:
status, provenance, payload (msgpack, base64) and vector (float32, base64, with its model id),
and last an end record (``"kind": "end"``) with the numbers of sessions and memories written: import
refuses a file without it or with other numbers (cut short), unless told to take what is there.
A ``robotmem-export/1`` file (written before the end record) imports without that check.
Each memory carries its ``uid``, its identity across stores. Import keeps session ids, assigns
new memory ids (remapping ``superseded_by`` and ``absorbed``; a link to a memory not in the file
is dropped) and skips the records the store holds (by uid), so importing the same file twice,
or into the store it came from, adds nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from .errors import ValidationError
from .import_checks import ImportLimits, check_memory, check_session
from .import_index import CANDIDATES, PROVISIONAL, ImportIndex, key_digest
from .search.embedding_state import EmbeddingState
from .store.backend import Store, dialect_of
from .store.rows import MEMORY_COLUMNS, OLD_RULE_COLUMNS, PROVISIONAL_PREFIX, is_provisional
from .whole_file import opened_text, written_whole

__all__ = ["export_jsonl", "import_jsonl", "reindex"]

log = logging.getLogger(__name__)

#: /2: the file ends with the end record; /1 (earlier versions) has none, and still imports.
_FORMAT = "robotmem-export/2"
_FORMAT_WITHOUT_END = "robotmem-export/1"
_FORMATS = (_FORMAT, _FORMAT_WITHOUT_END)
_DEFAULTS = {"embed": 1, "uid": None}
_REQUIRED_SESSION = ("id", "collection", "context", "started_at", "ended_at", "outcome_score", "summary")
_REQUIRED_MEMORY = tuple(c for c in MEMORY_COLUMNS if c not in _DEFAULTS)


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def export_jsonl(db: Store, conn: Any, target: Path | IO[str], *, batch: int = 1000) -> dict[str, int]:
    """Write the store to ``target``: a path, or an open text stream (``robotmem export -``).

    A path replaces the file only once the export is written whole (whole_file.written_whole: an
    export stopped half-way leaves the previous backup as it was). Either way the last line is the
    end record (``"kind": "end"``, with the counts written), so import refuses a file cut short."""
    if not isinstance(target, Path):
        return _write_export(db, conn, target, batch)
    with written_whole(target) as out:
        return _write_export(db, conn, out, batch)


def _write_export(db: Store, conn: Any, out: IO[str], batch: int) -> dict[str, int]:
    counts = {"sessions": 0, "memories": 0}
    out.write(json.dumps({"kind": "header", "format": _FORMAT}) + "\n")
    for session in db.all_sessions(conn):
        out.write(json.dumps({"kind": "session", **session}, ensure_ascii=False) + "\n")
        counts["sessions"] += 1
    last = 0
    while rows := db.iter_rows(conn, last, batch):
        for record in rows:
            embedding = record.pop("embedding")
            record.update(kind="memory", payload=_b64(record["payload"]),
                          embedding=None if embedding is None else {"model_id": embedding[0],
                                                                    "vector": _b64(embedding[1])})
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            counts["memories"] += 1
        last = rows[-1]["id"]
    out.write(json.dumps({"kind": "end", **counts}) + "\n")
    out.flush()
    return counts


_MAX_REPORTED = 5


def _source_name(source: Path | IO[str]) -> str:
    return str(source) if isinstance(source, Path) else "standard input"


@dataclass
class _Part:
    """One export in the file (from a header line on): what its end record must count."""

    header_line: int
    format: str
    sessions: int = 0
    memories: int = 0
    #: the line of its end record, once read
    end_line: int | None = None


@contextmanager
def _readable_twice(source: Path | IO[str]) -> Iterator[IO[str]]:
    """The file, or a copy of the stream in a temporary file (standard input cannot be read twice).

    surrogateescape: bytes that are not UTF-8 are read (as lone surrogates) instead of raising in
    the middle of the loop, so _utf8 reports their line like any other bad line. The copy keeps
    every character as it came (surrogatepass both ways). A stream the caller gave is read, not closed."""
    if isinstance(source, Path):
        with opened_text(source, "r", errors="surrogateescape") as src:
            yield src
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogatepass") as copy:
        shutil.copyfileobj(source, copy)
        copy.seek(0)
        yield copy


@dataclass
class _Problems:
    """Bad lines in file order: the first _MAX_REPORTED are shown, the others only counted (a file of
    a million bad lines is refused without holding a million messages)."""

    shown: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, problem: str) -> None:
        self.count += 1
        if len(self.shown) < _MAX_REPORTED:
            self.shown.append(problem)

    def refuse(self, name: str) -> None:
        if self.count:
            more = f" (and {self.count - _MAX_REPORTED} more)" if self.count > _MAX_REPORTED else ""
            raise ValidationError(f"{name}: nothing imported, {self.count} bad line(s): {'; '.join(self.shown)}{more}",
                                  field="path")


@dataclass
class _FileSummary:
    """What the first pass tells the second besides the index: counts, and the first adjusted time."""

    memories: int = 0
    #: memory lines without a uid or with a provisional one (ImportIndex.pair_old_lines)
    old_lines: int = 0
    rescaled: int = 0
    clamped: int = 0
    #: (line, field, how) of the first time outside 1970..9999 UTC
    first_adjusted: tuple[int, str, str] | None = None

    def note_times(self, line: int, adjusted: list[tuple[str, str]]) -> None:
        for name, how in adjusted:
            self.rescaled += how == "rescaled"
            self.clamped += how == "clamped"
            if self.first_adjusted is None:
                self.first_adjusted = (line, name, how)


def _index_lines(src: IO[str], name: str, limits: ImportLimits, index: ImportIndex, *,
                 allow_incomplete: bool = False) -> _FileSummary:
    """Check every line of the file and note in ``index`` what the checks across the file and the
    second pass need (a memory line's uids, ids, old-rule key, session; a session line whole); any
    bad line refuses the whole import, naming it. So does a file cut short (_incomplete,
    _end_disagrees), unless ``allow_incomplete``."""
    summary = _FileSummary()
    problems = _Problems()
    parts: list[_Part] = []
    mismatched: list[str] = []
    first: dict[str, Any] | None = None
    number = 0
    for number, line in enumerate(src, 1):
        if not line.strip():
            continue
        try:
            text = _utf8(line)
            record = _check_line(text, limits)
        except ValidationError as exc:
            problems.add(f"line {number}: {exc.message}")
            continue
        first = first or record
        kind = record["kind"]
        if kind == "header":
            if parts and record.get("format") not in _FORMATS:  # the first: "not a ... file" below
                problems.add(f"line {number}: a header of format {record.get('format')!r}, not one of "
                             f"{', '.join(_FORMATS)}")
            parts.append(_Part(number, str(record.get("format"))))
            continue
        if parts and parts[-1].end_line is not None:
            problems.add(f"line {number}: a {kind} record after the end record of line {parts[-1].end_line}")
            continue
        if parts and kind == "end":  # not a record to import
            parts[-1].end_line = number
            mismatched.extend(_end_disagrees(parts[-1], record, number))
            continue
        if parts:
            parts[-1].sessions += kind == "session"
            parts[-1].memories += kind == "memory"
        if kind == "session":
            index.add_session(number, record["id"], text)
        elif kind == "memory":
            old = record["uid"] is None or is_provisional(record["uid"])
            # Two lines with one uid are one memory told twice: keeping either would drop the other.
            taken_by = index.add_memory(number, record, record["uid"] or _legacy_uid(record), old, _pair_key(record))
            if taken_by is not None:
                problems.add(f"line {number}: uid {record['uid']} is also the uid of line {taken_by}")
                continue
            summary.memories += 1
            summary.old_lines += old
        if kind != "end":
            summary.note_times(number, record["times_adjusted"])
    problems.refuse(name)
    if first is None or first["kind"] != "header" or first.get("format") not in _FORMATS:
        raise ValidationError(f"{name} is not a robotmem export ({' or '.join(_FORMATS)})", field="path")
    if incomplete := mismatched + _incomplete(parts, number):
        if not allow_incomplete:
            raise ValidationError(f"{name}: nothing imported: {'; '.join(incomplete)}. To import the records it "
                                  "holds anyway: robotmem import --allow-incomplete (in Python: "
                                  "allow_incomplete=True)", field="path")
        log.warning("%s: %s; importing the records it holds (allow_incomplete)", name, "; ".join(incomplete))
    if any(p.format == _FORMAT_WITHOUT_END for p in parts):
        log.warning("%s: written by an earlier robotmem (%s, without the end record that newer exports "
                    "write last): whether it is complete cannot be checked", name, _FORMAT_WITHOUT_END)
    return summary


def _end_disagrees(part: _Part, end: dict[str, Any], number: int) -> list[str]:
    wrote = {"sessions": end["sessions"], "memories": end["memories"]}
    holds = {"sessions": part.sessions, "memories": part.memories}
    if wrote == holds:
        return []
    one = {"sessions": "session", "memories": "memory"}
    missing = ", ".join(f"{wrote[k] - holds[k]:,} {one[k] if wrote[k] - holds[k] == 1 else k}"
                        for k in ("sessions", "memories") if wrote[k] > holds[k])
    return [f"line {number}: the end record counts {wrote['sessions']:,} sessions and {wrote['memories']:,} "
            f"memories, the export of line {part.header_line} holds {holds['sessions']:,} and {holds['memories']:,}"
            + (f" ({missing} missing: lines were lost)" if missing else " (lines were added)")]


def _incomplete(parts: list[_Part], last_line: int) -> list[str]:
    """An export of format /2 whose end record never came: cut short after its last line."""
    problems = []
    for index, part in enumerate(parts):
        if part.format != _FORMAT or part.end_line is not None:
            continue
        if index + 1 < len(parts):
            where = f"the export of line {part.header_line} stops at line {parts[index + 1].header_line - 1}"
        else:
            where = f"the file stops at line {last_line:,}"
        problems.append(f"{where} without the end record an export writes last: it was cut short (an export "
                        f"or copy stopped half-way?) after {part.sessions:,} sessions and {part.memories:,} "
                        f"memories, and how many are missing is unknown")
    return problems


#: The fields of a memory that never change (update rewrites content and context, consolidation the
#: status and links): a stored memory with a file line's uid must have the line's.
_FIXED_FIELDS = ("collection", "type", "created_at")
_UID_LOOKUP = 500


def _check_uids_are_these(conn: Any, path: str, index: ImportIndex) -> None:
    """Before anything is written: each uid of the file the store holds is the same memory there
    (its collection, type and created_at), not another memory that has that uid; otherwise the
    record would be skipped and links re-pointed at an unrelated memory."""
    problems = _Problems()
    after = 0
    while True:
        chunk = index.with_uid(after, _UID_LOOKUP)
        if not chunk:
            break
        after = chunk[-1][0]
        for _, problem in sorted(_other_memories(conn, chunk)):
            problems.add(problem)
        del chunk  # before the next is read: one chunk at a time
    problems.refuse(path)


def _other_memories(conn: Any, chunk: list[tuple[int, int, str, str, str, float, bool]]) -> list[tuple[int, str]]:
    """(line, problem) of the chunk's lines whose uid is another memory of the store (_check_uids_are_these)."""
    lines = {uid: (line, fields, created_adjusted) for _, line, uid, *fields, created_adjusted in chunk}
    found: list[tuple[int, str]] = []
    marks = ", ".join("?" * len(lines))
    for uid, memory_id, *stored in conn.execute(
            f"SELECT uid, id, {', '.join(_FIXED_FIELDS)} FROM memories WHERE uid IN ({marks})", list(lines)):
        line, mine, created_adjusted = lines[str(uid)]
        differs = [name for name, value, ours in zip(_FIXED_FIELDS, stored, mine) if value != ours
                   and not (name == "created_at" and created_adjusted)]  # not the time the file gave
        if differs:
            found.append((line, f"line {line}: uid {uid} belongs to memory {int(memory_id)} of this store, a "
                                f"different memory (its {', '.join(differs)} differ)"))
    return found


def _utf8(line: str) -> str:
    """The line, if it was UTF-8; surrogateescape decoded each other byte as U+DC80..U+DCFF."""
    if line.isascii():
        return line
    at = next((i for i, ch in enumerate(line) if "\udc80" <= ch <= "\udcff"), None)
    if at is None:
        return line
    raise ValidationError(f"not UTF-8 text: byte 0x{ord(line[at]) - 0xDC00:02x} at character {at + 1}")


def _check_line(line: str, limits: ImportLimits) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply or unreadable"
        raise ValidationError(f"not JSON: {detail}") from exc
    if not isinstance(record, dict) or record.get("kind") not in ("header", "session", "memory", "end"):
        raise ValidationError("not a robotmem export record")
    kind = record["kind"]
    if kind == "header":
        return record
    if kind == "end":
        for key in ("sessions", "memories"):
            value = record.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"the end record's {key} must be a count, got {value!r:.40}")
        return record
    required = _REQUIRED_SESSION if kind == "session" else _REQUIRED_MEMORY
    missing = [key for key in required if key not in record]
    if missing:
        raise ValidationError(f"a {kind} record lacks {', '.join(missing)}")
    try:
        checked = check_session(record) if kind == "session" else check_memory(record, limits)
    except ValidationError as exc:
        raise ValidationError(f"{exc.field or kind}: {exc.message}") from exc
    return {"kind": kind, **checked}


#: Memories per write transaction of an import: a robot's own writes interleave between batches.
IMPORT_BATCH = 1000
#: After each batch, an import into SQLite leaves the write lock free for as long as the batch held
#: it, up to this many seconds: a writer waiting on SQLite's busy timeout retries every 100 ms at
#: most, so it gets the lock within a batch or two instead of racing the next batch's BEGIN.
IMPORT_PAUSE_MAX_S = 0.1
#: A test seam: called after each committed batch with the number of memory records done so far.
_after_batch: Callable[[int], None] | None = None

# The same record as a line without a uid (a file written before memories had one): the old rule,
# through the index memories_by_collection (collection, status, created_at) instead of a scan.
_SAME_RECORD_SQL = (
    "SELECT id, uid FROM memories WHERE status IN ('active', 'archived', 'forgotten', 'superseded') AND "
    + " AND ".join(f"{column} = ?" for column in OLD_RULE_COLUMNS) + " ORDER BY id"
)


@dataclass
class _Run:
    """What one import knows across its batches: in ``index`` (on disk) what grows with the file, here
    what a batch or the store bounds."""

    index: ImportIndex
    #: the provisional uids links waiting in import_links name that no row had when the run began
    waiting: set[str] = field(default_factory=set)
    #: for lines without a uid: the rows of each key not taken yet, last first (one query per key:
    #: a batch's look-alike samples share their key, and a query per line would revisit them all).
    #: Only keys with rows left; the index notes the keys looked up.
    candidates: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)
    #: for records with a uid the store does not hold: (id, uid) of the rows of each key with a
    #: provisional uid (rows.is_provisional) no line of the file gives, not taken by such a record
    #: yet, first first. Rows this run inserts for lines without a uid join them. Only keys with rows
    #: left; the index notes the keys whose rows were used up (_provisional_rows).
    provisional: dict[tuple[Any, ...], deque[tuple[int, str]]] = field(default_factory=dict)
    #: the uids the batch being written renamed (ImportIndex.renamed)
    renamed_now: set[str] = field(default_factory=set)
    #: memories given links in import_links by the batch being written
    fresh_links: list[int] = field(default_factory=list)

    def rename(self, old: str, new: str) -> None:
        """A waiting link naming ``old`` names the memory that is ``new`` now."""
        self.index.rename(old, new)
        self.renamed_now.add(old)


def import_jsonl(db: Store, source: Path | IO[str], embeddings: EmbeddingState, now: float,
                 max_payload_bytes: int, *, allow_incomplete: bool = False) -> dict[str, int]:
    """Sessions first, then memories in batches of IMPORT_BATCH, each its own write transaction.

    A record whose uid the store holds is that memory (skipped; the store's version wins), checked
    before anything is written to have its collection, type and created_at there (a uid held by a
    different memory refuses the file, as does a uid on two lines). One
    without a uid matches a stored row by the old rule (collection, content hash, created_at,
    content), each row at most once per run. One with a uid matches by that rule only a row whose
    uid robotmem invented (provisional: a row older than uids, or stored from a line without one),
    each such row at most once per run, and the row takes the record's uid (unless that one is
    provisional too). Otherwise a live fact the store has a live copy of is that copy (learn's
    rule); anything else is inserted with its uid. Links (superseded_by, absorbed) are written
    only for inserted records, as the uids of their targets in ``import_links`` until every
    target is stored: a run stopped between batches and run again stores each record once and
    finishes the links. A waiting link follows its target to the uid a newer line gives it
    (``ImportIndex.renamed``). Before all this, a line without a uid of its own takes the uid of a line
    of the file with one that is the same record by the old rule (ImportIndex.pair_old_lines).

    ``source`` is a path or an open text stream (``robotmem import -``). A file of format /2 must end
    with its end record, counting the sessions and memories it holds; one that does not (cut short)
    is refused before anything is written, unless ``allow_incomplete``.

    The file is read twice: the first pass checks every line and notes what the checks across the
    file and the links need in an on-disk index (import_index.ImportIndex), the second reads each
    batch's lines whole again. What the import holds in memory is a batch, whatever the file's size."""
    limits = ImportLimits(max_payload_bytes=max_payload_bytes, model_id=embeddings.model_id, dim=embeddings.dim)
    with _readable_twice(source) as src:
        return _import_lines(db, src, _source_name(source), embeddings, limits, allow_incomplete)


def _import_lines(db: Store, src: IO[str], path: str, embeddings: EmbeddingState, limits: ImportLimits,
                  allow_incomplete: bool) -> dict[str, int]:
    with ImportIndex() as index:
        summary = _index_lines(src, path, limits, index, allow_incomplete=allow_incomplete)
        counts = {"sessions": 0, "memories": 0, "skipped": 0, "embedded": 0,
                  "times_rescaled": summary.rescaled, "times_clamped": summary.clamped}
        if summary.first_adjusted is not None:
            log.warning("%s: %d stored time(s) outside 1970..9999 UTC: %d read as milliseconds, microseconds or "
                        "nanoseconds since 1970, %d brought to the range's nearest end (first: line %s, %s, %s)",
                        path, summary.rescaled + summary.clamped, summary.rescaled, summary.clamped,
                        *summary.first_adjusted)
        with db.read() as conn:  # checks that read the whole file's uids: a robot's writes need not wait for them
            _check_uids_are_these(conn, path, index)
            _check_sessions_known(conn, index)
            waiting = _waiting_for(db, conn)
        if 0 < summary.old_lines < summary.memories:
            index.pair_old_lines()
        run = _Run(index=index, waiting=waiting)
        with db.write() as conn:
            for _, text in index.session_lines():
                counts["sessions"] += int(db.insert_session_row(conn, _check_line(text, limits)))
        _write_memories(db, src, path, embeddings, limits, run, summary.memories, counts)
    return counts  # the vector indexes are Memory.write_stale_vector_indexes's, as after every bulk load


def _write_memories(db: Store, src: IO[str], path: str, embeddings: EmbeddingState, limits: ImportLimits,
                    run: _Run, total: int, counts: dict[str, int]) -> None:
    """The second pass: each batch of memory lines read again whole and written in a transaction."""
    batch = max(1, IMPORT_BATCH)
    src.seek(0)
    lines = enumerate(src, 1)
    after = 0
    for start in range(0, total, batch):
        rows = run.index.batch(after, batch)
        after = rows[-1][0]
        chunk = _whole_records(lines, rows, path, limits)
        del rows
        began = time.monotonic()
        with db.write() as conn:
            run.renamed_now.clear()
            to_embed = _import_batch(db, conn, chunk, run, counts)
            # Every waiting link at the first batch (a stopped run's too) and the last (a target
            # another writer stored meanwhile); in between only those a batch may have completed.
            every = start == 0 or start + batch >= total
            _write_links(db, conn, run, None if every else {r["known_uid"] for r in chunk} | run.renamed_now)
        held = time.monotonic() - began
        del chunk
        counts["embedded"] += _embed_missing(db, embeddings, to_embed)
        if db.kind == "sqlite" and start + batch < total:
            # PostgreSQL locks rows, not the database: its writers never wait for a batch.
            time.sleep(min(held, IMPORT_PAUSE_MAX_S))
        if _after_batch is not None:
            _after_batch(min(start + batch, total))


def _whole_records(lines: Iterator[tuple[int, str]], rows: list[tuple[int, int, int, str, str | None, bool, bytes]],
                   path: str, limits: ImportLimits) -> list[dict[str, Any]]:
    """The batch's records whole: each line read again (the file is read on from where the previous
    batch stopped: records are in file order), with what the run added to it (known_uid, a paired uid)."""
    whole = []
    for _, number, file_id, known_uid, file_uid, paired, pair_key in rows:
        at, line = next(((n, text) for n, text in lines if n >= number), (None, ""))
        try:
            again = _check_line(_utf8(line), limits) if at == number else {}
        except ValidationError:
            again = {}
        if again.get("kind") != "memory" or again["id"] != file_id or _pair_key(again) != pair_key:
            raise ValidationError(f"{path}: line {number} changed while it was being imported; the batches "
                                  "before it are stored, importing the file again stores the rest", field="path")
        # The uid after ImportIndex.pair_old_lines: a newer line's for a paired line, else the line's own (if any).
        again.update(line=number, known_uid=known_uid, uid=known_uid if file_uid is not None or paired else None)
        if paired:
            again["paired_from"] = file_uid
        whole.append(again)
    return whole


def _import_batch(db: Store, conn: Any, chunk: list[dict[str, Any]], run: _Run,
                  counts: dict[str, int]) -> list[tuple[int, str, str]]:
    uids = list(dict.fromkeys(r["known_uid"] for r in chunk))
    id_of_uid = run.index.ids_of(uids)  # stored by this run (or found as a row of another uid)
    id_of_uid.update(db.ids_by_uid(conn, [uid for uid in uids if uid not in id_of_uid]))
    to_embed: list[tuple[int, str, str]] = []
    vectors: list[tuple[int, str, str, np.ndarray]] = []
    links: list[tuple[int, str | None, str]] = []
    for r in chunk:
        uid = r["known_uid"]
        if run.waiting and not is_provisional(uid):
            _rename_waiting(r, run)
        existing = id_of_uid.get(uid)
        if existing is None:
            existing = _stored_as(db, conn, r, run)
        new_id = None
        if existing is None:
            pending = _pending_links(r, run)
            row = {**r, "uid": uid, "absorbed": []}  # links are written from import_links, into the file only
            new_id = db.insert_row(conn, row)
            if new_id is None:
                # PostgreSQL's unique rules refused a record another writer (an import of the same
                # file) or a live copy another writer stored since the check.
                existing = db.ids_by_uid(conn, [uid]).get(uid) or _live_copy(db, conn, r)
        if existing is not None:
            id_of_uid[uid] = existing
            run.index.set_ids({uid: existing})
            counts["skipped"] += 1
            continue
        assert new_id is not None
        id_of_uid[uid] = new_id
        run.index.set_ids({uid: new_id})
        if r["uid"] is None:
            _offer_provisional(run, _key(r), new_id, uid)
        run.index.take(new_id)
        counts["memories"] += 1
        if pending:
            links.append((new_id, *pending))
            run.fresh_links.append(new_id)
        if r["payload"] is not None:
            db.insert_payload(conn, new_id, r["payload"], r["payload_summary"])
        if r["embedding"] is not None:
            model_id, vector = r["embedding"]
            vectors.append((new_id, r["collection"], model_id, vector))
        elif r["status"] in ("active", "archived") and r["embed"]:
            to_embed.append((new_id, r["collection"], r["content"]))
    # A bulk load: PostgreSQL builds each collection's vector index once, at the end (Memory.import_), not row by row.
    db.put_embeddings(conn, vectors, bulk=True)
    if links:
        conn.executemany("INSERT INTO import_links (memory_id, superseded_by, absorbed) VALUES (?, ?, ?)", links)
    return to_embed


def _pending_links(r: dict[str, Any], run: _Run) -> tuple[str | None, str] | None:
    """(superseded_by, absorbed) as the uids of their targets in the file, or None when no link
    points into the file. A target that is not in the file is dropped, from either: its id is the
    source store's, and kept as it is it would name an unrelated memory of this store."""
    superseded = run.index.uid_of(r["superseded_by"]) if r["superseded_by"] is not None else None
    absorbed = [uid for a in r["absorbed"] if (uid := run.index.uid_of(a)) is not None]
    if superseded is None and not absorbed:
        return None
    return superseded, json.dumps(absorbed)


def _write_links(db: Store, conn: Any, run: _Run, touched: set[str] | None = None) -> None:
    """The links of imported memories whose targets are all stored now (of this run or of an earlier
    one that stopped before its end); the others wait in ``import_links`` for a later batch, under
    the uids their targets have now (ImportIndex.renamed), in the transaction that renamed them.

    ``touched``: the uids the batch stored, found or renamed. Only the links it inserted and those
    waiting for one of these are read again, so a link waiting for the file's last line costs one
    read, not one per batch (``None``: every waiting link)."""
    if touched is None:
        rows = conn.execute("SELECT memory_id, superseded_by, absorbed FROM import_links ORDER BY memory_id")
        run.index.forget_waiting()
    else:
        wake = set(run.fresh_links)
        for uid in touched:
            wake.update(run.index.woken_by(uid))
        rows = _links_of(conn, sorted(wake)) if wake else []
    run.fresh_links.clear()
    pending = [(int(m), *_renamed(run, s, json.loads(a))) for m, s, a in rows]
    if not pending:
        return
    wanted = {u for _, s, a, _ in pending for u in (s, *a) if isinstance(u, str)}
    ids = run.index.ids_of(wanted)
    ids.update(db.ids_by_uid(conn, sorted(wanted - ids.keys())))
    absorbed_param = "?::jsonb" if dialect_of(conn) == "postgresql" else "?"
    done, renamed = [], []
    for memory_id, superseded, absorbed, changed in pending:
        missing = [u for u in (superseded, *absorbed) if isinstance(u, str) and u not in ids]
        if missing:
            for uid in missing:
                run.index.wait_on(uid, memory_id)
            if changed:
                renamed.append((superseded, json.dumps(absorbed), memory_id))
            continue
        conn.execute(f"UPDATE memories SET superseded_by = ?, absorbed = {absorbed_param} WHERE id = ?",
                     (None if superseded is None else ids[superseded],
                      json.dumps([ids[a] if isinstance(a, str) else a for a in absorbed]), memory_id))
        done.append((memory_id,))
    conn.executemany("DELETE FROM import_links WHERE memory_id = ?", done)
    conn.executemany("UPDATE import_links SET superseded_by = ?, absorbed = ? WHERE memory_id = ?", renamed)


def _links_of(conn: Any, memory_ids: list[int]) -> list[tuple[Any, ...]]:
    """The rows of import_links of these memories, by memory id."""
    if dialect_of(conn) == "postgresql":
        query = "SELECT memory_id, superseded_by, absorbed FROM import_links WHERE memory_id = ANY(?) ORDER BY memory_id"
        return list(conn.execute(query, (memory_ids,)))
    return list(conn.execute("SELECT memory_id, superseded_by, absorbed FROM import_links WHERE memory_id IN "
                             "(SELECT value FROM json_each(?)) ORDER BY memory_id", (json.dumps(memory_ids),)))


def _renamed(run: _Run, superseded: str | None, absorbed: list[Any]) -> tuple[str | None, list[Any], bool]:
    """A waiting link's targets under the uids they have now, and whether any was renamed."""
    if not run.index.any_renamed:
        return superseded, absorbed, False
    now = run.index.renamed(superseded) if superseded is not None else None
    now_absorbed = [run.index.renamed(a) if isinstance(a, str) else a for a in absorbed]
    return now, now_absorbed, (now, now_absorbed) != (superseded, absorbed)


def _waiting_for(db: Store, conn: Any) -> set[str]:
    """The provisional uids that waiting links name and no row has: the uids a stopped import gave
    lines without one whose memories it had not stored yet. A newer export's line gives such a
    memory its own uid; _rename_waiting re-keys the links to it."""
    named = {u for s, a in conn.execute("SELECT superseded_by, absorbed FROM import_links")
             for u in (s, *json.loads(a)) if isinstance(u, str) and is_provisional(u)}
    return named - db.ids_by_uid(conn, sorted(named)).keys() if named else named


def _rename_waiting(r: dict[str, Any], run: _Run) -> None:
    """Links waiting for the provisional uid this memory's line had (paired: _pair_key), or
    got in an export written before uids (derived from the line: its id, collection, content hash,
    times and text), wait for this memory."""
    if (old := r.get("paired_from") or _legacy_uid(r)) in run.waiting:
        run.rename(old, r["known_uid"])


def _pair_key(r: dict[str, Any]) -> bytes:
    """What pairs old lines with newer ones (ImportIndex.pair_old_lines). A file may hold an old
    export's lines (without a uid, or a provisional one) and a newer export's lines of the same
    memories, in either order: each old line takes the uid of a newer line with its collection,
    type, created_at, content hash and text, the first not taken, in file order, so it is that
    memory in this run and every rerun (``paired_from``: the provisional uid it had, which links a
    stopped import of the old lines left waiting may name). Lines with a uid of their own are never
    paired with one another (two robots' identical samples stay two memories)."""
    return key_digest((r["type"], *_key(r)))


def _legacy_uid(r: dict[str, Any]) -> str:
    """The uid a line without one gets: derived from what it is, so the same line of the same file
    gets the same uid in every run (a rerun after a stop finds what the stopped run stored). It is
    provisional (rows.PROVISIONAL_PREFIX): a later export of the source gives the memory its own."""
    key = json.dumps(["robotmem-export/1", r["id"], r["collection"], r["content_hash"], r["created_at"],
                      r["occurred_at"], r["content"]], ensure_ascii=False)
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return PROVISIONAL_PREFIX + digest[len(PROVISIONAL_PREFIX):32]


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    """The old rule's key (rows.OLD_RULE_COLUMNS), in the order of _SAME_RECORD_SQL's parameters."""
    return tuple(r[column] for column in OLD_RULE_COLUMNS)


def _stored_as(db: Store, conn: Any, r: dict[str, Any], run: _Run) -> int | None:
    """For a record whose uid the store does not hold: the memory it already is. A line without a
    uid is the unclaimed row with its collection, content hash, created_at and content (the rule of
    exports written before uids). A record with a uid is, by that rule, an unclaimed row whose uid
    robotmem invented (rows.is_provisional: the row or its line predates uids), which takes the
    record's uid unless that one is provisional too. A live fact is the live copy of that fact: ``learn`` keeps one
    live copy per text and context and PostgreSQL's unique index refuses a second, so an import into
    SQLite keeps one too instead of adding a copy ``learn`` would never make."""
    key = _key(r)
    if r["uid"] is not None:
        found = _provisional_rows(conn, run, key)
        try:
            while found:
                row_id, provisional = found.popleft()
                if is_provisional(r["uid"]):
                    return row_id
                # Not adopted: another writer gave the row a uid (this record's, or its own), or stored
                # this record in a row of its own, since this run read the row.
                stored = row_id if db.adopt_uid(conn, row_id, provisional, r["uid"]) else db.ids_by_uid(
                    conn, [r["uid"]]).get(r["uid"])
                if stored == row_id:
                    run.rename(provisional, r["uid"])
                    return row_id
                if stored is not None:
                    found.appendleft((row_id, provisional))  # not this record's: unclaimed, or adopt_uid will see it taken
                    return stored
        finally:
            if not found and run.provisional.pop(key, None) is not None:
                run.index.mark_looked_up(PROVISIONAL, key_digest(key))  # used up: _provisional_rows
    elif (row := _unclaimed_row(conn, run, key)) is not None:
        return row
    if r["type"] == "fact" and r["status"] in ("active", "archived"):
        return db.find_duplicate(conn, r["collection"], r["content_hash"])
    return None


def _provisional_rows(conn: Any, run: _Run, key: tuple[Any, ...]) -> deque[tuple[int, str]]:
    """run.provisional's rows of ``key``. A look-up that found none is not kept: nearly every
    record's finds none, and an empty deque a record kept 0.8 KB per line of the file for the whole
    import; a later record of the key looks it up again, and finds the rows this run inserted
    since, in id order. Rows that were found and used up are not looked up again (the look-up would
    return rows records of this run took); the index notes their key, and only rows this run
    inserts since join it (_offer_provisional)."""
    found = run.provisional.get(key)
    if found is not None:
        return found
    if run.index.looked_up(PROVISIONAL, key_digest(key)):
        return deque()
    found = deque((int(i), str(u)) for i, u in conn.execute(_SAME_RECORD_SQL, key)
                  if is_provisional(u) and not run.index.gives_uid(str(u)))
    if found:
        run.provisional[key] = found
    return found


def _offer_provisional(run: _Run, key: tuple[Any, ...], new_id: int, uid: str) -> None:
    """A row this run inserted for a line without a uid: its uid is provisional, a newer line may be
    it, if the rows of its key were looked up and kept (_provisional_rows)."""
    if key in run.provisional or run.index.looked_up(PROVISIONAL, key_digest(key)):
        run.provisional.setdefault(key, deque()).append((new_id, uid))


def _unclaimed_row(conn: Any, run: _Run, key: tuple[Any, ...]) -> int | None:
    """For a line without a uid: the first row of its key that no line of the file is and no record
    of this run took (run.candidates: one query per key; the index notes the keys looked up)."""
    rows = run.candidates.pop(key, None)
    if rows is None:
        digest = key_digest(key)
        if run.index.looked_up(CANDIDATES, digest):
            return None
        run.index.mark_looked_up(CANDIDATES, digest)
        rows = [int(i) for i, u in conn.execute(_SAME_RECORD_SQL, key)
                if u is None or not run.index.has_uid(str(u))][::-1]
    row_id = None
    while rows and row_id is None:
        candidate = rows.pop()
        if run.index.take(candidate):
            row_id = candidate
    if rows:
        run.candidates[key] = rows
    return row_id


def _live_copy(db: Store, conn: Any, r: dict[str, Any]) -> int:
    found = db.find_duplicate(conn, r["collection"], r["content_hash"])
    assert found is not None  # the insert was refused because it exists
    return found


def _check_sessions_known(conn: Any, index: ImportIndex) -> None:
    """Before anything is written: every memory's session is in the file or in the store."""
    for sid, line in index.sessions_not_in_file():
        if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
            raise ValidationError(f"line {line}: session_id {sid} is neither in the file nor in the store",
                                  field="path")


def _embed_missing(db: Store, embeddings: EmbeddingState, items: list[tuple[int, str, str]],
                   batch_size: int = 64) -> int:
    """Embed each (memory id, collection, text) and store the vector; how many were stored.

    The texts were read in an earlier transaction, and embedding takes a while: a vector is
    stored only if its memory is still live and still holds the text embedded, checked under the
    write. Otherwise the old text's vector would overwrite the one an ``update`` stored for the
    new text meanwhile (or give a memory forgotten meanwhile a vector); the writer that changed
    the memory stored what it needs."""
    done = 0
    model_id = embeddings.model_id
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        vectors = embeddings.embed([text for _, _, text in batch])
        if vectors is None or model_id is None:
            return done
        with db.write() as conn:
            current = db.lock_live_contents(conn, [memory_id for memory_id, _, _ in batch])
            for (memory_id, collection, text), vector in zip(batch, vectors):
                if current.get(memory_id) == text:
                    db.put_embedding(conn, memory_id, collection, model_id, vector)
                    done += 1
    return done


def reindex(db: Store, embeddings: EmbeddingState, *, everything: bool = False, replace_other_models: bool = False,
            batch_size: int, progress: Callable[[int, int], None] | None) -> dict[str, Any]:
    """Embed every active/archived memory that has no vector (``everything``: and those with one of
    the active model). A vector of another model is replaced only with ``replace_other_models``:
    it may come from a model this process cannot load (a program's own embedder), and replacing
    it cannot be undone; those kept are counted by model in ``kept_other_models``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError("batch_size must be a positive integer", field="batch_size")
    model_id = embeddings.model_id
    searchable = ("FROM memories m LEFT JOIN embeddings e ON e.memory_id = m.id "
                  "WHERE m.status IN ('active', 'archived') AND m.embed ")
    with db.read() as conn:
        items = [(int(i), c, t) for i, c, t in conn.execute(
            f"SELECT m.id, m.collection, m.content {searchable}AND (e.model_id IS NULL "
            "OR (? AND e.model_id = ?) OR (? AND e.model_id != ?)) ORDER BY m.id",
            (everything, model_id, replace_other_models, model_id))]
        kept = {} if replace_other_models else {str(other): int(n) for other, n in conn.execute(
            f"SELECT e.model_id, count(*) {searchable}AND e.model_id != ? GROUP BY e.model_id ORDER BY e.model_id",
            (model_id,))}
    done = 0
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        done += _embed_missing(db, embeddings, batch, batch_size)
        if progress is not None:
            # Memories gone through, stored or not (changed meanwhile: _embed_missing), so a
            # progress bar ends full.
            progress(start + len(batch), len(items))
    return {"model_id": model_id, "reembedded": done, "total": len(items), "kept_other_models": kept}
