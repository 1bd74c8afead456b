"""The only place the pipeline talks to robotmem: sessions, bulk perceptions, learned facts.

In dry-run mode nothing is written; every would-be write is appended to ``plan`` instead
(existing sessions are still looked up, so a dry run shows what a real run would skip).

With a :class:`~bridges.pipeline.outbox.RetryPolicy` (the live bridge), every store call
goes through a :class:`~bridges.pipeline.outbox.WriteOutbox`: a busy or failing store
delays writes (bounded, counted) instead of losing them. Without one, a transient
StorageError (robotmem.errors.StorageError.transient: a lock, the disk, the connection)
propagates to the caller (replay: that recording stops and can be repeated).

Any other robotmem error while storing one record or note (a note too long, a context
robotmem refuses, a statement the database refuses for that record, ...) rejects that
record only: it is counted per topic as ``rejected`` (the first reason is logged once per
topic and kept in the topic's stats) and everything else goes on.

Sessions someone else owns (see ``attach_session``) can end under our feet: robotmem then
refuses writes into them. What the pipeline still had buffered for such a session is
written without a session, keeping ``episode.key`` (the session id, or a note's own key) and marked
``episode.after_session_end``, so nothing received is lost and
``recall(context_filter={"episode.key": ...})`` still finds it.
"""

from __future__ import annotations

import copy
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from robotmem.errors import (
    ConflictError,
    NotFoundError,
    RobotMemError,
    StorageError,
    ValidationError,
)

from .converters.base import Record
from .outbox import RetryPolicy, StoreOperation, WriteOutbox
from .stats import PipelineStats

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["RecordWriter"]

log = logging.getLogger("bridges.pipeline")

# The payload is large and uninteresting in a plan; show its shape instead.
_PLAN_DATA_KEYS = 12


class RecordWriter:
    def __init__(self, memory: Memory | None, stats: PipelineStats, *, dry_run: bool = False,
                 retry: RetryPolicy | None = None) -> None:
        self.memory = memory
        self.stats = stats
        self.dry_run = dry_run
        self.outbox = WriteOutbox(retry, stats) if retry is not None and not dry_run else None
        #: dry run: what would have been written, in order
        self.plan: list[dict[str, Any]] = []
        self._dry_ids = itertools.count(1)
        #: attached sessions (someone else owns them) -> whether their owner has ended them
        self._attached: dict[str, bool] = {}
        #: topics whose first rejection was logged (later ones are only counted)
        self._rejection_logged: set[str] = set()

    def session_info(self, session_id: str) -> dict[str, Any] | None:
        """The stored session (robotmem's ``get_session``), or None when there is no such session."""
        if self.memory is None:
            return None
        try:
            return dict(self._memory.get_session(session_id))
        except (NotFoundError, ValidationError):
            return None

    def session_status(self, session_id: str) -> str | None:
        """"open", "ended", or None when no such session exists."""
        info = self.session_info(session_id)
        return None if info is None else str(info["status"])

    def attach_session(self, session_id: str) -> None:
        """Records will go into a session someone else owns (and ends); see the module docstring."""
        self._attached[session_id] = False
        if self.dry_run:
            self.plan.append({"action": "attach_episode", "session_id": session_id})

    def release_session(self, session_id: str) -> None:
        """The episode attached to ``session_id`` is over: its owner keeps the session open."""
        if self.dry_run:
            self.plan.append({"action": "release_episode", "session_id": session_id})
        # after the session's last records (they may still wait in the outbox)
        self._perform(f"releasing session {session_id}", functools.partial(self._attached.pop, session_id, None))

    @property
    def pending_records(self) -> int:
        """Records waiting for the store to take them again (see outbox.py)."""
        return self.outbox.pending_records if self.outbox is not None else 0

    @property
    def pending_bytes(self) -> int:
        """Their approximate bytes (sizes.approx_bytes)."""
        return self.outbox.held_bytes if self.outbox is not None else 0

    def retry_due(self) -> None:
        """Try held writes again when their backoff has passed."""
        if self.outbox is not None:
            self.outbox.pump()

    @property
    def _memory(self) -> Memory:
        """The store; a dry run has none and never writes."""
        assert self.memory is not None, "a dry run writes nothing"
        return self.memory

    def _perform(self, what: str, run: Callable[[], Any], records: list[tuple[str, Any]] | None = None) -> None:
        """Run a store call now, or in order through the outbox."""
        if self.outbox is None:
            run()
        else:
            self.outbox.submit(StoreOperation(what, run, records if records is not None else []))

    def start_session(self, collection: str, context: dict[str, Any], session_id: str | None) -> str:
        if self.dry_run:
            sid = session_id or f"dry_run_{next(self._dry_ids)}"
            self.plan.append({"action": "start_episode", "session_id": sid, "collection": collection, "context": context})
            return sid
        if self.outbox is None:
            result = self._memory.start_session(collection=collection, context=context, session_id=session_id)
            return str(result["session_id"])
        # The outbox may run it later: choose the id now (robotmem's form; starting is idempotent).
        sid = session_id or "ses_" + uuid.uuid4().hex[:16]
        self._perform(f"starting session {sid}", functools.partial(
            self._memory.start_session, collection=collection, context=context, session_id=sid))
        return sid

    def skip_session(self, session_id: str) -> None:
        """An episode that is already stored; only a dry run's plan mentions it."""
        if self.dry_run:
            self.plan.append({"action": "skip_episode", "session_id": session_id, "reason": "already stored"})

    def forget_session_records(self, session_id: str) -> int:
        """Forget what a crashed run wrote into an open session, so it can be written again whole."""
        if self.dry_run:
            self.plan.append({"action": "rewrite_open_episode", "session_id": session_id})
            return 0
        timeline = self._memory.session_timeline(session_id)
        forgotten = 0
        for record in timeline["memories"]:
            if record.get("status", "active") != "forgotten":
                self._memory.forget(record["id"], reason="replay: rewriting an episode a previous run left open")
                forgotten += 1
        return forgotten

    def write(self, records: list[tuple[str, Record]]) -> None:
        """Write (topic, record) pairs with one bulk call (one transaction)."""
        if not records:
            return
        if self.dry_run:
            self.plan.extend(_planned(topic, record) for topic, record in records)
            self._count_written(records)
            return
        batch = list(records)  # the outbox's copy: a partial write removes what it wrote
        self._perform(f"writing {len(batch)} records", functools.partial(self._write_now, batch), batch)

    def _write_now(self, batch: list[tuple[str, Record]]) -> None:
        started = time.perf_counter()
        try:
            self._save(batch)
        except RobotMemError as exc:
            if _retry_later(exc):
                raise
            self._write_one_by_one(batch, exc)
            return
        finally:
            self._note_write(time.perf_counter() - started)
        self._count_written(batch)

    def _count_written(self, records: list[tuple[str, Record]]) -> None:
        for topic, _ in records:
            self.stats.topic(topic).records += 1
        self.stats.records_written += len(records)

    def _save(self, records: list[tuple[str, Record]]) -> None:
        """One bulk call; records for an attached session its owner has ended go without it."""
        batch = [self._detached_if_ended(record) for _, record in records]
        try:
            self._memory.save_perceptions(batch)
        except ConflictError:
            if not self._notice_ended_sessions(batch):
                raise
            batch = [self._detached_if_ended(record) for record in batch]
            self._memory.save_perceptions(batch)
        self.stats.records_after_session_end += sum(
            1 for (_, original), written in zip(records, batch) if written is not original)

    def _notice_ended_sessions(self, records: list[Record]) -> bool:
        """Robotmem refused a write: did the owner of an attached session end it? (True: retry)"""
        noticed = False
        for session_id in {r.get("session_id") for r in records}:
            if (isinstance(session_id, str) and self._attached.get(session_id) is False
                    and self.session_status(session_id) != "open"):
                self._attached[session_id] = True
                log.info("session %s was ended by its owner; the rest of its episode is stored without it",
                         session_id)
                noticed = True
        return noticed

    def _detached_if_ended(self, record: Record) -> Record:
        session_id = record.get("session_id")
        if not (isinstance(session_id, str) and self._attached.get(session_id)):
            return record
        detached = dict(record, session_id=None, metadata=copy.deepcopy(record.get("metadata") or {}))
        episode = detached["metadata"].setdefault("episode", {})
        # A note's own episode.key is kept, as inside a normal episode (pipeline._on_learn); the
        # pipeline gave every other record the session id as its key already.
        episode.setdefault("key", session_id)
        episode["after_session_end"] = True
        return detached

    def _write_one_by_one(self, batch: list[tuple[str, Record]], first_error: RobotMemError) -> None:
        """One record was rejected: write the others, count and log the rejected ones.

        Each record leaves ``batch`` once handled, so after a StorageError a retry goes on
        with the rest instead of writing the first ones twice."""
        log.info("bulk write rejected (%s: %s); retrying record by record", first_error.field, first_error.message)
        while batch:
            topic, record = batch[0]
            try:
                self._save([(topic, record)])
            except RobotMemError as exc:
                if _retry_later(exc):
                    raise
                self._reject(topic, exc)
            else:
                self._count_written([(topic, record)])
            batch.pop(0)

    def _reject(self, topic: str, exc: RobotMemError) -> None:
        """Robotmem refused one record or note: count it; log the reason once per topic."""
        stats = self.stats.topic(topic)
        stats.rejected += 1
        self.stats.records_rejected += 1
        reason = f"{exc.message} (field {exc.field})" if exc.field else exc.message
        if not stats.rejected_reason:
            stats.rejected_reason = reason
        if topic not in self._rejection_logged:
            self._rejection_logged.add(topic)
            log.warning("%s: record rejected by robotmem: %s; further rejections on this topic are only counted",
                        topic, reason)

    def _note_write(self, seconds: float) -> None:
        self.stats.writes += 1
        self.stats.last_write_s = seconds
        self.stats.max_write_s = max(self.stats.max_write_s, seconds)

    def learn(self, topic: str, insight: str, context: dict[str, Any], collection: str, session_id: str | None,
              once_key: str | None = None, occurred_at: float | None = None) -> None:
        """Store a note. With ``once_key`` (replay: a note outside any episode) the note's context
        carries ``source.note_key = once_key`` and a note already stored with it is skipped, so a
        second replay does not reinforce it (robotmem's learn would)."""
        if self.dry_run:
            if once_key is not None and self._note_stored(once_key, collection):
                self.plan.append({"action": "skip_note", "topic": topic, "insight": insight, "reason": "already stored"})
                self.stats.topic(topic).already_stored += 1
                return
            self.plan.append({"action": "learn", "topic": topic, "insight": insight, "session_id": session_id,
                              "occurred_at": occurred_at})
            self._count_learned(topic)
            return
        self._perform(f"learning a note from {topic}",
                      functools.partial(self._learn_now, topic, insight, context, collection, session_id, once_key,
                                        occurred_at),
                      [(topic, insight)])

    def skip_note(self, topic: str, insight: str) -> None:
        """A note outside any episode that is stored already, inside an episode of a replay of the
        same recording with other options (the pipeline's ``stored_until_ns``)."""
        self.stats.topic(topic).already_stored += 1
        if self.dry_run:
            self.plan.append({"action": "skip_note", "topic": topic, "insight": insight, "reason": "already stored"})

    def _note_stored(self, once_key: str, collection: str) -> bool:
        """Whether a note keyed ``once_key`` is stored (an exact filter, not a search)."""
        if self.memory is None:
            return False
        found = self._memory.recall(query="", collection=collection, n=1, min_confidence=0.0,
                                   context_filter={"source.note_key": once_key})
        return bool(found["results"])

    def _learn_now(self, topic: str, insight: str, context: dict[str, Any], collection: str,
                   session_id: str | None, once_key: str | None = None, occurred_at: float | None = None) -> None:
        try:
            if once_key is not None and self._note_stored(once_key, collection):
                self.stats.topic(topic).already_stored += 1
                return
            self._learn_checked(topic, insight, context, collection, session_id, occurred_at)
        except RobotMemError as exc:
            if _retry_later(exc):
                raise
            self._reject(topic, exc)

    def _learn_checked(self, topic: str, insight: str, context: dict[str, Any], collection: str,
                       session_id: str | None, occurred_at: float | None) -> None:
        note = self._detached_if_ended({"session_id": session_id, "metadata": context})
        try:
            self._memory.learn(insight, context=note["metadata"], collection=collection, session_id=note["session_id"],
                              occurred_at=occurred_at)
        except ConflictError:
            if not self._notice_ended_sessions([note]):
                raise
            note = self._detached_if_ended(note)
            self._memory.learn(insight, context=note["metadata"], collection=collection, session_id=None,
                              occurred_at=occurred_at)
        if note["session_id"] != session_id:
            self.stats.records_after_session_end += 1
        self._count_learned(topic)

    def _count_learned(self, topic: str) -> None:
        self.stats.topic(topic).records += 1
        self.stats.facts_learned += 1

    def end_session(self, session_id: str, score: float | None) -> None:
        if self.dry_run:
            self.plan.append({"action": "end_episode", "session_id": session_id, "outcome_score": score})
            return
        self._perform(f"ending session {session_id}",
                      functools.partial(self._memory.end_session, session_id, outcome_score=score))

    def drain(self) -> None:
        """Write everything handed over now (held writes are tried again at once)."""
        if self.outbox is not None:
            self.outbox.pump(force=True)

    def abandon(self) -> None:
        """Give up after a failure the caller reports (replay: the recording failed).

        Writes here run in the caller's thread, so nothing is left running; a subclass with a
        worker stops it."""

    def close(self) -> None:
        """Write what is pending (held writes: retried for a while, then dropped and counted)."""
        if self.outbox is not None:
            self.outbox.close()


def _planned(topic: str, record: Record) -> dict[str, Any]:
    data = record.get("data")
    shape = sorted(data)[:_PLAN_DATA_KEYS] if isinstance(data, dict) else type(data).__name__
    return {
        "action": "perception",
        "topic": topic,
        "session_id": record.get("session_id"),
        "perception_type": record.get("perception_type"),
        "description": record.get("description"),
        "embed": record.get("embed", True),
        "data_fields": shape,
        "metadata": record.get("metadata"),
    }


def _retry_later(exc: RobotMemError) -> bool:
    """A store failure the same call may get past later; any other robotmem error (a non-transient
    StorageError too: the database refuses that statement and would again) refuses what was written."""
    return isinstance(exc, StorageError) and exc.transient
