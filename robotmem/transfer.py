"""Export and import as JSON Lines, and re-embedding a store.

One line per session (``"kind": "session"``) then one per memory (``"kind": "memory"``)
with everything a memory has: status, provenance, payload (msgpack, base64) and
vector (float32, base64, with its model id). Import keeps session ids, assigns new
memory ids (remapping ``superseded_by`` and ``absorbed``) and skips what is already
there, so importing the same file twice adds nothing.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from .errors import ValidationError
from .import_checks import ImportLimits, check_memory, check_session
from .search.embedding_state import EmbeddingState
from .store.backend import Store, dialect_of
from .store.rows import MEMORY_COLUMNS

__all__ = ["export_jsonl", "import_jsonl", "reindex"]

_FORMAT = "robotmem-export/1"
_DEFAULTS = {"embed": 1}
_REQUIRED_SESSION = ("id", "collection", "context", "started_at", "ended_at", "outcome_score", "summary")
_REQUIRED_MEMORY = tuple(c for c in MEMORY_COLUMNS if c not in _DEFAULTS)


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _opened(path: Path, mode: str, errors: str = "strict") -> IO[str]:
    try:
        return path.open(mode, encoding="utf-8", errors=errors)
    except OSError as exc:
        raise ValidationError(f"cannot open {path}: {exc.strerror or exc}", field="path") from exc


def export_jsonl(db: Store, conn: Any, path: Path, *, batch: int = 1000) -> dict[str, int]:
    counts = {"sessions": 0, "memories": 0}
    with _opened(path, "w") as out:
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
    return counts


_MAX_REPORTED = 5


def _read_lines(path: Path, limits: ImportLimits) -> list[dict[str, Any]]:
    """Every record of the file, checked; any bad line refuses the whole import, naming it."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    # surrogateescape: bytes that are not UTF-8 are read (as lone surrogates) instead of raising
    # in the middle of the loop, so _utf8 reports their line like any other bad line.
    with _opened(path, "r", errors="surrogateescape") as src:
        for number, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                record = _check_line(_utf8(line), limits)
            except ValidationError as exc:
                problems.append(f"line {number}: {exc.message}")
                continue
            if record["kind"] != "header":
                record["line"] = number
            records.append(record)
    if problems:
        shown = "; ".join(problems[:_MAX_REPORTED])
        more = f" (and {len(problems) - _MAX_REPORTED} more)" if len(problems) > _MAX_REPORTED else ""
        raise ValidationError(f"{path}: nothing imported, {len(problems)} bad line(s): {shown}{more}", field="path")
    if not records or records[0].get("format") != _FORMAT:
        raise ValidationError(f"{path} is not a {_FORMAT} file", field="path")
    return records


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
    if not isinstance(record, dict) or record.get("kind") not in ("header", "session", "memory"):
        raise ValidationError("not a robotmem export record")
    kind = record["kind"]
    if kind == "header":
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


def import_jsonl(db: Store, path: Path, embeddings: EmbeddingState, now: float,
                 max_payload_bytes: int) -> dict[str, int]:
    limits = ImportLimits(max_payload_bytes=max_payload_bytes, model_id=embeddings.model_id, dim=embeddings.dim)
    records = _read_lines(path, limits)
    counts = {"sessions": 0, "memories": 0, "skipped": 0, "embedded": 0}
    id_map: dict[int, int] = {}
    to_embed: list[tuple[int, str, str]] = []
    vectors: list[tuple[int, str, str, np.ndarray]] = []
    with db.write() as conn:
        sessions = {r["id"] for r in records if r["kind"] == "session"}
        for r in (r for r in records if r["kind"] == "session"):
            counts["sessions"] += int(db.insert_session_row(conn, r))
        memories = [r for r in records if r["kind"] == "memory"]
        for r in memories:
            _check_session_known(conn, r, sessions)
            existing = _stored_as(db, conn, r)
            new_id = None if existing is not None else db.insert_row(conn, r)
            if new_id is None:
                # PostgreSQL's unique rule refused a live copy another writer stored since the check.
                id_map[r["id"]] = existing if existing is not None else _live_copy(db, conn, r)
                counts["skipped"] += 1
                continue
            id_map[r["id"]] = new_id
            counts["memories"] += 1
            if r["payload"] is not None:
                db.insert_payload(conn, new_id, r["payload"], r["payload_summary"])
            if r["embedding"] is not None:
                model_id, vector = r["embedding"]
                vectors.append((id_map[r["id"]], r["collection"], model_id, vector))
            elif r["status"] in ("active", "archived") and r["embed"]:
                to_embed.append((id_map[r["id"]], r["collection"], r["content"]))
        # A bulk load: PostgreSQL builds each collection's vector index once, below, not row by row.
        db.put_embeddings(conn, vectors, bulk=True)
        absorbed_param = "?::jsonb" if dialect_of(conn) == "postgresql" else "?"
        for r in memories:
            new_id = id_map[r["id"]]
            superseded = id_map.get(r["superseded_by"]) if r["superseded_by"] is not None else None
            absorbed = [id_map.get(a, a) for a in r["absorbed"]]
            conn.execute(f"UPDATE memories SET superseded_by = ?, absorbed = {absorbed_param} WHERE id = ?",
                         (superseded, json.dumps(absorbed), new_id))
    db.build_vector_indexes()
    counts["embedded"] = _embed_missing(db, embeddings, to_embed)
    return counts


def _stored_as(db: Store, conn: Any, r: dict[str, Any]) -> int | None:
    """The memory this record already is: the same record (imported before, or the store it
    was exported from), or for a live fact the live copy of that fact. ``learn`` keeps one
    live copy per text and context and PostgreSQL's unique index refuses a second, so an
    import into SQLite keeps one too instead of adding a copy ``learn`` would never make."""
    row = conn.execute(
        "SELECT id FROM memories WHERE collection = ? AND content_hash = ? AND created_at = ? AND content = ?",
        (r["collection"], r["content_hash"], r["created_at"], r["content"]),
    ).fetchone()
    if row is not None:
        return int(row[0])
    if r["type"] == "fact" and r["status"] in ("active", "archived"):
        return db.find_duplicate(conn, r["collection"], r["content_hash"])
    return None


def _live_copy(db: Store, conn: Any, r: dict[str, Any]) -> int:
    found = db.find_duplicate(conn, r["collection"], r["content_hash"])
    assert found is not None  # the insert was refused because it exists
    return found


def _check_session_known(conn: Any, r: dict[str, Any], sessions: set[str]) -> None:
    sid = r["session_id"]
    if sid is None or sid in sessions or conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
        return
    raise ValidationError(f"line {r['line']}: session_id {sid} is neither in the file nor in the store",
                          field="path")


def _embed_missing(db: Store, embeddings: EmbeddingState, items: list[tuple[int, str, str]],
                   batch_size: int = 64) -> int:
    done = 0
    model_id = embeddings.model_id
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        vectors = embeddings.embed([text for _, _, text in batch])
        if vectors is None or model_id is None:
            return done
        with db.write() as conn:
            for (memory_id, collection, _), vector in zip(batch, vectors):
                db.put_embedding(conn, memory_id, collection, model_id, vector)
        done += len(batch)
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
        done += _embed_missing(db, embeddings, items[start : start + batch_size], batch_size)
        if progress is not None:
            progress(done, len(items))
    return {"model_id": model_id, "reembedded": done, "total": len(items), "kept_other_models": kept}
