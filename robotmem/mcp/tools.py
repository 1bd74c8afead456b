"""The seven tools, and outcome_stats: thin typed wrappers over ``Memory`` with the same names and parameters.

The one parameter left out is recall's ``query_vector``: a vector of the server's model's
dimension is nothing an MCP client has (docs/mcp.md says so).

Validation belongs to ``Memory``, including the parsing of JSON-valued parameters that
clients send as text (robotmem.validation.parse_json); this layer hands every outcome
to the error boundary. Descriptions are
deliberately short: every connected client pays for them in context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field, StrictFloat, StrictInt, WithJsonSchema

from ..models import DEFAULT_MIN_RELEVANCE
from .boundary import ok_result, result_for_exception
from .runtime import MemoryRuntime
from .schemas import (
    EndSessionOutput,
    ForgetOutput,
    LearnOutput,
    OutcomeStatsOutput,
    RecallOutput,
    SavePerceptionOutput,
    StartSessionOutput,
    UpdateOutput,
)

__all__ = ["TOOL_NAMES", "register_tools"]

TOOL_NAMES = (
    "learn", "recall", "save_perception", "forget", "update", "start_session", "end_session", "outcome_stats",
)

# Parameter types. Numbers are strict: "5" for n is a wrong type, not a guess.
_JsonObject = dict[str, Any] | str | None
Collection = Annotated[
    str | None, Field(description='Memory namespace, e.g. "kitchen_arm". Default: the server\'s collection.')
]
SessionRef = Annotated[str | None, Field(description='Session from start_session, e.g. "ses_1a2b3c4d5e6f".')]
ContextArg = Annotated[
    _JsonObject,
    Field(
        description="JSON object (or a string of JSON) with sections params/spatial/robot/task, e.g. "
        '{"params": {"grip_force": 12.5}, "spatial": {"object_position": [1.2, 0.4, 0.0]}, "task": {"name": "pick_cup"}}.'
    ),
]
# Times are passed on untouched so Memory's one timestamp rule applies (pydantic would turn
# ``true`` into 1.0); the schema still tells clients what to send.
TimeArg = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "null"}]})]
MemoryId = Annotated[int, Field(strict=True, description="Id returned by learn or save_perception, e.g. 12.")]
OccurredAt = Annotated[
    TimeArg, Field(description='When it happened: epoch seconds or ISO 8601, e.g. "2026-12-01T08:00:00Z"; default now.')
]


def register_tools(server: MCPServer[Any], runtime: MemoryRuntime) -> None:
    """Add the tools to ``server``; each runs its ``Memory`` call via ``runtime``."""

    async def run(tool: str, call: Callable[[Any], dict[str, Any]]) -> CallToolResult:
        try:
            return ok_result(await runtime.call(call))
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes a tool
            return result_for_exception(tool, exc)

    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=writes)
    async def learn(
        insight: Annotated[
            str,
            Field(
                description='The lesson, 1-300 chars, e.g. "Grip force 12.5 N lifts the red cup without slip".'
            ),
        ],
        context: ContextArg = None,
        collection: Collection = None,
        session_id: SessionRef = None,
        occurred_at: OccurredAt = None,
    ) -> Annotated[CallToolResult, LearnOutput]:
        """Remember a lesson (fact) for later recall: use after a success, failure or discovery worth
        reusing. Repeating an equal lesson reinforces it. Returns {memory_id, status: created|duplicate}."""
        return await run(
            "learn",
            lambda m: m.learn(
                insight, context=context, collection=collection, session_id=session_id, occurred_at=occurred_at
            ),
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def recall(
        query: Annotated[
            str, Field(description='What to look for, e.g. "how to grasp a cup". May be "" with a filter.')
        ],
        collection: Collection = None,
        n: Annotated[int, Field(strict=True, description="Maximum results, 1-100, e.g. 10.")] = 5,
        min_confidence: Annotated[
            float,
            Field(
                strict=True, description="Skip memories below this (decayed) confidence, 0-1, e.g. 0.5; 0 also shows archived."
            ),
        ] = 0.3,
        session_id: Annotated[str | None, Field(description='Only memories of this session, e.g. "ses_1a2b3c4d5e6f".')] = None,
        context_filter: Annotated[
            _JsonObject,
            Field(
                description="JSON object (or string) filtering on context by dot path, e.g. "
                '{"task.name": "pick_cup", "params.grip_force": {"$gte": 10}}; '
                "operators $eq $ne $gt $gte $lt $lte $in $nin $exists."
            ),
        ] = None,
        spatial_sort: Annotated[
            _JsonObject,
            Field(
                description="JSON object (or string): nearest first to a point, e.g. "
                '{"field": "spatial.object_position", "target": [1.2, 0.4], "max_distance": 0.5}; '
                '"frame": "map" compares only memories in that frame (spatial.frame), others come after.'
            ),
        ] = None,
        since: Annotated[
            TimeArg,
            Field(description='Happened at/after: epoch seconds or ISO 8601, e.g. "2026-12-01T08:00:00Z".'),
        ] = None,
        until: Annotated[
            TimeArg, Field(description="Happened at/before: epoch seconds or ISO 8601, e.g. 1796200000.")
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(strict=True, description=f"Leave out hits less relevant than this, 0-1 (default {DEFAULT_MIN_RELEVANCE}); "
                  "0 returns every candidate. A query with no answer returns no results."),
        ] = None,
    ) -> Annotated[CallToolResult, RecallOutput]:
        """Find relevant memories before acting (hybrid text + vector search, with optional context
        filter, spatial sort and time window). Returns {mode, count, results: [{id, content, type,
        confidence, relevance, score, context, ...}]}, best first; empty when nothing is relevant."""
        return await run(
            "recall",
            lambda m: m.recall(
                query,
                collection=collection,
                n=n,
                min_confidence=min_confidence,
                session_id=session_id,
                context_filter=context_filter,
                spatial_sort=spatial_sort,
                since=since,
                until=until,
                min_relevance=min_relevance,
            ),
        )

    @server.tool(annotations=writes)
    async def save_perception(
        description: Annotated[
            str,
            Field(
                description='What was perceived, 5-2000 chars, e.g. "Cup handle faces left, 3 cm from edge".'
            ),
        ],
        perception_type: Annotated[
            str, Field(description="One of visual, tactile, auditory, proprioceptive, procedural.")
        ] = "visual",
        data: Annotated[
            Any,
            Field(
                description='Optional raw payload, any JSON (or a string of JSON), e.g. {"joint_angles": [0.1, 1.2]}.'
            ),
        ] = None,
        metadata: Annotated[
            _JsonObject,
            Field(
                description='JSON object (or string), same sections as context, e.g. {"robot": {"id": "arm1"}}.'
            ),
        ] = None,
        collection: Collection = None,
        session_id: SessionRef = None,
        occurred_at: OccurredAt = None,
    ) -> Annotated[CallToolResult, SavePerceptionOutput]:
        """Store an observation (sensor reading, trajectory, scene note) with an optional data payload.
        Returns {memory_id, status, payload_bytes}."""
        return await run(
            "save_perception",
            lambda m: m.save_perception(
                description,
                perception_type=perception_type,
                data=data,
                metadata=metadata,
                collection=collection,
                session_id=session_id,
                occurred_at=occurred_at,
            ),
        )

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
    )
    async def forget(
        memory_id: MemoryId,
        reason: Annotated[str, Field(description='Why it is wrong or obsolete, e.g. "cup model changed".')],
    ) -> Annotated[CallToolResult, ForgetOutput]:
        """Retract a memory that proved wrong; it stops appearing in recall. Returns {memory_id, status, reason}."""
        return await run("forget", lambda m: m.forget(memory_id, reason))

    @server.tool(annotations=writes)
    async def update(
        memory_id: MemoryId,
        new_content: Annotated[
            str, Field(description='The corrected text, e.g. "Grip force 14 N lifts the red cup".')
        ],
        context: ContextArg = None,
    ) -> Annotated[CallToolResult, UpdateOutput]:
        """Correct a memory's text (and optionally its context) in place. Returns {memory_id, status}."""
        return await run(
            "update", lambda m: m.update(memory_id, new_content, context=context)
        )

    @server.tool(annotations=writes)
    async def start_session(
        collection: Collection = None,
        context: Annotated[
            _JsonObject,
            Field(
                description='JSON object (or string) describing the episode, e.g. {"task": {"name": "tidy"}}.'
            ),
        ] = None,
        session_id: Annotated[
            str | None,
            Field(description='Your own id, making a retry safe (it returns status "exists"), e.g. "run7_ep3". '
                  "Default: a new one."),
        ] = None,
    ) -> Annotated[CallToolResult, StartSessionOutput]:
        """Begin an episode (one task attempt); pass the returned session_id to the other tools.
        Returns {session_id, collection, started_at, status}."""
        return await run(
            "start_session",
            lambda m: m.start_session(collection=collection, context=context, session_id=session_id),
        )

    @server.tool(annotations=writes)
    async def end_session(
        session_id: Annotated[str, Field(description='The id from start_session, e.g. "ses_1a2b3c4d5e6f".')],
        outcome_score: Annotated[
            float | None,
            Field(strict=True, description="How well the episode went, 0 (failed) to 1 (perfect), e.g. 0.8."),
        ] = None,
    ) -> Annotated[CallToolResult, EndSessionOutput]:
        """Close an episode: scores it and consolidates its memories (merge, reinforce, decay).
        Returns {session_id, status, duration_s, memories, perceptions, merged, reinforced, ...}."""
        return await run("end_session", lambda m: m.end_session(session_id, outcome_score=outcome_score))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def outcome_stats(
        group_by: Annotated[
            str, Field(description='Context dot path to group by, e.g. "params.push_factor".')
        ],
        query: Annotated[str, Field(description='Only memories containing every word, e.g. "push"; "" for all.')] = "",
        collection: Collection = None,
        context_filter: Annotated[
            _JsonObject,
            Field(description='JSON object (or string), recall\'s filter grammar, e.g. {"robot.object": "heavy"}.'),
        ] = None,
        spatial_sort: Annotated[
            _JsonObject,
            Field(
                description="JSON object (or string): neighbourhood of a point; needs max_distance or k, e.g. "
                '{"field": "spatial.object_position", "target": [1.2, 0.4], "max_distance": 0.1}.'
            ),
        ] = None,
        k: Annotated[int | None, Field(strict=True, description="With spatial_sort: the k nearest, e.g. 50.")] = None,
        bins: Annotated[
            StrictInt | list[StrictFloat] | None,
            Field(description="Bin numeric values: a count of equal bins, e.g. 5, or edges, e.g. [0, 0.5, 1]."),
        ] = None,
        success_threshold: Annotated[
            float, Field(strict=True, description="episode.outcome counting as success without task.success, 0-1.")
        ] = 0.5,
        since: Annotated[TimeArg, Field(description="Happened at/after: epoch seconds or ISO 8601.")] = None,
        until: Annotated[TimeArg, Field(description="Happened at/before: epoch seconds or ISO 8601.")] = None,
    ) -> Annotated[CallToolResult, OutcomeStatsOutput]:
        """How often did each value succeed in situations like this one? Exact counts over every matching
        memory. Returns {matched, groups: [{value|bin, count, successes, success_rate, wilson_95,
        mean_outcome}]}."""
        return await run(
            "outcome_stats",
            lambda m: m.outcome_stats(
                group_by,
                query=query,
                collection=collection,
                context_filter=context_filter,
                spatial_sort=spatial_sort,
                k=k,
                bins=bins,
                success_threshold=success_threshold,
                since=since,
                until=until,
            ),
        )
