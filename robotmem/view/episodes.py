"""Episode rows for a list, and one episode's page: timeline, paths, payload series."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .paths import episode_paths, gaps_of, is_pose_chunk
from .series import episode_series, needs_payload

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["MAX_ROWS", "MAX_TIMELINE", "episode_detail", "episode_list", "episode_row", "episode_rows", "episode_span",
           "with_overviews"]

#: A list of every episode a long-lived robot ever ran is not what a person reads first.
MAX_ROWS = 500


def episode_span(session: dict[str, Any], summary: dict[str, Any] | None) -> tuple[float, float | None]:
    """An episode's start (epoch seconds) and duration (None while open), from its session and
    its summary record (``Memory.session_overviews``): when it happened (recorded time where the
    episode knows it), not when it was stored. The one definition the web view, ``session list``
    and ``session show`` share (through :func:`with_overviews`), so a replayed episode has the
    same start and duration in all three."""
    episode = ((summary or {}).get("context") or {}).get("episode") or (session.get("context") or {}).get(
        "episode") or {}
    start_ns, end_ns = episode.get("t_start_ns"), episode.get("t_end_ns")
    if isinstance(start_ns, int) and isinstance(end_ns, int) and end_ns >= start_ns:
        return start_ns / 1e9, (end_ns - start_ns) / 1e9
    start = start_ns / 1e9 if isinstance(start_ns, int) else float(session["started_at"])
    ended = session.get("ended_at")
    return start, (float(ended) - float(session["started_at"])) if ended is not None else None


def with_overviews(mem: Memory, sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each session with what a list shows of it: ``start`` and ``duration_s`` (episode_span),
    live counts of its active ``facts`` and ``perceptions``, and its ``summary_memory``. A few
    aggregate queries, however many records the episodes hold."""
    overviews = mem.session_overviews([s["session_id"] for s in sessions])
    enriched = []
    for session in sessions:
        overview = overviews[session["session_id"]]
        start, duration = episode_span(session, overview["summary"])
        enriched.append(dict(session, start=start, duration_s=duration, facts=overview["facts"],
                             perceptions=overview["perceptions"], summary_memory=overview["summary"]))
    return enriched


def _outcome(session: dict[str, Any]) -> tuple[float | None, bool | None]:
    score = session.get("outcome_score")
    success = ((session.get("context") or {}).get("task") or {}).get("success")
    return (float(score) if isinstance(score, (int, float)) else None,
            success if isinstance(success, bool) else None)


def episode_row(session: dict[str, Any]) -> dict[str, Any]:
    """What the episode list shows of one episode (a session from :func:`with_overviews`)."""
    context = session.get("context") or {}
    spatial = ((session["summary_memory"] or {}).get("context") or {}).get("spatial") or {}
    score, success = _outcome(session)
    task = context.get("task") or {}
    return {
        "session_id": session["session_id"],
        "collection": session.get("collection"),
        "robot": (context.get("robot") or {}).get("id"),
        "task": task.get("name") or task.get("goal"),
        "start": session["start"],
        "duration_s": session["duration_s"],
        "status": session.get("status"),
        "outcome_score": score,
        "success": success,
        "path_length_m": spatial.get("path_length_m"),
        "path_quality": spatial.get("path_quality"),
        "frame": spatial.get("frame") or spatial.get("frame_id"),
        "facts": session["facts"],
        "perceptions": session["perceptions"],
    }


def episode_rows(mem: Memory, collection: str | None = None, limit: int = MAX_ROWS) -> list[dict[str, Any]]:
    """Newest first; ``collection``: None for the Memory's own (recall and the map read it too)."""
    sessions = mem.list_sessions(collection=collection or mem.collection, limit=limit)
    return [episode_row(s) for s in with_overviews(mem, sessions)]


def episode_list(mem: Memory, collection: str | None = None) -> dict[str, Any]:
    """The episode list: the newest MAX_ROWS rows, and whether older episodes are left out."""
    rows = episode_rows(mem, collection, limit=MAX_ROWS + 1)
    return {"collection": collection or mem.collection, "episodes": rows[:MAX_ROWS], "more": len(rows) > MAX_ROWS,
            "max_rows": MAX_ROWS}


def _timeline_entry(memory: dict[str, Any]) -> dict[str, Any]:
    context = memory.get("context") or {}
    return {
        "id": memory["id"],
        "time": memory.get("occurred_at"),
        "kind": memory.get("perception_type") or memory.get("type"),
        "type": memory.get("type"),
        "status": memory.get("status"),
        "topic": (context.get("source") or {}).get("topic"),
        "content": memory.get("content"),
    }


#: Timeline lines the page gets: the first and the last half, and between them one line that
#: says how many are left out (``session show`` lists them all). An episode of 20,000 records
#: sent and drawn whole took the page 17 s to open.
MAX_TIMELINE = 1000

#: at one instant the start marker comes first and the end marker last
_KIND_ORDER = {"start": 0, "end": 2}


def _marker_entries(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The episode's start and (when ended) end, as timeline lines of their own."""
    start = {"id": None, "time": row["start"], "kind": "start", "type": "marker", "status": "active", "topic": None,
             "content": f"episode start: {row['robot'] or 'no robot'} {row['task'] or ''}".rstrip()}
    if row["duration_s"] is None:
        return [start]
    outcome = "no outcome" if row["outcome_score"] is None else f"outcome {row['outcome_score']:g}"
    end = {"id": None, "time": row["start"] + row["duration_s"], "kind": "end", "type": "marker", "status": "active",
           "topic": None, "content": f"episode end: {outcome}"}
    return [start, end]


def _gap_entry(gap: dict[str, Any]) -> dict[str, Any]:
    return {"id": None, "time": gap["start"], "kind": "gap", "type": "gap", "status": "active",
            "topic": gap.get("topic"), "content": f"no data for {gap['end'] - gap['start']:.1f} s"
                                                  f" ({gap.get('reason') or 'gap'})"}


def _capped(entries: list[dict[str, Any]], session_id: str) -> tuple[list[dict[str, Any]], int]:
    """At most MAX_TIMELINE time-ordered lines (and the line that counts the rest), and how many are left out."""
    if len(entries) <= MAX_TIMELINE:
        return entries, 0
    half = MAX_TIMELINE // 2
    left_out = len(entries) - 2 * half
    note = {"id": None, "time": entries[half]["time"], "kind": "omitted", "type": "omitted", "status": "active",
            "topic": None, "content": f"{left_out:,} more lines are not shown here; "
                                      f"robotmem session show {session_id} lists them all"}
    return entries[:half] + [note] + entries[-half:], left_out


def _gaps(session: dict[str, Any], memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episode's recorded gaps in time order: the summary lists the episode's, a chunk those
    it falls in (the same gap is listed once)."""
    contexts = [session.get("context") or {}] + [m.get("context") or {} for m in memories if m.get("status") == "active"]
    gaps = {(g["start"], g["end"], g["topic"]): g for context in contexts for g in gaps_of(context)}
    return [gaps[key] for key in sorted(gaps, key=lambda k: (k[0], k[1], k[2] or ""))]


def _timeline_lines(memories: list[dict[str, Any]], row: dict[str, Any],
                    gaps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The page's timeline: records, start and end markers and gaps in time order, capped."""
    entries = [_timeline_entry(m) for m in memories] + _marker_entries(row) + [_gap_entry(g) for g in gaps]
    entries.sort(key=lambda e: (e["time"] or 0, _KIND_ORDER.get(e["kind"], 1), e["id"] or 0))
    return _capped(entries, row["session_id"])


def episode_detail(mem: Memory, session_id: str) -> dict[str, Any]:
    """Everything the episode page draws."""
    timeline = mem.session_timeline(session_id)
    session, memories = timeline["session"], timeline["memories"]
    gaps = _gaps(session, memories)
    row = episode_row(with_overviews(mem, [session])[0])
    lines, left_out = _timeline_lines(memories, row, gaps)
    payloads = mem.get_data_many([m["id"] for m in memories
                                  if needs_payload(m) or (m.get("status") == "active" and is_pose_chunk(m))])
    return {
        "episode": row,
        "context": session.get("context") or {},
        "timeline": lines,
        "timeline_omitted": left_out,
        "gaps": gaps,
        "paths": episode_paths(session, memories, payloads),
        "series": episode_series(memories, payloads),
    }
