"""Counters the pipeline keeps: per topic, per episode, and write lag."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PipelineStats", "TopicStats"]


@dataclass
class TopicStats:
    """What happened to the messages of one topic."""

    msgtype: str = ""
    converter: str = ""
    #: messages that reached the pipeline
    messages: int = 0
    #: memory records written (perceptions and learned facts) from this topic
    records: int = 0
    #: messages that could not be converted (logged, never raised)
    malformed: int = 0
    #: dropped by the rule's sample_every_s
    sampled_out: int = 0
    #: arrived while no episode was open (for example between explicit episode markers)
    outside_episode: int = 0
    #: arrived after the end of the episode it is stamped in, within late_grace_s: put into it
    late: int = 0
    #: belonged to an episode that was already stored (idempotent replay)
    already_stored: int = 0
    #: no rule / converter for this topic and type
    ignored: int = 0
    #: records robotmem refused (logged with the field it named); the others were written
    rejected: int = 0
    #: why robotmem refused the first rejected record of this topic ("" when none was)
    rejected_reason: str = ""
    #: records given up after the store kept failing (see outbox.py)
    store_dropped: int = 0
    #: header stamps not believed (too far from the log / receive time, see stamps.py): the log time was used
    stamps_replaced: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PipelineStats:
    """Counters for one pipeline; ``as_dict`` is JSON-ready."""

    topics: dict[str, TopicStats] = field(default_factory=dict)
    episodes_started: int = 0
    episodes_ended: int = 0
    #: episodes found already complete in the store (replay ran before): nothing written
    episodes_skipped: int = 0
    #: of the skipped, those stored by a replay of the same recording with other options
    #: (another episode split, topics or config): the same data under other episode ids
    episodes_stored_by_other_options: int = 0
    #: episodes a crashed run left open: their records were forgotten and rewritten
    episodes_rewritten: int = 0
    #: of the episodes started, those written into a session someone else owns (and ends)
    episodes_attached: int = 0
    records_written: int = 0
    facts_learned: int = 0
    #: records and notes robotmem refused (all topics; see TopicStats.rejected)
    records_rejected: int = 0
    #: store writes that failed with StorageError and were tried again (see outbox.py)
    write_retries: int = 0
    #: records given up: the store failed past the retry limit, or too many were held
    records_dropped: int = 0
    #: records of an attached episode written after the session's owner ended it (without the session)
    records_after_session_end: int = 0
    #: gaps recorded in episodes (disconnections and topics gone quiet; see gaps.py)
    gaps: int = 0
    #: times the message clock went back (a simulator's reset, a robot clock stepped back): Pipeline.time_reset
    time_resets: int = 0
    writes: int = 0
    #: seconds the last / slowest write took
    last_write_s: float = 0.0
    max_write_s: float = 0.0
    #: session ids of the episodes in order (started, skipped or planned)
    session_ids: list[str] = field(default_factory=list)

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    @property
    def messages(self) -> int:
        return sum(t.messages for t in self.topics.values())

    def as_dict(self) -> dict[str, Any]:
        result = {k: v for k, v in self.__dict__.items() if k != "topics"}
        result["topics"] = {name: t.as_dict() for name, t in sorted(self.topics.items())}
        result["messages"] = self.messages
        return result
