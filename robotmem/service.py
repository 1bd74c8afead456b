"""``Memory``: the seven operations (and a few reads) over one store.

Every public method validates its input here, at the boundary, and returns plain
JSON-serialisable values. Embedding happens outside write transactions so a writer
never holds the database lock while the model runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeGuard

from . import validation
from .config import Config, check_postgres_url, is_postgres_url
from .context import (
    canonical_json, content_hash, content_hashes, contexts_before_outcome, holds_hash, parse_context,
    parse_context_json,
)
from .embeddings.base import Embedder
from .errors import ConflictError, NotFoundError, ReadOnlyStoreError, ValidationError, brief
from .models import CLAIM_NAME_MAX_CHARS, DESCRIPTION_MAX_CHARS
from .payload import decode_payload, encode_payload, summarize_payload, to_json_safe
from .search.ann_index import index_folder
from .search.embedding_state import EmbeddingState, resolve_embedder
from .search.engines import recall_engine_for
from .search.leaf_columns import LeafColumns
from .search.log_pruning import Pruner, prune_change_log
from .search.recall import RecallEngine
from .search.request import build_request
from .store.backend import Store, open_store
from .store.clockwatch import ClockWatch, stamps_ahead
from .store.decay import FUTURE_TOLERANCE_S, PLAUSIBLE_SINCE
from .store.forks import in_child_after_fork
from .store.memories import NewMemory
from .store import purge
from .store.pipeline import Later, PipelinedWrites
from .store.purge import PurgeScope, has_collection
from .store.rows import HIT_COLUMNS, row_to_record
from .store.sqlite import SqliteStore
from .store.tokens import memory_search_text

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Memory"]

log = logging.getLogger("robotmem")

Clock = Callable[[], float]
_PROTECTED_CATEGORIES = ("constraint", "safety")
_ACCESS_FLUSH_EVERY = 256
#: Access counts waiting for a store that refuses them (a read replica, a read-only role) are
#: dropped past this many memories: they are bookkeeping, and must not grow without bound.
_ACCESS_PENDING_MAX = 65_536
_DAY = 86_400.0
#: Records read per statement (session_timeline): well within either database's limits.
_RECORDS_PER_STATEMENT = 1000


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be true or false", field=field)
    return value


def _is_stream(value: Any, method: str) -> TypeGuard[TextIO]:
    """An open text stream (export and import take one, as ``robotmem export -`` does stdout)."""
    return not isinstance(value, (str, bytes, Path)) and callable(getattr(value, method, None))


def _refuse_retired(row: dict[str, Any]) -> dict[str, Any]:
    """``row``, unless its memory was forgotten or superseded: update refuses those."""
    status = row["status"]
    if status in ("forgotten", "superseded"):
        target = f"; update memory {row['superseded_by']} instead" if status == "superseded" else ""
        raise ConflictError(f"memory {row['id']} is {status}{target}", field="memory_id")
    return row


def _is_protected(context: dict[str, Any]) -> bool:
    return context.get("protected") is True or context.get("category") in _PROTECTED_CATEGORIES


def _robot_id(robot: Any) -> str:
    """``robot`` of list_sessions: matched as written (spaces kept: a context's id is not stripped)."""
    if not isinstance(robot, str) or not robot or "\x00" in robot:
        raise ValidationError(f"robot must be a robot id, non-empty text without NUL; got {brief(robot)}",
                              field="robot")
    return validation.unicode_text(robot, "robot")


def _session_cursor(after: Any) -> tuple[float, str]:
    """``after`` of list_sessions: a session's (started_at, id) as a listing gave them."""
    if isinstance(after, (str, bytes, Mapping)) or not isinstance(after, Sequence) or len(after) != 2:
        raise ValidationError("after must be (started_at, session_id) of a listed session", field="after")
    started, sid = after
    if isinstance(started, bool) or not isinstance(started, (int, float)) or not math.isfinite(started):
        raise ValidationError(f"after's started_at must be a finite number, not {brief(started)}", field="after")
    return float(started), validation.session_id(sid, "after")


class Memory:
    """An episodic memory store in one SQLite file. Thread-safe; use as a context manager."""

    def __init__(
        self,
        path: str | Path | None = None,
        collection: str | None = None,
        clock: Clock | None = None,
        *,
        embedder: Embedder | str | None = "auto",
        config: Config | None = None,
        url: str | None = None,
    ) -> None:
        if is_postgres_url(path):
            path, url = None, str(path)
        if path is not None:
            # Here, not in SQLite: a NUL or a lone surrogate failed there as a bare ValueError.
            path = validation.file_path(path, "path", utf8=True)
        if url is not None:
            check_postgres_url(url, error=ValidationError)
        if clock is not None and not callable(clock):
            raise ValidationError("clock must be a callable returning epoch seconds", field="clock")
        if config is None:
            config = Config.load(db_path=path, url=url)
        elif not isinstance(config, Config):
            # A dict of options is the likely mistake; Config.load(**options) is what takes one.
            raise ValidationError(f"config must be a robotmem.Config (Config.load(...) builds one), "
                                  f"got {type(config).__name__}", field="config")
        elif path is not None or url is not None:
            # As Config.load does: a path alone sets aside the config's url.
            config = dataclasses.replace(config, db_path=path if path is not None else config.db_path, url=url)
        self.config = config
        self.collection = validation.collection(collection, config.collection)
        self._clock: Clock = clock if clock is not None else time.time
        # Before the store opens: a refused embedder (a bad model_id) leaves the store as it was,
        # not created or migrated.
        self._embeddings = EmbeddingState(resolve_embedder(embedder, self.config))
        self._db: Store = open_store(self.config.store_location, busy_timeout_ms=self.config.busy_timeout_ms)
        try:
            self._db.migrate()
            # One index lookup: the newest time the store holds, against which readings are checked.
            self._clock_watch = ClockWatch(self._newest_stamp())
            self._hold_a_set_back_clock()
            if self._embeddings.available and self._embeddings.model_id and self._embeddings.dim:
                self._db.prepare_vectors(self._embeddings.model_id, self._embeddings.dim)
        except BaseException:
            self._db.close()
            raise
        if isinstance(self._db, SqliteStore):
            # change_log would grow by every write for as long as the store lives (docs/data-model.md).
            self._db.after_checkpoints(Pruner(index_folder(self._db.path)))
        self._half_life_s = self.config.half_life_days * _DAY
        self._engine = recall_engine_for(self._db, half_life_s=self._half_life_s)
        # Leaf columns outcome_stats counts from, kept current by change_log (SQLite's answer only).
        self._leaf_columns = LeafColumns()
        self._access: dict[int, int] = {}
        self._access_lock = threading.Lock()
        # Pending memories at which the next flush is tried: doubled after each failed flush, so a
        # store that refuses writes costs a failed write now and then, not one per recall.
        self._access_flush_at = _ACCESS_FLUSH_EVERY
        self._bulk_writers: weakref.WeakSet[BulkWriter] = weakref.WeakSet()
        in_child_after_fork(self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child (the store reconnects on its own, robotmem.store.forks): the access counts
        waiting are the parent's to write (written by both, a recall before the fork counted twice),
        and its bulk writers are the parent's."""
        self._access_lock = threading.Lock()
        self._access = {}
        self._bulk_writers = weakref.WeakSet()

    def __reduce__(self) -> Any:
        # Pickled for another process (multiprocessing's spawn or forkserver start method, a
        # ProcessPoolExecutor's arguments) it failed with "cannot pickle '_thread.lock' object".
        raise TypeError(f"a robotmem Memory cannot be sent to another process; open one there with "
                        f"Memory({self.location!r}) (a process forked after it was opened can use it as it is)")

    # -- lifecycle -------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The SQLite file (for a PostgreSQL store: the file that is not used; see ``location``)."""
        return self.config.database

    @property
    def location(self) -> str:
        """Where the memories live: the SQLite file, or the PostgreSQL URL without its password."""
        return self._db.location

    @property
    def store(self) -> Store:
        """The store underneath (SQLite or PostgreSQL); for migration and tooling."""
        return self._db

    @property
    def embedder(self) -> Embedder | None:
        return self._embeddings.embedder

    @property
    def recall_engine(self) -> RecallEngine:
        """The recall engine (and its warm vector mirror); consolidation ranks related memories with it."""
        return self._engine

    def now(self) -> float:
        """The clock's reading, checked: every call reads it before it writes anything. A reading
        from a clock never set, or far behind the newest time the store holds, is logged once; it
        is used as it is, except while the store's time is continued (a clock set back at open) or
        the clock stepped back a little (robotmem.store.clockwatch)."""
        reading = validation.clock_reading(self._clock())
        effective = self._clock_watch.effective(reading)
        self._clock_watch.check(reading)
        return effective

    def _hold_a_set_back_clock(self) -> None:
        """At open: a reading more than a day behind the store's newest time that is either unset
        (before PLAUSIBLE_SINCE: an RTC lost, 1970) or that the store's stamps put behind them
        (StampsAhead.set_back: a board booted at its firmware date, a fleet robot days behind)
        makes this process continue the store's time until the clock reaches it. Stamped as read,
        what a firmware-date boot learned before NTP synced looked years old at the sync and was
        archived, and its episodes lasted years and listed last (docs/consolidation.md, "Clocks").
        One aggregate over the store, only when the reading is plausible and that far behind."""
        newest = self._clock_watch.newest
        try:
            reading = validation.clock_reading(self._clock())
        except ValidationError:
            return  # the first call refuses it, naming the clock
        if newest is None or newest < PLAUSIBLE_SINCE or reading >= newest - FUTURE_TOLERANCE_S:
            return
        if reading >= PLAUSIBLE_SINCE:
            with self._db.read() as conn:
                ahead = stamps_ahead(conn, "TRUE", [], reading)
            if not ahead.set_back(reading):
                return  # stamps a clock ahead wrote, not a clock set back: end_session repairs them
        self._clock_watch.hold(newest, reading)

    def _newest_stamp(self) -> float | None:
        """The newest time on the newest memory (by id: one index lookup), or a session's end up to
        a day after it, for ClockWatch. The sessions count: an episode's end writes no memory, and a
        robot booting at its firmware date every day continued from its last fact, not from its
        last episode's end, so every boot's episodes started at the same time. Not further ahead:
        a session a year-ahead clock ended is never restamped, and would keep every process of the
        next year warning and counting."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT created_at, updated_at, reinforced_at FROM memories "
                "WHERE id = (SELECT max(id) FROM memories)").fetchone()
            if row is None:
                return None
            newest = max(float(v) for v in row)
            # Ends only: (collection, ended_at) is an index, so this reads it and not the sessions'
            # contexts and summaries.
            ended = conn.execute("SELECT max(ended_at) FROM sessions WHERE ended_at <= ?",
                                 (newest + FUTURE_TOLERANCE_S,)).fetchone()
        return newest if ended is None or ended[0] is None else max(newest, float(ended[0]))

    def close(self) -> None:
        failure: BaseException | None = None
        for writer in list(self._bulk_writers):
            try:
                writer._close()  # its last batch is stored before the connections go
            except BaseException as exc:  # the others still close; the first failure is raised below
                failure = failure or exc
        try:
            self._flush_access(force=True)
        finally:
            self._db.close()
        if failure is not None:
            raise failure

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- learn -----------------------------------------------------------------------

    def learn(
        self,
        insight: str,
        context: dict[str, Any] | str | None = None,
        collection: str | None = None,
        session_id: str | None = None,
        occurred_at: float | str | None = None,
    ) -> dict[str, Any]:
        """Store a declarative experience; an exact repeat reinforces the existing memory.

        ``occurred_at`` (epoch seconds or ISO 8601; default now) is when it happened, e.g. a
        recording's message time; decay still runs from insertion."""
        text = validation.insight(insight)
        ctx, ctx_json = parse_context_json(context)
        now = self.now()
        occurred = validation.timestamp(occurred_at, "occurred_at")
        coll = self._collection_for(collection, session_id)
        digests = content_hashes(text, ctx, ctx_json)
        with self._db.read() as conn:
            self._check_session_open(conn, session_id, coll)
            existing = self._find_fact(conn, coll, digests)
        if existing is not None:
            with self._db.write() as conn:
                return self._reinforce_duplicate(conn, existing, now)
        vectors = self._embeddings.embed([text])

        def store(conn: Any) -> dict[str, Any]:
            self._check_session_open(conn, session_id, coll)
            # Checked again under the write lock: another thread or process may have stored
            # the same insight while this one was embedding it.
            existing = self._find_fact(conn, coll, digests)
            if existing is not None:
                return self._reinforce_duplicate(conn, existing, now)
            memory_id = self._insert(conn, coll, session_id, "fact", None, text, ctx, now,
                                     now if occurred is None else occurred, context_json=ctx_json)
            if memory_id is None:
                # PostgreSQL: another process stored it after our check; the unique index kept one.
                duplicate = self._find_fact(conn, coll, digests)
                if duplicate is None:  # pragma: no cover - it was forgotten in between
                    raise ConflictError("the same insight was stored and retracted concurrently; retry")
                return self._reinforce_duplicate(conn, duplicate, now)
            self._store_vector(conn, memory_id, coll, vectors, 0)
            return {"memory_id": memory_id, "status": "created"}

        return self._db.run_write(store)

    def _find_fact(self, conn: Any, collection: str, digests: tuple[str, ...]) -> int | None:
        """The live fact with this hash, or with a hash earlier versions gave the same text and
        context (``content_hashes``: a store may still hold them)."""
        for digest in digests:
            found = self._db.find_duplicate(conn, collection, digest)
            if found is not None:
                return found
        return None

    def _reinforce_duplicate(self, conn: Any, existing: int, now: float) -> dict[str, Any]:
        # The repeat is worth what the fact learned fresh would be (initial_confidence): confirming
        # a fact never leaves it less recallable than learning it again (docs/consolidation.md).
        self._db.reinforce(conn, existing, now, step=self.config.reinforce_step,
                           ceiling=self.config.max_confidence, half_life_s=self._half_life_s,
                           fresh=self.config.initial_confidence)
        return {"memory_id": existing, "status": "duplicate"}

    # -- perceptions -----------------------------------------------------------------

    def save_perception(
        self,
        description: str,
        perception_type: str = "visual",
        data: Any = None,
        metadata: dict[str, Any] | str | None = None,
        collection: str | None = None,
        session_id: str | None = None,
        occurred_at: float | str | None = None,
    ) -> dict[str, Any]:
        """Store what the robot sensed or did; numeric arrays are kept as compact binary.

        ``occurred_at``: when it happened (epoch seconds or ISO 8601; default now)."""
        record = self._prepare_perception(
            {"description": description, "perception_type": perception_type, "data": data,
             "metadata": metadata, "collection": collection, "session_id": session_id,
             "occurred_at": occurred_at}, field_prefix=""
        )
        (memory_id,) = self._write_perceptions([record], single=True)
        return {"memory_id": memory_id, "status": "created", "payload_bytes": len(record["blob"] or b"")}

    def save_perceptions(self, records: Sequence[dict[str, Any]]) -> list[int]:
        """Bulk save_perception: one transaction, descriptions embedded in batches.

        Each record takes save_perception's keyword arguments, plus optional ``occurred_at``
        (epoch seconds; recordings set the recorded time) and ``embed`` (default true;
        false for templated numeric records such as trajectory chunks, whose text the
        semantic model adds nothing to: they stay findable by full text, filters and space).
        """
        return self._write_perceptions(self._prepare_perceptions(records))

    def bulk_writer(self, *, write_indexes: bool = True) -> BulkWriter:
        """``save_perceptions`` for long loads (replays, imports): each batch commits on a worker
        thread while the caller prepares the next one. See :class:`BulkWriter`. ``write_indexes``:
        whether ``close()`` ends a load as an import does (``write_stale_vector_indexes``); false
        for writes whose closing must stay quick (a benchmark of the write path, a control loop)."""
        writer = BulkWriter(self, self._db.pipelined_writes(), write_indexes=_flag(write_indexes, "write_indexes"))
        self._bulk_writers.add(writer)
        return writer

    def _prepare_perceptions(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if not isinstance(records, (list, tuple)):
            raise ValidationError("records must be a list of dicts", field="records")
        return [self._prepare_perception(r, field_prefix=f"records[{i}].") for i, r in enumerate(records)]

    def _prepare_perception(self, raw: Any, *, field_prefix: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            name = field_prefix.rstrip(".") or "record"  # "records[0]", not "records[0]."
            raise ValidationError(f"{name} must be a dict, got {type(raw).__name__}", field=name)
        allowed = {"description", "perception_type", "data", "metadata", "collection", "session_id", "occurred_at",
                   "embed"}
        unknown = set(raw) - allowed
        if unknown:
            raise ValidationError(f"unknown field(s) {', '.join(sorted(unknown))}",
                                  field=field_prefix + min(unknown))
        text = validation.description(raw.get("description"), field_prefix + "description")
        ptype = validation.perception_type(raw.get("perception_type", "visual"), field_prefix + "perception_type")
        ctx, ctx_json = parse_context_json(raw.get("metadata"), field_prefix + "metadata")
        data = validation.json_value(raw.get("data"), field_prefix + "data")
        blob = None if data is None else encode_payload(
            data, max_bytes=self.config.max_payload_bytes, field=field_prefix + "data")
        session_id = raw.get("session_id")
        coll = self._collection_for(raw.get("collection"), session_id, field_prefix=field_prefix)
        occurred = validation.timestamp(raw.get("occurred_at"), field_prefix + "occurred_at")
        return {"text": text, "ptype": ptype, "context": ctx, "context_json": ctx_json, "blob": blob, "collection": coll,
                "session_id": session_id, "occurred_at": occurred, "embed": _flag(raw.get("embed", True),
                                                                                  field_prefix + "embed")}

    def _write_perceptions(self, prepared: list[dict[str, Any]], *, single: bool = False) -> list[int]:
        rows = self._perception_rows(prepared)
        with self._db.write() as conn:
            return self._insert_perceptions(conn, rows, single=single)

    def _perception_rows(self, prepared: list[dict[str, Any]]) -> _PerceptionRows:
        """Everything a batch writes that needs no transaction: rows, vectors, payload summaries."""
        now = self.now()
        items = [self._new_memory(
            p["collection"], p["session_id"], "perception", p["ptype"], p["text"], p["context"], now,
            p["occurred_at"] if p["occurred_at"] is not None else now, embed=p["embed"],
            context_json=p["context_json"]) for p in prepared]
        payloads = {i: (p["blob"], summarize_payload(decode_payload(p["blob"]), len(p["blob"])))
                    for i, p in enumerate(prepared) if p["blob"] is not None}
        to_embed = [i for i, p in enumerate(prepared) if p["embed"]]
        embedded = self._embeddings.embed([prepared[i]["text"] for i in to_embed])
        model_id = self._embeddings.model_id
        vectors = [] if embedded is None else [(i, embedded[row]) for row, i in enumerate(to_embed)]
        return _PerceptionRows(items, payloads, model_id, vectors)

    def _insert_perceptions(self, conn: Any, rows: _PerceptionRows, later: Later | None = None, *,
                            single: bool = False) -> list[int]:
        """``single``: one save_perception, a single write like learn (its vector goes through
        put_embedding, which builds an HNSW index a bulk load left unbuilt; a batch of
        save_perceptions, of any size, leaves it to the end of the load or reindex)."""
        checked: set[tuple[str | None, str]] = set()
        for i, m in enumerate(rows.items):
            if (m.session_id, m.collection) not in checked:
                checked.add((m.session_id, m.collection))
                # a batch names the record whose session has ended (or gone) since it was prepared
                self._check_session_open(conn, m.session_id, m.collection,
                                         field="session_id" if single else f"records[{i}].session_id")
        self._flush_access(conn=conn)
        # One statement per kind of row for the whole batch (a round trip each on PostgreSQL).
        ids = self._db.insert_memories(conn, rows.items, later=later)
        for i, (blob, summary) in rows.payloads.items():
            self._db.insert_payload(conn, ids[i], blob, summary)
        if rows.vectors and rows.model_id is not None:
            vectors = [(ids[i], rows.items[i].collection, rows.model_id, vector) for i, vector in rows.vectors]
            if single:
                self._db.put_embedding(conn, *vectors[0])
            else:
                self._db.put_embeddings(conn, vectors)
        return ids

    # -- recall ----------------------------------------------------------------------

    def recall(
        self,
        query: str = "",
        collection: str | None = None,
        n: int = 5,
        min_confidence: float = 0.3,
        session_id: str | None = None,
        context_filter: dict[str, Any] | str | None = None,
        spatial_sort: dict[str, Any] | str | None = None,
        since: float | str | None = None,
        until: float | str | None = None,
        min_relevance: float | None = None,
        query_vector: Sequence[float] | None = None,
    ) -> dict[str, Any]:
        """Most relevant memories: hybrid BM25 + vectors, exact filters, optional nearest-first order.

        Each hit of a query carries ``relevance`` in [0, 1] (an estimated probability that it
        answers the query); hits below ``min_relevance`` (default
        robotmem.search.relevance.DEFAULT_MIN_RELEVANCE) are left out, so a query with no
        answer returns nothing. ``min_relevance=0`` returns every candidate.
        ``query_vector``: the query's embedding when the caller already has it (the active
        model's dimension, finite); the query text is still used for full text.
        """
        # With a session: its collection (an unknown id is a typo to report, not_found, not an
        # episode that remembers nothing; another collection named with it is an error, as in learn).
        req = build_request(
            query=query, collection=self._collection_for(collection, session_id), n=n,
            min_confidence=min_confidence, session_id=session_id, context_filter=context_filter,
            spatial_sort=spatial_sort, since=since, until=until, min_relevance=min_relevance,
            dialect=self._db.kind,
        )
        if 0 < req.min_confidence < self.config.archive_floor:
            # Below the archive floor a memory is as good as archived, swept or not yet.
            req = dataclasses.replace(req, min_confidence=self.config.archive_floor)
        vector = self._query_vector(req.query, query_vector)
        result = self._engine.recall(req, self.now(), vector, self._embeddings.model_id if vector is not None else None)
        self._note_access(r["id"] for r in result["results"])
        return result

    def outcome_stats(
        self,
        group_by: str,
        query: str = "",
        collection: str | None = None,
        context_filter: dict[str, Any] | str | None = None,
        spatial_sort: dict[str, Any] | str | None = None,
        k: int | None = None,
        bins: int | list[float] | None = None,
        success_threshold: float = 0.5,
        since: float | str | None = None,
        until: float | str | None = None,
    ) -> dict[str, Any]:
        """Per value of ``group_by``: how often did it succeed, over every matching memory (exact, not top n)."""
        from .search.outcome_request import build_outcome_request
        from .search.outcomes import compute_outcome_stats

        req = build_outcome_request(
            group_by=group_by, collection=validation.collection(collection, self.collection), query=query,
            context_filter=context_filter, spatial_sort=spatial_sort, k=k, bins=bins,
            success_threshold=success_threshold, since=since, until=until,
        )
        with self._db.read() as conn:
            return compute_outcome_stats(conn, req, columns=self._leaf_columns)

    def _query_vector(self, query: str, given: Sequence[float] | None) -> "np.ndarray | None":
        if given is not None:
            dim = self._embeddings.dim
            if dim is None:
                raise ValidationError("query_vector needs an embedding model to compare with; this store has none",
                                      field="query_vector")
            return validation.query_vector(given, dim)
        return self._embeddings.embed_query(query, wait=False) if query else None

    # -- forget / update -------------------------------------------------------------

    def forget(self, memory_id: int, reason: str) -> dict[str, Any]:
        """Retract a memory: it leaves every search path; its row stays with the reason."""
        mid = validation.memory_id(memory_id)
        why = validation.reason(reason)
        now = self.now()
        with self._db.write() as conn:
            row = self._require_row(conn, mid)
            if row["status"] == "forgotten":
                return {"memory_id": mid, "status": "already_forgotten", "reason": row["forget_reason"]}
            self._db.mark_forgotten(conn, mid, why, now)
        return {"memory_id": mid, "status": "forgotten", "reason": why}

    def purge_perceptions(self, before: float | str, collection: str | None = None,
                          session_id: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete for good the perceptions that occurred before ``before`` (epoch seconds or ISO
        8601), of every collection, or of ``collection`` and/or ``session_id`` only: every row of
        each (payload, vector, full-text entry, context leaves, points). Facts, episode summaries,
        memories linked by a merge and sessions stay (robotmem.store.purge). Deleted a page of
        memories per write transaction: a purge stopped half-way leaves a consistent store, and
        running it again finishes it. ``dry_run``: only count what would go (``would_purge``)."""
        cutoff = validation.timestamp(before, "before")
        if cutoff is None:
            raise ValidationError("before is required: epoch seconds or ISO 8601 text", field="before")
        collections = self._purge_collections(collection, session_id)
        sid = None if session_id is None else validation.session_id(session_id)
        found: dict[str, int] = {}
        for coll in collections:
            scope = PurgeScope(coll, cutoff, sid)
            if dry_run:
                with self._db.read() as conn:
                    found[coll] = self._db.count_purgeable(conn, scope)
            else:
                found[coll] = self._purge_scope(scope)
        total = sum(found.values())
        if total and not dry_run:
            self._db.after_purge()
        return {"purged": 0 if dry_run else total, "would_purge": total if dry_run else 0, "dry_run": dry_run,
                "before": cutoff, "collections": {c: n for c, n in found.items() if n}}

    def _purge_collections(self, collection: Any, session_id: Any) -> list[str]:
        """The collections a purge walks: the session's, the one named (which must hold a memory:
        a misspelt name would purge nothing silently), or every one."""
        if session_id is not None:
            return [self._collection_for(collection, session_id)]
        if collection is not None:
            coll = validation.collection(collection, self.collection)
            with self._db.read() as conn:
                if not has_collection(conn, coll):
                    raise NotFoundError(f"no memory is in collection {coll!r}", field="collection")
            return [coll]
        with self._db.read() as conn:
            return sorted(self._db.store_stats(conn, None)["collections"])

    def _purge_scope(self, scope: PurgeScope) -> int:
        limit = purge.PAGE_IDS  # read here, not bound at import: tests make it small
        total = 0
        while True:
            page = self._db.run_write(lambda conn: self._db.purge_page(conn, scope, limit))
            total += page.taken
            if page.taken < limit:
                return total
            scope = scope._replace(after=page.last)

    def update(self, memory_id: int, new_content: str, context: dict[str, Any] | str | None = None) -> dict[str, Any]:
        """Correct a memory's text (and, when given, replace its context); every index follows."""
        mid = validation.memory_id(memory_id)
        validation.text(new_content, "new_content", max_len=DESCRIPTION_MAX_CHARS)
        given = validation.json_object(context, "context")  # absent, "" and null keep the context
        new_context = parse_context(given) if given is not None else None
        with self._db.read() as conn:
            row = _refuse_retired(self._require_row(conn, mid))
            text = (validation.insight(new_content, "new_content") if row["type"] == "fact"
                    else validation.description(new_content, "new_content"))
            # Checked here too, before embedding, so a refused update costs no model call.
            self._new_hash(conn, row, text, new_context)
        collection = row["collection"]
        vectors = self._embeddings.embed([text])
        now = self.now()
        with self._db.write() as conn:
            # Again under the row's lock: while the text was embedded another process may have
            # forgotten the memory, consolidation superseded it, another update changed the context
            # this one keeps, or a learn stored this fact. The answer is a serial call's.
            self._db.lock_memory(conn, mid)
            row = _refuse_retired(self._require_row(conn, mid))
            ctx, digest = self._new_hash(conn, row, text, new_context)
            stored = self._with_session_outcome(conn, row["session_id"], ctx)
            self._db.replace_content(
                conn, mid, content=text, search_text=memory_search_text(text, stored), context=stored,
                content_hash=digest, protected=_is_protected(stored), now=now,
            )
            if vectors is not None:
                self._store_vector(conn, mid, collection, vectors, 0)
            else:
                # The old vector describes the old text: it must not answer queries any more.
                self._db.delete_embedding(conn, mid)
        return {"memory_id": mid, "status": "updated"}

    def _new_hash(self, conn: Any, row: dict[str, Any], text: str,
                  new_context: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
        """(the context an update of ``row`` to ``text`` stores, before the session's outcome is
        added, and its content hash); ConflictError when a fact would become a second live copy."""
        ctx = new_context if new_context is not None else self._caller_context(conn, row)
        # The hash is that of the context the caller gave, as end_session keeps it
        # (consolidation/writes.py attach_outcome): a later learn of this text and context
        # is a duplicate.
        digests = content_hashes(text, ctx)
        if row["type"] == "fact":
            self._refuse_second_live_fact(conn, row["id"], row["collection"], digests)
        return ctx, digests[0]

    def _refuse_second_live_fact(self, conn: Any, memory_id: int, collection: str,
                                 digests: tuple[str, ...]) -> None:
        """A collection keeps one live fact per text + context (``learn`` reinforces a repeat): an
        update that would make ``memory_id`` a second copy of another live fact is refused, on
        SQLite as on PostgreSQL (whose unique index would refuse it anyway)."""
        for digest in digests:
            existing = self._db.find_duplicate(conn, collection, digest)
            if existing is not None and existing != memory_id:
                raise ConflictError(
                    f"new_content: memory {existing} already says this (same text and context in collection "
                    f"{collection!r}); memory {memory_id} was not changed: forget it, or update memory {existing}",
                    field="new_content",
                )

    def _caller_context(self, conn: Any, row: Any) -> dict[str, Any]:
        """The context ``learn`` was given for this memory, as far as the stored one tells: without
        the ``episode.outcome`` end_session wrote into it (the reverse of ``_with_session_outcome``).

        The outcome is taken out only when it is the session's score. Which of "no episode key" and
        an empty ``episode`` the caller gave (both end as ``{"episode": {"outcome": s}}``), and
        whether the caller wrote that very outcome itself, is told by the memory's hash of its
        current text; when no candidate gives that hash (a hash of an earlier version), the
        outcome is taken out and an ``episode`` left empty by that is dropped.
        """
        stored: dict[str, Any] = parse_context(row["context"])
        before = contexts_before_outcome(stored) if row["session_id"] is not None else []
        if not before:
            return stored
        session = self._db.get_session(conn, row["session_id"])
        score = None if session is None else session["outcome_score"]
        outcome = stored["episode"]["outcome"]
        if score is None or isinstance(outcome, bool) or not isinstance(outcome, (int, float)) \
                or float(outcome) != float(score):
            return stored
        # No episode before an empty one: the default, when no candidate gives the memory's hash.
        candidates: list[dict[str, Any]] = [*reversed(before), stored]
        held = conn.execute("SELECT content_hash FROM memories WHERE id = ?", (row["id"],)).fetchone()
        for candidate in candidates:
            if held is not None and holds_hash(held[0], row["content"], candidate):
                return candidate
        return candidates[0]

    def _with_session_outcome(self, conn: Any, session_id: str | None, context: dict[str, Any]) -> dict[str, Any]:
        """``context`` plus the ``episode.outcome`` end_session wrote into the memory, which a
        new context must not drop.

        ``episode.outcome`` is the one key robotmem itself writes into a memory's context
        (consolidation keeps its own fields in columns). Without this, correcting a typo with
        ``update(id, text, context)`` erased an ended episode's score and ``outcome_stats`` lost
        the memory. The score is taken from the session (what end_session wrote, and writes
        again on ``consolidate``), under the same rule as attach_outcome: a context that gives
        ``episode.outcome`` itself keeps its value, one whose ``episode`` is not an object is
        left alone. The session's row is held first, as end_session holds it, so an update
        and an end_session of the same episode cannot interleave.
        """
        if session_id is None:
            return context
        self._db.lock_session(conn, session_id)
        session = self._db.get_session(conn, session_id)
        score = None if session is None else session["outcome_score"]
        episode = context.get("episode", {})
        if score is None or not isinstance(episode, dict) or "outcome" in episode:
            return context
        return {**context, "episode": {**episode, "outcome": float(score)}}

    # -- claims ----------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold ``name`` against every other process using this store (on any host, for a
        PostgreSQL store) for the duration of the block; raise ConflictError (field ``name``),
        without waiting, when another holds it. The hold ends with the block, or with its
        process however that ends (robotmem.store.claims): a replay holds its recording so
        that a second replay of it keeps out of the sessions it is writing, while a session a
        killed replay left open is free to rewrite."""
        name = validation.text(name, "name", max_len=CLAIM_NAME_MAX_CHARS)
        claimed = self._db.claim(name)
        if isinstance(claimed, str):
            raise ConflictError(f"{name!r} is held by {claimed} using this store", field="name")
        try:
            yield
        finally:
            claimed()

    # -- sessions --------------------------------------------------------------------

    def start_session(
        self, collection: str | None = None, context: dict[str, Any] | str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Open an episode; pass ``session_id`` to make the call idempotent (replay does)."""
        coll = validation.collection(collection, self.collection)
        ctx = parse_context(context)
        sid = validation.session_id(session_id) if session_id is not None else "ses_" + uuid.uuid4().hex[:16]
        now = self.now()
        with self._db.write() as conn:
            # The insert decides, not a read before it: on PostgreSQL two processes starting one id
            # at once both read no session, and both were told "started".
            if self._db.insert_session(conn, sid, coll, canonical_json(ctx), now):
                return {"session_id": sid, "collection": coll, "started_at": now, "status": "started"}
            existing = self._db.get_session(conn, sid)
        assert existing is not None  # sessions are never deleted
        if existing["collection"] != coll:
            raise ConflictError(f"session {sid} belongs to collection {existing['collection']!r}", field="session_id")
        return {"session_id": sid, "collection": coll, "started_at": existing["started_at"], "status": "exists"}

    def end_session(self, session_id: str, outcome_score: float | None = None) -> dict[str, Any]:
        """Close an episode, record its outcome and consolidate what it learned."""
        sid = validation.session_id(session_id)
        score = validation.optional_score(outcome_score)
        # Imported on first use: consolidation pulls in scipy, which most commands never need.
        from .consolidation import Settings, end_session

        settings = Settings.of(self.config, self.embedder)
        return end_session(self._db, self.recall_engine, settings, sid, score, self.now())

    def consolidate(
        self, collection: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Offline: consolidate every ended session (oldest first), then decay; counts summed."""
        coll = None if collection is None else validation.collection(collection, self.collection)
        validation.optional_callable(progress, "progress", "taking (done, total)")
        from .consolidation import Settings, consolidate_ended

        settings = Settings.of(self.config, self.embedder)
        return consolidate_ended(self._db, self.recall_engine, settings, coll, self.now(), progress=progress)

    def get_session(self, session_id: str) -> dict[str, Any]:
        sid = validation.session_id(session_id)
        with self._db.read() as conn:
            session = self._db.get_session(conn, sid)
        if session is None:
            raise NotFoundError(f"no session {sid!r}", field="session_id")
        return session

    def list_sessions(
        self, collection: str | None = None, status: str | None = None, limit: int | None = None,
        *, after: Sequence[Any] | None = None, robot: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions, newest first (``started_at``, then the id). ``limit=None`` (the default)
        lists every one: a silent cap let callers that never passed a limit (a follower, a
        replay) miss sessions without knowing; a caller that wants a page (the CLI, the web
        view) asks for one. ``after``: ``(started_at, session_id)`` of the last session of the
        page before; the sessions after it in that order (the next page), however many started
        since. ``robot``: only the sessions whose context's ``robot.id`` is that text."""
        if status not in (None, "open", "ended"):
            raise ValidationError("status must be 'open' or 'ended'", field="status")
        coll = None if collection is None else validation.collection(collection, self.collection)
        # The upper bound is SQL's: LIMIT takes a 64-bit integer on both backends.
        count = None if limit is None else validation.integer(limit, "limit", low=1, high=validation.INT64_MAX)
        cursor = None if after is None else _session_cursor(after)
        robot_id = None if robot is None else _robot_id(robot)
        with self._db.read() as conn:
            return self._db.list_sessions(conn, coll, status, count, cursor, robot_id)

    def session_timeline(self, session_id: str) -> dict[str, Any]:
        session = self.get_session(session_id)
        now = self.now()
        with self._db.read() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM memories WHERE session_id = ? ORDER BY occurred_at, id", (session["session_id"],))]
            records = self._records(conn, ids, now)
        return {"session": session, "memories": records}

    def _records(self, conn: Any, memory_ids: list[int], now: float) -> list[dict[str, Any]]:
        """Full records in the order of ``memory_ids``, read a batch per statement: an episode of
        20,000 memories read one statement per memory spent most of its time on the statements."""
        by_id: dict[int, dict[str, Any]] = {}
        for first in range(0, len(memory_ids), _RECORDS_PER_STATEMENT):
            for row in self._db.fetch_rows(conn, memory_ids[first:first + _RECORDS_PER_STATEMENT]):
                by_id[row[0]] = row_to_record(row, now, self._half_life_s, full=True)
        return [by_id[i] for i in memory_ids]

    def session_overviews(self, session_ids: Sequence[str], *, counts: bool = True) -> dict[str, dict[str, Any]]:
        """What a list of episodes shows of each, without reading their records.

        ``{session_id: {"facts", "perceptions", "summary"}}``: live counts of the episode's
        active facts and perceptions, and its summary record (the last active procedural
        perception in time order, which a replay or a bridge writes; None without one). An
        unknown id gets zeros and None. A few aggregate statements however long the episodes;
        the counts read each record's type and status (about 25 ms at 100,000 records), so
        ``counts=False`` leaves them out (None): the summary is found in an index of its own.
        """
        if isinstance(session_ids, str) or not isinstance(session_ids, Sequence):
            raise ValidationError("session_ids must be a list of session ids", field="session_ids")
        sids = [validation.session_id(s, "session_ids") for s in session_ids]
        with_counts = _flag(counts, "counts")
        now = self.now()
        with self._db.read() as conn:
            found = self._db.session_overviews(conn, sids, with_counts)
            summary_ids = [o["summary_id"] for o in found.values() if o["summary_id"] is not None]
            summaries = dict(zip(summary_ids, self._records(conn, summary_ids, now)))
        return {sid: {"facts": o["facts"], "perceptions": o["perceptions"], "summary": summaries.get(o["summary_id"])}
                for sid, o in found.items()}

    # -- reads -----------------------------------------------------------------------

    def get(self, memory_id: int) -> dict[str, Any]:
        """One memory by id, whatever its status (forgotten and superseded ones included)."""
        mid = validation.memory_id(memory_id)
        with self._db.read() as conn:
            return self._record(conn, mid, self.now())

    def get_data(self, memory_id: int, *, as_numpy: bool = False) -> Any:
        """The full perception payload of one memory (arrays as lists, or numpy arrays)."""
        mid = validation.memory_id(memory_id)
        with self._db.read() as conn:
            self._require_row(conn, mid)
            row = conn.execute("SELECT data FROM payloads WHERE memory_id = ?", (mid,)).fetchone()
        if row is None:
            return None
        value = decode_payload(row[0])
        return value if as_numpy else to_json_safe(value)

    def get_data_many(self, memory_ids: Iterable[int], *, as_numpy: bool = False) -> dict[int, Any]:
        """The payloads of many memories, ``{memory_id: payload}`` (None for a memory without one),
        read a batch per statement: an episode page of 20,000 perceptions spent most of its time
        on one statement per payload. An id that names no memory is a NotFoundError, as in
        :meth:`get_data`, and nothing is returned."""
        if isinstance(memory_ids, (str, bytes, Mapping)) or not isinstance(memory_ids, Iterable):
            raise ValidationError("memory_ids must be a list of memory ids", field="memory_ids")
        mids = list(dict.fromkeys(validation.memory_id(m, f"memory_ids[{i}]") for i, m in enumerate(memory_ids)))
        blobs: dict[int, bytes | None] = {}
        with self._db.read() as conn:
            for first in range(0, len(mids), _RECORDS_PER_STATEMENT):
                blobs.update(self._db.fetch_payloads(conn, mids[first:first + _RECORDS_PER_STATEMENT]))
        missing = next((m for m in mids if m not in blobs), None)
        if missing is not None:
            raise NotFoundError(f"no memory with id {missing}", field="memory_ids")
        decoded = {m: None if (blob := blobs[m]) is None else decode_payload(blob) for m in mids}
        return decoded if as_numpy else {m: to_json_safe(v) for m, v in decoded.items()}

    def stats(self, collection: str | None = None) -> dict[str, Any]:
        coll = None if collection is None else validation.collection(collection, self.collection)
        with self._db.read() as conn:
            result = self._db.store_stats(conn, coll)
            result["vector_indexes"] = self._snapshot_states(conn, coll)
        result["path"] = self.location
        result["backend"] = self._db.kind
        result["embedding_model"] = self._embeddings.model_id if self._embeddings.available else None
        return result

    # -- bulk ------------------------------------------------------------------------

    def export(self, path: str | Path | TextIO) -> dict[str, int]:
        """Write everything as JSON Lines to ``path`` (replaced whole, never left cut short), or to an
        open text stream; ``{"sessions": n, "memories": m}`` written."""
        from .transfer import export_jsonl

        target = path if _is_stream(path, "write") else validation.file_path(path, "path")
        with self._db.read() as conn:
            return export_jsonl(self._db, conn, target)

    def import_(self, path: str | Path | TextIO, *, allow_incomplete: bool = False) -> dict[str, int]:
        """Import a file (or open text stream) ``export`` wrote. One cut short (without its end record,
        or holding fewer lines than it counts) is refused, unless ``allow_incomplete``."""
        from .transfer import import_jsonl

        allow = _flag(allow_incomplete, "allow_incomplete")
        source = path if _is_stream(path, "read") else validation.file_path(path, "path")
        counts = import_jsonl(self._db, source, self._embeddings, self.now(), self.config.max_payload_bytes,
                              allow_incomplete=allow)
        self.write_stale_vector_indexes()
        return counts

    def write_stale_vector_indexes(
            self, before_each: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """What a bulk load ends with (``import_``, ``robotmem replay``, a bulk writer's ``close``):
        on an embedded store the vector snapshot of each collection of the active model whose
        snapshot is missing (20,000+ vectors) or stale, unless another process is building it; on
        PostgreSQL the HNSW indexes a bulk load left unbuilt. Otherwise the first recall of every
        process loaded an exact mirror of the whole collection until a snapshot was published
        (1.9 GB of a server's memory at 1,000,000 memories). A fresh snapshot is left alone (a
        snapshot is stale past the changes a recalling process rebuilds it at:
        search.ann_index.is_stale). ``before_each`` is given each snapshot's state (``stats()``'s
        ``vector_indexes`` entry) before it is written: a build takes 19-36 s per million vectors, which
        a command-line tool should announce. What was written: ``[{collection, model_id, rows, seconds}]``."""
        from .search.ann_index import rebuild_stale

        if not isinstance(self._db, SqliteStore):
            return self._db.build_vector_indexes()
        model_id, dim = self._embeddings.model_id, self._embeddings.dim
        if model_id is None or dim is None:
            return []
        written: list[dict[str, Any]] = []
        try:
            with self._db.read() as conn:
                states = self._snapshot_states(conn, None)
            for state in states:
                if state["model_id"] == model_id and state["stale"] and not state["building"]:
                    if before_each is not None:
                        before_each(state)
                    report = rebuild_stale(self._db, state["collection"], model_id, dim, state["snapshot_seq"] or 0)
                    if report is not None:
                        written.append({"collection": report.collection, "model_id": report.model_id,
                                        "rows": report.rows, "seconds": round(report.seconds, 3)})
        except (OSError, RuntimeError) as exc:  # faiss raises RuntimeError when it cannot write the file
            # The load itself is stored and recall stays exact without the file: a load must not fail for it.
            log.warning("the vector snapshot could not be written (%s); recall loads an exact copy of the "
                        "collection's vectors until `robotmem reindex` writes it", exc)
        return written

    def reindex(self, *, everything: bool = False, replace_other_models: bool = False, batch_size: int = 64,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Embed, in batches, every searchable memory that has no vector; ``everything=True`` also
        re-embeds those with a vector of the active model (after a model file changed under the same
        id), ``replace_other_models=True`` those with a vector of another model (after switching
        models; without it they are kept and counted in ``kept_other_models``)."""
        from .transfer import reindex

        validation.optional_callable(progress, "progress", "taking (done, total)")
        if not self._embeddings.available:
            raise ConflictError("no embedding model is available; install it (see docs/embeddings.md)")
        result = reindex(self._db, self._embeddings, everything=everything, replace_other_models=replace_other_models,
                         batch_size=batch_size, progress=progress)
        result["vector_indexes"] = self.rebuild_vector_indexes()
        return result

    def rebuild_vector_indexes(self, *, force: bool = False, min_rows: int | None = None) -> list[dict[str, Any]]:
        """Write the memory-mapped vector index of every large collection whose index is missing or stale
        (PostgreSQL: build the HNSW indexes bulk loads left unbuilt, and rebuild those an older robotmem
        built with superseded and forgotten vectors; ``force``: rebuild them all)."""
        from .search.ann_index import MIN_ROWS, rebuild_indexes

        model_id, dim = self._embeddings.model_id, self._embeddings.dim
        if not isinstance(self._db, SqliteStore):
            return self._db.build_vector_indexes(force=force, stale=True)  # PostgreSQL's own HNSW indexes
        if model_id is None or dim is None:
            return []
        reports = rebuild_indexes(self._db, model_id, dim, force=force,
                                  min_rows=MIN_ROWS if min_rows is None else min_rows)
        prune_change_log(self._db)  # the new snapshots hold none of the rows before them
        return [{"collection": r.collection, "rows": r.rows, "seconds": round(r.seconds, 3)} for r in reports]

    # -- internals -------------------------------------------------------------------

    def _snapshot_states(self, conn: Any, collection: str | None) -> list[dict[str, Any]]:
        """The vector snapshots beside an embedded store, or the indexes PostgreSQL keeps itself."""
        from .search.ann_index import index_folder, snapshot_states

        if not isinstance(self._db, SqliteStore):
            return self._db.vector_index_states(conn, collection)
        return snapshot_states(conn, index_folder(self._db.path), collection)

    def _collection_for(self, collection: Any, session_id: Any, *, field_prefix: str = "") -> str:
        """``field_prefix``: "records[3]." when the fields are one record of a batch."""
        coll_field, sid_field = field_prefix + "collection", field_prefix + "session_id"
        if session_id is None:
            return validation.collection(collection, self.collection, coll_field)
        sid = validation.session_id(session_id, sid_field)
        with self._db.read() as conn:
            session = self._db.get_session(conn, sid)
        if session is None:
            raise NotFoundError(f"no session {sid!r}", field=sid_field)
        if (collection is not None
                and validation.collection(collection, self.collection, coll_field) != session["collection"]):
            raise ValidationError(
                f"{coll_field} {collection!r} differs from session {sid}'s collection {session['collection']!r}",
                field=coll_field,
            )
        return str(session["collection"])

    def _check_session_open(self, conn: Any, session_id: str | None, collection: str,
                            field: str = "session_id") -> None:
        if session_id is None:
            return
        session = self._db.get_session(conn, session_id)
        if session is None:
            raise NotFoundError(f"no session {session_id!r}", field=field)
        if session["status"] == "ended":
            raise ConflictError(f"session {session_id} has ended; start a new one", field=field)

    def _insert(
        self, conn: Any, collection: str, session_id: str | None, kind: str, ptype: str | None, text: str,
        ctx: dict[str, Any], now: float, occurred_at: float, *, embed: bool = True, context_json: str = "",
    ) -> int | None:
        """The new memory's id; None when a live fact with this text and context exists (facts only)."""
        self._flush_access(conn=conn)
        return self._db.insert_memory(conn, self._new_memory(collection, session_id, kind, ptype, text, ctx, now,
                                                             occurred_at, embed=embed, context_json=context_json))

    def _new_memory(
        self, collection: str, session_id: str | None, kind: str, ptype: str | None, text: str,
        ctx: dict[str, Any], now: float, occurred_at: float, *, embed: bool = True, context_json: str = "",
    ) -> NewMemory:
        """``context_json``: the context's canonical JSON when the caller has it already."""
        ctx_json = context_json or canonical_json(ctx)
        return NewMemory(
            collection=collection, session_id=session_id, type=kind, perception_type=ptype, content=text,
            search_text=memory_search_text(text, ctx), context=ctx, content_hash=content_hash(text, ctx, ctx_json),
            protected=_is_protected(ctx), confidence=self.config.initial_confidence, now=now, occurred_at=occurred_at,
            embed=embed, context_json=ctx_json,
        )

    def _store_vector(self, conn: Any, memory_id: int, collection: str, vectors: Any, row: int) -> None:
        model_id = self._embeddings.model_id
        if vectors is not None and model_id is not None:
            self._db.put_embedding(conn, memory_id, collection, model_id, vectors[row])

    def _require_row(self, conn: Any, memory_id: int) -> dict[str, Any]:
        row = self._db.fetch_row(conn, memory_id)
        if row is None:
            raise NotFoundError(f"no memory with id {memory_id}", field="memory_id")
        return dict(zip(HIT_COLUMNS, row))

    def _record(self, conn: Any, memory_id: int, now: float) -> dict[str, Any]:
        row = self._db.fetch_row(conn, memory_id)
        if row is None:
            raise NotFoundError(f"no memory with id {memory_id}", field="memory_id")
        return row_to_record(row, now, self._half_life_s, full=True)

    def _note_access(self, ids: Iterable[int]) -> None:
        with self._access_lock:
            for memory_id in ids:
                self._access[memory_id] = self._access.get(memory_id, 0) + 1
            due = len(self._access) >= self._access_flush_at
        if due:
            self._flush_access(force=False)

    def _keep_unwritten_access(self, pending: dict[int, int], *, back_off: bool) -> None:
        """Counts a flush could not write wait for the next; ``back_off``: a flush of their own
        failed, so the next is tried only when twice as many are waiting."""
        with self._access_lock:
            for k, v in pending.items():
                self._access[k] = self._access.get(k, 0) + v
            if back_off:
                self._access_flush_at = min(2 * self._access_flush_at, _ACCESS_PENDING_MAX)
            if len(self._access) >= _ACCESS_PENDING_MAX:
                log.warning("the store refuses access counts; %d are dropped", len(self._access))
                self._access = {}

    def _flush_access(self, conn: Any = None, force: bool = False) -> None:
        """Access counts are bookkeeping: written with the next write, never making a reader wait."""
        with self._access_lock:
            pending, self._access = self._access, {}
        if not pending:
            return
        try:
            if conn is not None:
                self._db.flush_access_counts(conn, pending, self.now())
                return
            with self._db.write(wait=force) as wconn:
                self._db.flush_access_counts(wconn, pending, self.now())
            self._access_flush_at = _ACCESS_FLUSH_EVERY
        except Exception as exc:
            if isinstance(exc, ReadOnlyStoreError):
                # Bookkeeping a read-only store cannot keep: nothing the caller asked for is lost.
                log.debug("access counts are not kept on a read-only store")
            elif force:
                log.warning("could not record %d access counts: %s", len(pending), exc)
            else:
                self._keep_unwritten_access(pending, back_off=conn is None)
            if conn is not None:
                # Inside the caller's write: on PostgreSQL the failed statement aborted the whole
                # transaction, and the write would fail on its own next statement with "current
                # transaction is aborted" instead of the cause (a read-only store, say).
                raise


@dataclasses.dataclass(slots=True)
class _PerceptionRows:
    items: list[NewMemory]
    #: record index -> (payload blob, its summary)
    payloads: dict[int, tuple[bytes, dict[str, Any]]]
    #: the embedding model's id (None without one)
    model_id: str | None
    #: (record index, vector) of the records embedded
    vectors: list[tuple[int, Any]]


class BulkWriter:
    """Batches of perceptions for a long load, each committed while the caller prepares the next.

    ``with mem.bulk_writer() as writer: writer.save_perceptions(batch)`` takes what
    ``Memory.save_perceptions`` takes, checks it at once (a ValidationError names the record and
    nothing of that batch is written) and returns the batch's ids. Each batch is one
    transaction on a connection of the writer's own; its commit, and on SQLite its leaf and
    full-text index statements, run on a worker thread while the caller's next batch is
    validated and embedded (robotmem.store.pipeline). A batch is stored once the next call,
    ``flush()`` or leaving the block returns; if its commit fails, that call raises
    StorageError: nothing of the failed batch is stored (its ids may be given out again), and
    the call writes nothing of its own batch. One exception on PostgreSQL: a connection lost
    during COMMIT whose outcome the server cannot tell afterwards raises a StorageError that is
    not ``transient`` and says so, since retrying might store the batch twice (docs/fleet.md).
    A batch after a lost connection runs on a new one. Other threads see a batch once it is committed.
    ``close()`` (leaving the block without an exception) ends a load that stored anything as an
    import ends: ``Memory.write_stale_vector_indexes`` (unless made with ``write_indexes=False``).
    Closing the Memory closes its writers first, storing their last batches without that.
    """

    def __init__(self, memory: Memory, writes: PipelinedWrites, *, write_indexes: bool = True) -> None:
        self._memory = memory
        self._writes = writes
        self._write_indexes = write_indexes
        self._loaded = False

    def save_perceptions(self, records: Sequence[dict[str, Any]]) -> list[int]:
        memory = self._memory
        rows = memory._perception_rows(memory._prepare_perceptions(records))
        with self._writes.batch() as (conn, later):
            ids = memory._insert_perceptions(conn, rows, later)
        self._loaded = self._loaded or bool(ids)
        return ids

    def flush(self) -> None:
        """Until every batch handed over is stored (raising a failed batch's StorageError)."""
        self._writes.wait()

    def close(self) -> None:
        """Store the last batch; then, after a load, write the vector indexes it left missing or stale,
        so that the next process's first recall does not load an exact mirror of the collection."""
        # Not closed already (by Memory.close, which leaves the indexes to the next load or process).
        loaded = self._write_indexes and self._loaded and self in self._memory._bulk_writers
        self._close()
        if loaded:
            self._memory.write_stale_vector_indexes()

    def _close(self) -> None:
        try:
            self._writes.close()
        finally:
            self._memory._bulk_writers.discard(self)

    def __enter__(self) -> BulkWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # a load that failed or was stopped: its batches handed over are stored, nothing more
            self._close()
