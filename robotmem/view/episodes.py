"""Episode rows for a list, and one episode's page: timeline, paths, payload series."""

from __future__ import annotations

import bisect
import contextlib
import gc
import json
import math
import threading
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .. import validation
from ..errors import ValidationError, brief
from ..payload import to_json_safe
from ..store.outline import LAST_PLACE, Place, session_count, session_lines, session_outline
from .paths import GAP_HOLDERS, episode_paths, gaps_of, is_pose_chunk
from .series import episode_series, needs_payload

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["MAX_ROWS", "OUTLINE_PATHS", "TIMELINE_PAGE", "episode_detail", "episode_list", "episode_row",
           "episode_span", "episode_timeline", "with_overviews"]

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


def with_overviews(mem: Memory, sessions: list[dict[str, Any]], counts: bool = True) -> list[dict[str, Any]]:
    """Each session with what a list shows of it: ``start`` and ``duration_s`` (episode_span),
    live counts of its active ``facts`` and ``perceptions`` (None unless ``counts``), and its
    ``summary_memory``. A few aggregate queries, however many records the episodes hold."""
    overviews = mem.session_overviews([s["session_id"] for s in sessions], counts=counts)
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


def episodes_cursor(session: dict[str, Any]) -> str:
    """The text a client sends back as ``after`` for the episodes listed after this session."""
    return json.dumps([session["started_at"], session["session_id"]], separators=(",", ":"))


def _episodes_after(text: Any) -> list[Any]:
    """``after`` as :func:`episodes_cursor` wrote it (Memory.list_sessions checks its values)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not isinstance(value, list):
        raise ValidationError("after must be an episodes \"next\" value as the server sent it, e.g. "
                              f"[1790000000.5,\"ses_1a2b3c4d5e6f\"]; got {brief(text)}", field="after")
    return value


def episode_list(mem: Memory, collection: str | None = None, after: str | None = None,
                 robot: str | None = None) -> dict[str, Any]:
    """A page of the episode list: MAX_ROWS rows, newest first, from the newest or (``after``: the
    ``next`` of the page before) after the last row of the page before, which stays where it is
    however many episodes start meanwhile; ``next`` for the page after (None on the last).
    ``robot``: only that robot's episodes."""
    cursor = None if after is None else _episodes_after(after)
    sessions = mem.list_sessions(collection=collection or mem.collection, limit=MAX_ROWS + 1, after=cursor,
                                 robot=robot)
    shown = sessions[:MAX_ROWS]
    more = len(sessions) > MAX_ROWS
    return {"collection": collection or mem.collection, "robot": robot,
            "episodes": [episode_row(s) for s in with_overviews(mem, shown)],
            "more": more, "next": episodes_cursor(shown[-1]) if more else None, "after": after, "max_rows": MAX_ROWS}


#: Timeline lines per page. The episode page gets the first page and the counts; the page's script
#: asks for the next ones (:func:`episode_timeline`) as the person scrolls. An episode of 20,000
#: records sent and drawn whole took the page 17 s to open, and reading all of them in full for it
#: (content, whole context, bookkeeping) about 0.5 s of the 0.87 s its data took.
TIMELINE_PAGE = 500

#: What the page reads of every record's context: the topic, pose chunks and their frame (spatial,
#: params.joint_travel), recorded gaps and a scan's time (episode.t_ns). Not the robot, task or
#: anything else a record carries, nor its content (read for the lines of one timeline page only).
_TOPIC = ("source", "topic")
OUTLINE_PATHS = (_TOPIC, ("spatial",), ("params", "joint_travel"), ("episode", "t_ns"), ("episode", "gaps"), ("gaps",))

#: A later timeline page reads the contexts of the records with gaps only: where gaps_of looks.
_GAP_PATHS = tuple((name, "gaps") if name else ("gaps",) for name in GAP_HOLDERS)

#: at one instant the start marker comes first and the end marker last
_KIND_ORDER = {"start": 0, "end": 2}


def _record_line(memory: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": memory["id"],
        "time": memory.get("occurred_at"),
        "kind": memory.get("perception_type") or memory.get("type"),
        "type": memory.get("type"),
        "status": memory.get("status"),
        "topic": ((memory.get("context") or {}).get(_TOPIC[0]) or {}).get(_TOPIC[1]),
        "content": memory.get("content"),
    }


def _marker_lines(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The episode's start and (when ended) end, as timeline lines of their own."""
    start = {"id": None, "time": row["start"], "kind": "start", "type": "marker", "status": "active", "topic": None,
             "content": f"episode start: {row['robot'] or 'no robot'} {row['task'] or ''}".rstrip()}
    if row["duration_s"] is None:
        return [start]
    outcome = "no outcome" if row["outcome_score"] is None else f"outcome {row['outcome_score']:g}"
    end = {"id": None, "time": row["start"] + row["duration_s"], "kind": "end", "type": "marker", "status": "active",
           "topic": None, "content": f"episode end: {outcome}"}
    return [start, end]


def _gap_line(gap: dict[str, Any]) -> dict[str, Any]:
    return {"id": None, "time": gap["start"], "kind": "gap", "type": "gap", "status": "active",
            "topic": gap.get("topic"), "content": f"no data for {gap['end'] - gap['start']:.1f} s"
                                                  f" ({gap.get('reason') or 'gap'})"}


def _gaps(session: dict[str, Any], memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episode's recorded gaps in time order: the summary lists the episode's, a chunk those
    it falls in (the same gap is listed once)."""
    contexts = [session.get("context") or {}] + [m.get("context") or {} for m in memories if m.get("status") == "active"]
    gaps = {(g["start"], g["end"], g["topic"]): g for context in contexts for g in gaps_of(context)}
    return [gaps[key] for key in sorted(gaps, key=lambda k: (k[0], k[1], k[2] or ""))]


#: A timeline line's place: time; at one instant the start marker, then gaps and records (a gap,
#: id 0, before the records, the records by id), then the end marker; two gaps of one instant by
#: their end and topic. Unique per line, so it can say where a page ends (``after``).
TimelineKey = tuple[float, int, int, float, str]


def _order(time: float | None, kind: str | None, memory_id: int | None, gap_end: float = 0.0,
           gap_topic: Any = None) -> TimelineKey:
    return time or 0, _KIND_ORDER.get(kind or "", 1), memory_id or 0, gap_end, "" if gap_topic is None else str(gap_topic)


def timeline_cursor(key: TimelineKey) -> str:
    """The text a client sends back as ``after`` to get the lines after this one."""
    return json.dumps(list(key), separators=(",", ":"))


_CURSOR_TYPES: tuple[type | tuple[type, ...], ...] = ((int, float), int, int, (int, float), str)


def _cursor(text: Any) -> TimelineKey:
    """``after`` as :func:`timeline_cursor` wrote it; anything else is refused naming the field."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not (isinstance(value, list) and len(value) == 5
            and all(isinstance(v, kind) and not isinstance(v, bool) for v, kind in zip(value, _CURSOR_TYPES))
            and all(math.isfinite(v) for v in value[:4])):
        raise ValidationError("after must be a timeline_next value as the server sent it, e.g. "
                              f"[1790000000.5,1,42,0.0,\"\"]; got {brief(text)}", field="after")
    return float(value[0]), value[1], value[2], float(value[3]), value[4]


#: The line before every line at a time: ``at`` a time is the lines after it.
_BEFORE_INSTANT = -1


def _place(key: TimelineKey) -> Place:
    """The place in the records' time order (outline.Place) that ends with the line ``key``: a gap,
    id 0, stands before the records of its instant, the end marker after them."""
    time, kind, memory_id = key[0], key[1], key[2]
    if kind <= _BEFORE_INSTANT or kind == _KIND_ORDER["start"]:
        return time, 0
    return time, memory_id if kind == 1 else LAST_PLACE


Line = tuple[TimelineKey, dict[str, Any]]


def _record_lines(records: list[dict[str, Any]]) -> list[Line]:
    return [(_order(r["occurred_at"], None, r["id"]), _record_line(r)) for r in records]


def _lines_at(conn: Any, sid: str, extras: list[Line], page: int | None, after: TimelineKey | None,
              at: float | str | None) -> tuple[int, list[Line]]:
    """The place of the first line sent and up to TIMELINE_PAGE lines from it (see _timeline). The
    records are read from that place on in the index's order, counted there, never all read."""
    keys = [key for key, _ in extras]
    if at == "end":
        records = session_lines(conn, sid, [_TOPIC], TIMELINE_PAGE, last=True)
        lines = sorted(_record_lines(records) + extras, key=itemgetter(0))[-TIMELINE_PAGE:]
        return max(0, session_count(conn, sid) + len(extras) - TIMELINE_PAGE), lines
    if after is None and at is not None:
        after = (float(at), _BEFORE_INSTANT, 0, 0.0, "")
    if after is not None:
        place = _place(after)
        first = session_count(conn, sid, place) + bisect.bisect_right(keys, after)
        records = session_lines(conn, sid, [_TOPIC], TIMELINE_PAGE, after=place)
        later = extras[bisect.bisect_right(keys, after):]
    else:
        first = (page or 0) * TIMELINE_PAGE
        # the extras before the line at `first`: the first extra with as many lines before it as `first`
        # (its own place among the extras plus the records before it), found by bisection
        low, high = 0, len(extras) if first else 0
        while low < high:
            middle = (low + high) // 2
            if middle + session_count(conn, sid, _place(keys[middle])) >= first:
                high = middle
            else:
                low = middle + 1
        records = session_lines(conn, sid, [_TOPIC], TIMELINE_PAGE, skip=first - low)
        later = extras[low:]
    return first, sorted(_record_lines(records) + later, key=itemgetter(0))[:TIMELINE_PAGE]


def _timeline(mem: Memory, row: dict[str, Any], gaps: list[dict[str, Any]], page: int | None = 0,
              after: TimelineKey | None = None, at: float | str | None = None) -> dict[str, Any]:
    """The ``TIMELINE_PAGE`` lines from page ``page``, just after the line ``after``, or from the
    first line at or after the time ``at`` ("end": the last TIMELINE_PAGE lines); past the last,
    none: the records, start and end markers and gaps in time order. Only the records of the
    lines sent are read, and the others counted (one read transaction: every figure of one state)."""
    sid = row["session_id"]
    extras: list[Line] = [(_order(line["time"], line["kind"], None), line) for line in _marker_lines(row)]
    extras += [(_order(g["start"], "gap", None, g["end"], g.get("topic")), _gap_line(g)) for g in gaps]
    extras.sort(key=itemgetter(0))
    with mem.store.read() as conn:
        first, chosen = _lines_at(conn, sid, extras, page, after, at)
        total = session_count(conn, sid) + len(extras)
    more = first + len(chosen) < total
    paged = after is None and at is None
    return {"timeline": [line for _, line in chosen], "timeline_page": page if paged else None,
            "timeline_page_size": TIMELINE_PAGE, "timeline_total": total, "timeline_first": first,
            "timeline_next_page": (page or 0) + 1 if paged and more else None,
            "timeline_next": timeline_cursor(chosen[-1][0]) if more and chosen else None}


def _episode_row(mem: Memory, session: dict[str, Any], counts: bool = True) -> dict[str, Any]:
    return episode_row(with_overviews(mem, [session], counts)[0])


def episode_detail(mem: Memory, session_id: str) -> dict[str, Any]:
    """Everything the episode page draws, with the first page of its timeline (:func:`episode_timeline`
    gives the others). The records are read narrow (robotmem.store.outline: no content, the
    context values at OUTLINE_PATHS), the payloads of those a plot or a path draws only."""
    session = mem.get_session(session_id)  # checks the id; NotFoundError for an unknown one
    with _collector_paused():
        # built in a call of its own: its records and payloads are freed when it returns, before
        # the collector is on again (its first pass over them, still alive here, took 0.4-0.5 s)
        return _detail(mem, session)


def _detail(mem: Memory, session: dict[str, Any]) -> dict[str, Any]:
    with mem.store.read() as conn:
        records = session_outline(conn, session["session_id"], OUTLINE_PATHS)
    gaps = _gaps(session, records)
    row = _episode_row(mem, session)
    plotted = [m["id"] for m in records if needs_payload(m)]
    # numpy arrays for the paths: 100,000 pose chunks' payloads turned into lists took 1.8 s more
    payloads = mem.get_data_many(plotted + [m["id"] for m in records if m.get("status") == "active"
                                            and is_pose_chunk(m)], as_numpy=True)
    return {
        "episode": row,
        "context": session.get("context") or {},
        **_timeline(mem, row, gaps, 0),
        "gaps": gaps,
        "paths": episode_paths(session, records, payloads),
        "series": episode_series(records, {i: to_json_safe(payloads[i]) for i in plotted}),
    }


_collector_lock = threading.Lock()
#: [builds running with the collector held off, whether it was on when the first began]
_collector_state: list[Any] = [0, False]


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a page is built. A page of 100,000
    records makes a few million objects, none in a cycle, and the collector's passes over the
    growing heap took about a third of the build (6.1 s against 4.3 s, 8.7 against 5.5).
    Reference counting still frees them; the collector is on again when the last build ends
    (if it was on when the first began: an application that turned it off keeps it off)."""
    with _collector_lock:
        if _collector_state[0] == 0:
            _collector_state[1] = gc.isenabled()
            gc.disable()
        _collector_state[0] += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_state[0] -= 1
            if _collector_state[0] == 0 and _collector_state[1]:
                gc.enable()


def episode_timeline(mem: Memory, session_id: str, page: Any = None, *, after: Any = None,
                     at: Any = None) -> dict[str, Any]:
    """``TIMELINE_PAGE`` lines of an episode's timeline, from one of: ``page`` (a whole number from
    0; a page past the last has no lines; none of the three: 0), ``after`` (the ``timeline_next``
    of the lines shown: the lines after the last of them) or ``at`` (epoch seconds or ISO 8601:
    from the first line at or after that time; ``"end"``: the last lines).

    ``after`` is what the page uses: a record written meanwhile with an earlier time (a late
    camera frame) moves every later line one place on, so the next ``page`` repeated a line
    already shown; after a line, nothing shown comes again. Reads the ids and times of the
    episode's records, the contexts of those that record gaps, and the records of the lines sent."""
    given = [name for name, value in (("page", page), ("after", after), ("at", at)) if value is not None]
    if len(given) > 1:
        raise ValidationError(f"give one of page, after and at, not {' and '.join(given)}", field=given[1])
    number = None if page is None and given else validation.integer(0 if page is None else page, "page", low=0,
                                                                    high=validation.INT64_MAX)
    cursor = None if after is None else _cursor(after)
    start = None if at is None else "end" if at == "end" else validation.timestamp(at, "at")
    session = mem.get_session(session_id)
    with mem.store.read() as conn:
        holding_gaps = session_outline(conn, session["session_id"], _GAP_PATHS, holding=_GAP_PATHS)
    # the lines' markers need the episode's start, end and outcome, not its counts (a read of every record)
    row = _episode_row(mem, session, counts=False)
    return _timeline(mem, row, _gaps(session, holding_gaps), number, cursor, start)
