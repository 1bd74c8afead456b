"""Output schemas of the tools: the shapes ``Memory`` returns, published to clients.

Each model names the fields a client can rely on and allows extra ones, so the core can
add a field without breaking validation in clients that already cached the schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EndSessionOutput",
    "ForgetOutput",
    "LearnOutput",
    "OutcomeGroup",
    "OutcomeStatsOutput",
    "RecallHit",
    "RecallOutput",
    "SavePerceptionOutput",
    "StartSessionOutput",
    "UpdateOutput",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class LearnOutput(_Open):
    memory_id: int = Field(description="Id of the stored (or reinforced) memory.")
    status: str = Field(description='"created", or "duplicate" when an equal memory was reinforced.')


class RecallHit(_Open):
    id: int
    content: str
    type: str = Field(description='"fact" (from learn) or "perception".')
    confidence: float
    relevance: float | None = Field(
        default=None,
        description="Estimated probability (0-1) that this memory answers the query; comparable across "
        "queries (null without a query).",
    )
    score: float | None = Field(default=None, description="Ordering score: relevance, then recency and confidence.")
    context: dict[str, Any] | None = None


class RecallOutput(_Open):
    mode: str = Field(description='"hybrid", "bm25_only", "vector_only" or "filter_only".')
    count: int
    results: list[RecallHit]


class SavePerceptionOutput(_Open):
    memory_id: int
    status: str
    payload_bytes: int = Field(description="Encoded size of the stored data payload.")


class ForgetOutput(_Open):
    memory_id: int
    status: str
    reason: str


class UpdateOutput(_Open):
    memory_id: int
    status: str


class StartSessionOutput(_Open):
    session_id: str = Field(description="Pass it to learn/save_perception/recall and end_session.")
    collection: str
    started_at: float | str
    status: str = Field(description='"started", or "exists" for an id that was already started.')


class EndSessionOutput(_Open):
    session_id: str
    status: str = Field(description='"ended" or "already_ended".')
    duration_s: float | None = None
    memories: int = 0
    perceptions: int = 0
    merged: int = 0
    reinforced: int = 0
    decayed: int = 0
    archived: int = 0
    related: list[Any] = Field(default_factory=list)


class OutcomeGroup(_Open):
    value: Any = Field(default=None, description="The group's value at group_by (absent for a bin).")
    bin: list[float | None] | None = Field(default=None, description="[low, high) of a numeric bin; null = open.")
    count: int = Field(description="Memories of the group with a verdict (task.success or a scored episode).")
    successes: int
    success_rate: float | None
    wilson_95: list[float] | None = Field(description="Wilson 95 % interval of the success rate.")
    mean_outcome: float | None = Field(description="Mean episode.outcome of the group's scored memories.")


class OutcomeStatsOutput(_Open):
    group_by: str
    matched: int = Field(description="Memories in the matching set.")
    groups: list[OutcomeGroup]
