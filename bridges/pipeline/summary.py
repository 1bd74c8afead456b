"""The episode summary record written when an episode ends."""

from __future__ import annotations

from typing import Any

from .converters.base import (
    PERCEPTION_TYPES,
    EpisodeContext,
    Record,
    base_metadata,
    occurred_at,
    record_metadata,
)
from .gaps import Gap

__all__ = ["episode_summary_record"]


def episode_summary_record(
    episode: EpisodeContext,
    *,
    policy: str,
    start_ns: int,
    end_ns: int,
    messages: dict[str, int],
    facts: int,
    topic_summaries: list[dict[str, Any]],
    task: dict[str, Any],
    outcome_score: float | None,
    gaps: list[Gap] | None = None,
) -> Record:
    """One "procedural" record with the whole-episode spatial context and counts."""
    duration_s = max(0, end_ns - start_ns) / 1e9
    metadata = base_metadata(episode, ",".join(sorted(messages)), "episode", duration_s)
    metadata["source"] = {"topics": sorted(messages), "policy": policy, **episode.source}
    metadata["episode"].update({"t_start_ns": start_ns, "t_end_ns": end_ns, "messages": dict(sorted(messages.items()))})
    metadata["task"].update(task)
    if outcome_score is not None:
        metadata["task"]["outcome_score"] = outcome_score
    if gaps:
        metadata["gaps"] = [g.as_dict() for g in gaps]
    paths = [s for s in topic_summaries if "spatial" in s]
    main = _main_path(paths)
    if main is not None:
        metadata["spatial"] = dict(main["spatial"], topic=main["topic"])
    data = {
        "messages": dict(sorted(messages.items())),
        "facts_learned": facts,
        "topics": [_jsonable_summary(s) for s in topic_summaries],
    }
    description = _describe(episode, duration_s, messages, facts, main)
    return {
        "description": description,
        "perception_type": PERCEPTION_TYPES["episode_summary"],
        "data": data,
        "metadata": record_metadata(episode, metadata),
        "collection": episode.collection,
        "session_id": episode.session_id,
        "occurred_at": occurred_at(start_ns),
    }


def _main_path(paths: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pose topic that speaks for the episode: a trustworthy path first, then the most points."""
    if not paths:
        return None
    # a pose topic speaks before a path composed from /tf (the robot published it as its pose)
    return max(paths, key=lambda s: ("path_length_m" in s["spatial"], "TFMessage" not in s.get("msgtype", ""),
                                     s.get("points", 0)))


def _jsonable_summary(summary: dict[str, Any]) -> dict[str, Any]:
    result = {k: v for k, v in summary.items() if k != "verdict"}
    verdict = summary.get("verdict")
    if verdict is not None:
        result["path_quality"] = verdict.quality
    return result


def _describe(
    episode: EpisodeContext, duration_s: float, messages: dict[str, int], facts: int, main: dict[str, Any] | None
) -> str:
    robot = f" robot {episode.robot_id}" if episode.robot_id else ""
    text = f"episode{robot} {duration_s:.1f} s, {sum(messages.values())} messages on {len(messages)} topics"
    if main is not None:
        spatial = main["spatial"]
        start, end = spatial["start_position"], spatial["end_position"]
        if "path_length_m" in spatial:
            text += f", {main['topic']} {spatial['path_length_m']:.1f} m"
        else:
            text += f", {main['topic']} path length not reported ({spatial['path_quality']})"
        text += f" from ({start[0]:.2f}, {start[1]:.2f}) to ({end[0]:.2f}, {end[1]:.2f})"
    if facts:
        text += f", {facts} notes learned"
    return text
