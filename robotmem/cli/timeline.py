"""People's views of episodes: the ``session list`` table and the ``session show`` timeline."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from .output import format_time, format_value, truncate

__all__ = ["episode_table", "timeline_lines"]

#: A pause between consecutive records this much longer than the episode's typical step
#: (and at least MIN_PAUSE_S) is shown as a line of its own.
PAUSE_FACTOR = 5.0
MIN_PAUSE_S = 2.0
CONTENT_WIDTH = 100


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    hours = seconds / 3600
    # A time stored before times were held to 1970..9999 (1e300) gave a 300-digit offset.
    return f"{hours:.1f} h" if hours < 1e6 else f"{hours:.3g} h"


def _context_value(session: dict[str, Any], section: str, key: str) -> str:
    value = (session.get("context") or {}).get(section) or {}
    return format_value(value.get(key)) if isinstance(value, dict) else "-"


def _outcome(session: dict[str, Any]) -> str:
    score = session.get("outcome_score")
    if score is not None:
        return f"{score:.2f}"
    return "open" if session.get("status") == "open" else "-"


def _counts(session: dict[str, Any]) -> str:
    """Live counts of active memories (what the web view shows), not the snapshot end_session took."""
    return f"{session['facts']} facts, {session['perceptions']} perceptions"


def episode_table(sessions: list[dict[str, Any]]) -> Iterator[str]:
    """One row per episode: id, robot, task, start (UTC), duration, outcome, counts."""
    if not sessions:
        yield "no episodes"
        return
    rows = [("id", "robot", "task", "start (UTC)", "duration", "outcome", "counts")]
    for s in sessions:  # start, duration_s, facts, perceptions: robotmem.view.with_overviews (cmd_list adds them)
        rows.append((s["session_id"], _context_value(s, "robot", "id"), _context_value(s, "task", "name"),
                     format_time(s["start"]), _duration(s["duration_s"]), _outcome(s), _counts(s)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        yield "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]


def _kind(record: dict[str, Any]) -> str:
    if record.get("type") == "fact":
        return "fact"
    return str(record.get("perception_type") or record.get("type") or "-")


def _typical_step(times: list[float]) -> float:
    steps = sorted(b - a for a, b in itertools.pairwise(times))
    return steps[(len(steps) - 1) // 2] if steps else 0.0  # the lower median: one long pause is not typical


def _gap_lines(record: dict[str, Any]) -> Iterator[str]:
    for gap in (record.get("context") or {}).get("gaps") or []:
        if isinstance(gap, dict):
            where = f" on {gap['topic']}" if gap.get("topic") else ""
            yield f"{'':>10}  {'gap':<15} {_duration(gap.get('duration_s'))}{where}: {gap.get('reason', '-')}"


def timeline_lines(timeline: dict[str, Any], width: int = CONTENT_WIDTH) -> Iterator[str]:
    """A header, then one line per record: time since the start, type, content.

    Long content is cut to ``width`` characters; recorded gaps and long pauses between
    records get lines of their own, the episode's start and end are marked.
    """
    session, records = timeline["session"], timeline["memories"]
    yield (f"episode {session['session_id']}  robot {_context_value(session, 'robot', 'id')}  "
           f"task {_context_value(session, 'task', 'name')}  collection {session.get('collection', '-')}")
    times = [float(r["occurred_at"]) for r in records if r.get("occurred_at") is not None]
    start = session["start"]  # robotmem.view.episode_span, as session list and the web view show (cmd_show adds it)
    origin = min([start, *times])  # offsets count from it; a record stamped before the start stays at +0
    yield f"started {format_time(start, ' UTC')}, {len(records)} records, outcome {_outcome(session)}"
    yield f"{'time':>10}  {'type':<15} content"
    yield f"{'+0.0 s':>10}  {'start':<15} episode started"
    pause = max(MIN_PAUSE_S, PAUSE_FACTOR * _typical_step(sorted(times)))
    previous = origin
    for record in records:
        at = record.get("occurred_at")
        if at is not None and previous is not None and at - previous > pause:
            yield f"{'':>10}  {'...':<15} {_duration(at - previous)} without records"
        offset = "-" if at is None or origin is None else f"+{_duration(at - origin)}"
        yield f"{offset:>10}  {_kind(record):<15} #{record['id']} {truncate(record['content'], width)}"
        yield from _gap_lines(record)
        previous = at if at is not None else previous
    if session.get("status") == "ended":
        yield f"{'':>10}  {'end':<15} episode ended, outcome {_outcome(session)}"
