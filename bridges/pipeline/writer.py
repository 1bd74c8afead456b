"""The only place the pipeline talks to robotmem: sessions, bulk perceptions, learned facts.

In dry-run mode nothing is written; every would-be write is appended to ``plan`` instead
(existing sessions are still looked up, so a dry run shows what a real run would skip).
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

from robotmem.errors import NotFoundError, ValidationError

from .converters.base import Record
from .stats import PipelineStats

__all__ = ["RecordWriter"]

log = logging.getLogger("bridges.pipeline")

# The payload is large and uninteresting in a plan; show its shape instead.
_PLAN_DATA_KEYS = 12


class RecordWriter:
    def __init__(self, memory: Any, stats: PipelineStats, *, dry_run: bool = False) -> None:
        self.memory = memory
        self.stats = stats
        self.dry_run = dry_run
        #: dry run: what would have been written, in order
        self.plan: list[dict[str, Any]] = []
        self._dry_ids = itertools.count(1)

    def session_status(self, session_id: str) -> str | None:
        """"open", "ended", or None when no such session exists."""
        if self.memory is None:
            return None
        try:
            return str(self.memory.get_session(session_id)["status"])
        except NotFoundError:
            return None

    def start_session(self, collection: str, context: dict[str, Any], session_id: str | None) -> str:
        if self.dry_run:
            sid = session_id or f"dry_run_{next(self._dry_ids)}"
            self.plan.append({"action": "start_episode", "session_id": sid, "collection": collection, "context": context})
            return sid
        result = self.memory.start_session(collection=collection, context=context, session_id=session_id)
        return str(result["session_id"])

    def skip_session(self, session_id: str) -> None:
        """An episode that is already stored; only a dry run's plan mentions it."""
        if self.dry_run:
            self.plan.append({"action": "skip_episode", "session_id": session_id, "reason": "already stored"})

    def forget_session_records(self, session_id: str) -> int:
        """Forget what a crashed run wrote into an open session, so it can be written again whole."""
        if self.dry_run:
            self.plan.append({"action": "rewrite_open_episode", "session_id": session_id})
            return 0
        timeline = self.memory.session_timeline(session_id)
        forgotten = 0
        for record in timeline["memories"]:
            if record.get("status", "active") != "forgotten":
                self.memory.forget(record["id"], reason="replay: rewriting an episode a previous run left open")
                forgotten += 1
        return forgotten

    def write(self, records: list[tuple[str, Record]]) -> None:
        """Write (topic, record) pairs with one bulk call (one transaction)."""
        if not records:
            return
        if self.dry_run:
            self.plan.extend(_planned(topic, record) for topic, record in records)
        else:
            started = time.perf_counter()
            try:
                self.memory.save_perceptions([record for _, record in records])
            except ValidationError as exc:
                self._write_one_by_one(records, exc)
                return
            finally:
                self._note_write(time.perf_counter() - started)
        for topic, _ in records:
            self.stats.topic(topic).records += 1
        self.stats.records_written += len(records)

    def _write_one_by_one(self, records: list[tuple[str, Record]], first_error: ValidationError) -> None:
        """One record was rejected: write the others, count and log the rejected ones."""
        log.warning("bulk write rejected (%s: %s); retrying record by record", first_error.field, first_error.message)
        for topic, record in records:
            try:
                self.memory.save_perceptions([record])
            except ValidationError as exc:
                self.stats.topic(topic).rejected += 1
                log.warning("%s: record rejected by robotmem: %s (field %s)", topic, exc.message, exc.field)
                continue
            self.stats.topic(topic).records += 1
            self.stats.records_written += 1

    def _note_write(self, seconds: float) -> None:
        self.stats.writes += 1
        self.stats.last_write_s = seconds
        self.stats.max_write_s = max(self.stats.max_write_s, seconds)

    def learn(self, topic: str, insight: str, context: dict[str, Any], collection: str, session_id: str | None) -> None:
        if self.dry_run:
            self.plan.append({"action": "learn", "topic": topic, "insight": insight, "session_id": session_id})
        else:
            self.memory.learn(insight, context=context, collection=collection, session_id=session_id)
        self.stats.topic(topic).records += 1
        self.stats.facts_learned += 1

    def end_session(self, session_id: str, score: float | None) -> None:
        if self.dry_run:
            self.plan.append({"action": "end_episode", "session_id": session_id, "outcome_score": score})
            return
        self.memory.end_session(session_id, outcome_score=score)

    def drain(self) -> None:
        """Wait until everything handed over has been written (synchronous: nothing to wait for)."""

    def close(self) -> None:
        """Write what is pending and release resources."""


def _planned(topic: str, record: Record) -> dict[str, Any]:
    data = record.get("data")
    shape = sorted(data)[:_PLAN_DATA_KEYS] if isinstance(data, dict) else type(data).__name__
    return {
        "action": "perception",
        "topic": topic,
        "session_id": record.get("session_id"),
        "perception_type": record.get("perception_type"),
        "description": record.get("description"),
        "data_fields": shape,
        "metadata": record.get("metadata"),
    }
