"""Episode rows and pages: what a list and a page need without reading every record, on either backend."""

from __future__ import annotations

import contextlib
import gc
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory
from robotmem.errors import ValidationError
from robotmem.store.backend import dialect_of
from robotmem.store.outline import session_lines
from robotmem.store.sessions import _ACTIVE_COUNTS, _SUMMARY_IDS
from robotmem.view import episode_detail, episode_list, episode_paths, episode_timeline, episodes
from robotmem.view.episodes import TIMELINE_PAGE
from robotmem.view.series import episode_series


class _CountingCursor:
    def __init__(self, cursor: Any, counter: dict[str, int]) -> None:
        self._cursor, self._counter = cursor, counter

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._counter["rows"] += 1
            yield row

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._counter["rows"] += row is not None
        return row

    def fetchall(self) -> list[Any]:
        return list(self)


class _CountingConnection:
    """A store connection that counts the statements run on it and the rows they return, and
    keeps each statement with its parameters in ``statements`` if given."""

    def __init__(self, conn: Any, counter: dict[str, int], statements: list[tuple[str, tuple[Any, ...]]] | None = None
                 ) -> None:
        self._conn, self._counter, self._statements = conn, counter, statements

    def execute(self, sql: str, params: Any = ()) -> _CountingCursor:
        self._counter["statements"] += 1
        if self._statements is not None:
            self._statements.append((sql, tuple(params)))
        return _CountingCursor(self._conn.execute(sql, params), self._counter)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _rows_and_cost(mem: Memory) -> tuple[list[dict[str, Any]], dict[str, int]]:
    counter = {"statements": 0, "rows": 0}
    store, read = mem._db, mem._db.read

    @contextmanager
    def counted_read() -> Iterator[_CountingConnection]:
        with read() as conn:
            yield _CountingConnection(conn, counter)

    store.read = counted_read  # type: ignore[method-assign]
    try:
        return episode_list(mem)["episodes"], counter
    finally:
        del store.read


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("the episode list read an episode's records")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, robotmem_home: Path) -> str:
    return str(request.getfixturevalue("postgres_url") if request.param == "postgresql"
               else robotmem_home / "memory.db")


def test_the_list_costs_the_same_however_many_records_an_episode_holds(store: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(store, embedder=None) as mem:
        small = mem.start_session(context={"robot": {"id": "small"}})["session_id"]
        mem.learn("the small episode's only fact", session_id=small)
        big = mem.start_session(context={"robot": {"id": "big"}})["session_id"]
        mem.save_perception("episode summary", "procedural", session_id=big,
                            metadata={"episode": {"t_start_ns": 10**18, "t_end_ns": 10**18 + 5 * 10**9},
                                      "spatial": {"path_length_m": 2.5, "path_quality": "ok"}})
        for method in ("session_timeline", "get", "get_data"):
            monkeypatch.setattr(Memory, method, _refuse)
        rows_before, reference = _rows_and_cost(mem)
        monkeypatch.undo()
        records = [{"description": f"tactile chunk {i}", "perception_type": "tactile", "session_id": big,
                    "data": {"t": [0.0, 0.1], "fz": [1.0, 2.0]}, "embed": False} for i in range(2_000)]
        mem.save_perceptions(records)
        for method in ("session_timeline", "get", "get_data"):
            monkeypatch.setattr(Memory, method, _refuse)
        rows_after, cost = _rows_and_cost(mem)
    assert reference["statements"] > 0 and cost == reference  # the same with 2,000 more records in the episode
    before, after = ({r["robot"]: r for r in rows} for rows in (rows_before, rows_after))
    assert (before["big"]["perceptions"], after["big"]["perceptions"]) == (1, 2_001)
    assert (after["big"]["start"], after["big"]["duration_s"], after["big"]["path_length_m"]) == (1e9, 5.0, 2.5)
    assert (after["small"]["facts"], after["small"]["perceptions"]) == (1, 0)


def test_the_episode_page_reads_one_timeline_page_of_contents_and_no_full_record(
        store: str, tactile_episode: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A big episode's page reads its records narrow (robotmem.store.outline) and the content of the
    lines it sends only; the rest of the timeline is a page number away."""
    full_rows: list[int] = []
    contents: list[int] = []

    def count_contents(conn: Any, session_id: str, sections: Any, count: int, **where: Any) -> list[dict[str, Any]]:
        lines = session_lines(conn, session_id, sections, count, **where)
        contents.extend(line["id"] for line in lines)
        return lines

    with Memory(store, embedder=None) as mem:
        sid = tactile_episode(mem, 1_500)
        mem.end_session(sid)
        fetch_rows = mem._db.fetch_rows
        monkeypatch.setattr(mem._db, "fetch_rows", lambda conn, ids: full_rows.extend(ids) or fetch_rows(conn, ids))
        monkeypatch.setattr(episodes, "session_lines", count_contents)
        monkeypatch.setattr(Memory, "session_timeline", _refuse)
        detail = episode_detail(mem, sid)
        twice = episode_detail(mem, tactile_episode(mem, 3_000))
    assert full_rows == []  # not one record read whole (the episodes have no summary record)
    # a page of records each: the lines sent and the one the start marker line pushed off the page
    assert len(contents) == 2 * TIMELINE_PAGE
    lines = detail["timeline"]
    assert len(lines) == TIMELINE_PAGE and lines[0]["kind"] == "start" and lines[1]["content"] == "fingertip chunk 0"
    assert (detail["timeline_total"], detail["timeline_page"], detail["timeline_next_page"]) == (1_502, 0, 1)
    assert len(detail["series"]["forces"][0]["t"]) > 0  # the page still draws every record's curve
    # what the page downloads does not grow with the episode: twice the records, about the same size
    assert len(json.dumps(twice)) < 1.1 * len(json.dumps(detail))


def test_what_the_page_draws_from_narrow_records_is_what_full_records_give(store: str) -> None:
    """Every context value a path, a curve or a gap is drawn from is among those read (OUTLINE_PATHS)."""
    with Memory(store, embedder=None) as mem:
        sid = mem.start_session(context={"episode": {"gaps": [{"start": 5.0, "end": 6.0, "reason": "episode's"}]}})[
            "session_id"]
        pose = {"source": {"topic": "/odom"}, "spatial": {"start_position": [0, 0, 0], "end_position": [3, 0, 0],
                                                          "position": [1, 0, 0], "frame": "odom"}}
        mem.save_perception("pose chunk", "proprioceptive", session_id=sid, metadata={
            **pose, "episode": {"t_ns": 10**18, "gaps": [{"start": 101.0, "end": 102.0, "reason": "chunk's"}]}},
            data={"t0_ns": 100 * 10**9, "t": [0.0, 1.5, 2.5, 3.0], "x": [0.0, 1.0, 2.0, 3.0], "y": [0.0] * 4})
        mem.save_perception("joint travel, not a path", "proprioceptive", session_id=sid,
                            metadata={**pose, "params": {"joint_travel": 1.2}},
                            data={"t0_ns": 0, "t": [0.0, 1.0], "x": [5.0, 9.0], "y": [5.0, 9.0]})
        mem.save_perception("nearest obstacle", "visual", session_id=sid, metadata={"episode": {"t_ns": 7 * 10**9}},
                            data={"min_range": 0.4, "mean_range": 2.5})
        mem.save_perception("wrist force", "tactile", session_id=sid, metadata={"source": {"topic": "/wrist"}},
                            data={"t": [0.0, 0.1], "fz": [1.0, 2.0]})
        detail = episode_detail(mem, sid)
        full = mem.session_timeline(sid)
        payloads = mem.get_data_many([m["id"] for m in full["memories"]])
    assert detail["paths"] == episode_paths(full["session"], full["memories"], payloads) and detail["paths"]
    assert detail["series"] == episode_series(full["memories"], payloads)
    assert [s["t"] for s in detail["series"]["scans"]] == [[7.0], [7.0]]  # the scan's recorded time
    assert {(f["name"]) for f in detail["series"]["forces"]} == {"fz /wrist"}
    assert [g["reason"] for g in detail["gaps"]] == ["episode's", "chunk's"]
    assert [line["topic"] for line in detail["timeline"] if line["id"]] == ["/odom", "/odom", None, "/wrist"]


def _ids(lines: list[dict[str, Any]]) -> list[Any]:
    return [line["id"] if line["id"] is not None else line["kind"] for line in lines]


def test_the_pages_of_a_timeline_join_into_the_whole_in_order(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "TIMELINE_PAGE", 7)  # page edges fall on records, gaps and the end marker
    with Memory(store, embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": "r1"}})["session_id"]
        ids = [mem.save_perception(f"chunk {i}", "tactile", data={"t": [0.0], "fz": [float(i)]},
                                   session_id=sid)["memory_id"] for i in range(30)]  # one instant each
        mem.save_perception("the camera dropped out", "visual", session_id=sid,
                            metadata={"gaps": [{"start": 1.0, "end": 4.0, "reason": "disconnected"}]})
        between = mem.get(ids[16])["occurred_at"]  # a gap a later chunk records, among the earlier records
        mem.save_perception("odometry after the outage", "proprioceptive", session_id=sid,
                            metadata={"spatial": {"gaps": [{"start": between, "end": between + 9, "reason": "lost"}]}})
        mem.learn("the bin was full", session_id=sid)
        mem.forget(ids[3], "wrong sensor")  # a forgotten record stays on the timeline, marked
        mem.end_session(sid, outcome_score=0.5)
        whole = mem.session_timeline(sid)["memories"]
        pages = [episode_detail(mem, sid)]
        while pages[-1]["timeline_next_page"] is not None:
            pages.append(episode_timeline(mem, sid, pages[-1]["timeline_next_page"]))
        past_the_end = episode_timeline(mem, sid, len(pages))
    lines = [line for page in pages for line in page["timeline"]]
    assert [page["timeline_page"] for page in pages] == list(range(len(pages))) and len(pages) == 6
    assert all(len(page["timeline"]) == 7 for page in pages[:-1]) and 0 < len(pages[-1]["timeline"]) <= 7
    assert {page["timeline_total"] for page in pages} == {len(lines)} == {len(whole) + 4}  # start, 2 gaps, end
    records = [m["id"] for m in whole]
    at = records.index(ids[16])  # a gap comes before the records of its instant (it has no id)
    assert _ids(lines) == ["gap", "start", *records[:at], "gap", *records[at:], "end"]  # the first: at 1-4 s
    assert [line["content"] for line in lines if line["id"]] == [m["content"] for m in whole]
    assert [line["status"] for line in lines if line["id"] == ids[3]] == ["forgotten"]
    assert (past_the_end["timeline"], past_the_end["timeline_next_page"]) == ([], None)


@pytest.mark.parametrize("page", [-1, 2.5, "1", True])
def test_a_page_that_is_not_a_whole_number_from_0_is_refused_naming_it(page: Any) -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        with pytest.raises(ValidationError) as refused:
            episode_timeline(mem, sid, page)
    assert refused.value.field == "page"


def test_lines_after_a_cursor_are_neither_repeated_nor_lost_when_earlier_records_arrive(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "TIMELINE_PAGE", 5)
    with Memory(store, embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": "r1"}})["session_id"]
        t0 = mem.get_session(sid)["started_at"]
        for i in range(12):
            mem.save_perception(f"odom {i}", "proprioceptive", session_id=sid, occurred_at=t0 + 1 + i)
        for topic in ("/cam1", "/cam2"):  # topics quiet from one instant: lines of the same time
            mem.save_perception("gap holder", "visual", session_id=sid, occurred_at=t0 + 20,
                                metadata={"gaps": [{"start": t0 + 3.5, "end": t0 + 4.5, "topic": topic}]})
        mem.save_perception("gap holder", "visual", session_id=sid, occurred_at=t0 + 21,
                            metadata={"gaps": [{"start": t0 + 3.5, "end": t0 + 5, "topic": "/lidar"},
                                               {"start": t0 + 3.5, "end": t0 + 5, "topic": "/imu"}]})
        first = episode_timeline(mem, sid)
        shown = first["timeline"]
        body = first
        while body["timeline_next"] is not None:
            # a late record, stamped before every line shown so far: page N would repeat a line
            mem.save_perception("late camera frame", "visual", session_id=sid, occurred_at=t0 + 0.5)
            body = episode_timeline(mem, sid, after=body["timeline_next"])
            shown += body["timeline"]
        whole = episode_timeline(mem, sid, at=t0 - 1)
        monkeypatch.setattr(episodes, "TIMELINE_PAGE", 1000)
        everything = episode_timeline(mem, sid)["timeline"]
    keys = [(line["id"], line["kind"], line["topic"], line["time"]) for line in shown]
    late = {line["id"] for line in everything if line["content"] == "late camera frame"}
    assert len(keys) == len(set(keys))  # no line twice
    assert [line for line in everything if line["id"] not in late] == shown  # every other line, in order
    assert sum(line["kind"] == "gap" for line in shown) == 4  # four gaps from one instant, each once
    assert whole["timeline_first"] == 0 and whole["timeline"] == everything[:5]


def test_at_opens_the_timeline_at_a_time_or_its_end(store: str) -> None:
    with Memory(store, embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": "r1"}})["session_id"]
        t0 = mem.get_session(sid)["started_at"]
        ids = [mem.save_perception(f"odom {i}", "proprioceptive", session_id=sid, occurred_at=t0 + 1 + i)["memory_id"]
               for i in range(TIMELINE_PAGE + 10)]
        end = episode_timeline(mem, sid, at="end")
        middle = episode_timeline(mem, sid, at=str(t0 + 100.5))
        past = episode_timeline(mem, sid, at=str(t0 + 1e6))
    assert [line["id"] for line in end["timeline"]] == ids[-TIMELINE_PAGE:]  # open: no end marker
    assert end["timeline_first"] == 11 and end["timeline_next"] is None  # the start marker and 10 records before
    assert middle["timeline"][0]["id"] == ids[100] and middle["timeline_first"] == 101  # after the start marker
    assert middle["timeline_page"] is None and len(middle["timeline"]) == TIMELINE_PAGE + 11 - 101
    assert past["timeline"] == [] and past["timeline_next"] is None


@pytest.mark.parametrize(("given", "field"), [({"after": "[1,2"}, "after"), ({"after": "[1,1,1,0,1]"}, "after"),
                                              ({"after": '[NaN,1,1,0,""]'}, "after"), ({"at": "yesterday"}, "at"),
                                              ({"page": 1, "at": "end"}, "at"), ({"after": "[]", "at": "end"}, "at")])
def test_a_bad_cursor_or_time_is_refused_naming_it(given: dict[str, Any], field: str) -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        with pytest.raises(ValidationError) as refused:
            episode_timeline(mem, sid, **given)
    assert refused.value.field == field


def test_a_page_is_built_with_the_cyclic_collector_off_and_leaves_it_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # its passes over the few million objects of a 100,000-record page took a third of the build
    seen: list[bool] = []
    real = episodes.episode_paths

    def paths(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(episodes, "episode_paths", paths)
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        assert gc.isenabled()
        episode_detail(mem, sid)
        assert seen == [False] and gc.isenabled()
        monkeypatch.setattr(episodes, "episode_series", lambda *args: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            episode_detail(mem, sid)
        assert gc.isenabled()
        gc.disable()  # an application that turned it off keeps it off
        try:
            monkeypatch.setattr(episodes, "episode_series", episode_series)
            episode_detail(mem, sid)
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_a_pages_records_are_freed_before_the_collector_is_on_again(
        tactile_episode: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector's first pass after a build goes over whatever the build left alive: with the
    records of a 100,000-chunk page still alive it took 0.4-0.5 s of the request."""
    alive: list[int] = []
    real = gc.enable

    def enable() -> None:
        alive.append(sum(isinstance(o, dict) and o.get("type") == "perception" for o in gc.get_objects()))
        real()

    with Memory(embedder=None) as mem:
        sid = tactile_episode(mem, 2_000)
        monkeypatch.setattr(gc, "enable", enable)
        detail = episode_detail(mem, sid)
    assert len(alive) == 1 and detail["timeline_total"] == 2_001
    assert alive[0] < TIMELINE_PAGE  # not one narrow record of each of the 2,000 chunks


# -- a timeline page from its place in the episode's time order ------------------------------------


def _sql_order(store: str, sid: str) -> list[tuple[float, int]]:
    """The episode's records as (occurred_at, id) in time order, ties by id: plain SQL on a
    connection of its own, sorted here."""
    if store.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store) as conn:
            rows = conn.execute("SELECT occurred_at, id FROM memories WHERE session_id = %s", (sid,)).fetchall()
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(store)) as conn:
            rows = conn.execute("SELECT occurred_at, id FROM memories WHERE session_id = ?", (sid,)).fetchall()
    return sorted((float(at), int(mid)) for at, mid in rows)


def _tied_episode(mem: Memory, records: int, end: bool = True) -> tuple[str, float]:
    """An episode (ended unless ``end`` is false) whose records share their instants three by three, written out of time
    order (ids do not follow time), with a gap recorded by one of them."""
    sid = mem.start_session(context={"robot": {"id": "r1"}})["session_id"]
    t0 = mem.get_session(sid)["started_at"]
    order = list(range(records))
    random.Random(5).shuffle(order)
    mem.save_perceptions([{"description": f"chunk {i}", "perception_type": "tactile", "session_id": sid,
                           "occurred_at": t0 + 1 + i // 3, "embed": False} for i in order])
    mem.save_perception("the camera dropped out", "visual", session_id=sid, occurred_at=t0 + 4,
                        metadata={"gaps": [{"start": t0 + 4, "end": t0 + 6, "reason": "disconnected"}]})
    if end:
        mem.end_session(sid, outcome_score=0.5)
    return sid, t0


def _place_of(line: dict[str, Any]) -> tuple[float, int]:
    return line["time"], line["id"]


def test_timeline_pages_are_the_records_of_plain_sql_in_order_across_ties_and_writes_meanwhile(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record exactly once and in (occurred_at, id) order, page edges falling among records of
    one instant; a record written while the person pages shows if it comes after the last line
    shown (a tie at that line's instant with a larger id too), and not if it comes before."""
    monkeypatch.setattr(episodes, "TIMELINE_PAGE", 7)
    with Memory(store, embedder=None) as mem:
        sid, t0 = _tied_episode(mem, 60, end=False)  # records are written into it while it is paged
        body = episode_timeline(mem, sid)
        pages, behind = [body], set()
        while body["timeline_next"] is not None:
            time_, _kind, last_id, *_ = json.loads(body["timeline_next"])
            times = (time_ - 0.5, time_, time_ + 0.5)  # before the last line shown, a tie with it, after it
            written = [mem.save_perception(f"meanwhile {len(pages)} {n}", "tactile", session_id=sid,
                                           occurred_at=at)["memory_id"] for n, at in enumerate(times)]
            behind |= {mid for mid, at in zip(written, times) if (at, mid) <= (time_, last_id)}
            body = episode_timeline(mem, sid, after=body["timeline_next"])
            pages.append(body)
        expected = [mid for _, mid in _sql_order(store, sid) if mid not in behind]
        mem.end_session(sid)
        numbered = [episode_timeline(mem, sid, 0)]
        while numbered[-1]["timeline_next_page"] is not None:
            numbered.append(episode_timeline(mem, sid, numbered[-1]["timeline_next_page"]))
        everything = _sql_order(store, sid)
    lines = [line for page in pages for line in page["timeline"]]
    assert [line["id"] for line in lines if line["id"] is not None] == expected
    assert len(behind) == len(pages) - 1  # the record written before the last line shown, each time
    times = [line["time"] for line in lines]
    assert times == sorted(times) and [line["kind"] for line in lines].count("gap") == 1
    assert lines[0]["kind"] == "start"
    # by page number, once nothing is written: every record, the markers and the gap, each once
    by_number = [line for page in numbered for line in page["timeline"]]
    assert [line["id"] for line in by_number if line["id"] is not None] == [mid for _, mid in everything]
    assert [page["timeline_first"] for page in numbered] == [7 * n for n in range(len(numbered))]
    assert {page["timeline_total"] for page in numbered} == {len(by_number)} == {len(everything) + 3}
    assert all(len(page["timeline"]) == 7 for page in numbered[:-1])


def test_a_timeline_page_at_a_time_or_the_end_is_where_plain_sql_puts_it(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "TIMELINE_PAGE", 7)
    with Memory(store, embedder=None) as mem:
        sid, t0 = _tied_episode(mem, 60)
        monkeypatch.setattr(episodes, "TIMELINE_PAGE", 10_000)
        whole = episode_timeline(mem, sid)["timeline"]
        monkeypatch.setattr(episodes, "TIMELINE_PAGE", 7)
        ats = {at: episode_timeline(mem, sid, at=str(at)) for at in (t0 - 1, t0, t0 + 4, t0 + 7.5, t0 + 20, t0 + 99)}
        end = episode_timeline(mem, sid, at="end")
        records = _sql_order(store, sid)
    assert [line["id"] for line in whole if line["id"] is not None] == [mid for _, mid in records]
    for at, body in ats.items():
        first = sum(line["time"] < at for line in whole)  # the lines before the time
        assert body["timeline_first"] == first and body["timeline"] == whole[first:first + 7], at
    assert end["timeline"] == whole[-7:] and end["timeline_first"] == len(whole) - 7 and end["timeline_next"] is None


def _plans(mem: Memory, statements: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    """The query plan of each statement, as text, the planner kept off full reads it could avoid
    (a tiny table is otherwise read whole on PostgreSQL, whatever its indexes)."""
    plans = []
    with mem.store.read() as conn:
        postgres = dialect_of(conn) == "postgresql"
        if postgres:
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_bitmapscan = off")
        for sql, params in statements:
            rows = conn.execute(("EXPLAIN " if postgres else "EXPLAIN QUERY PLAN ") + sql, params).fetchall()
            plans.append("\n".join(str(row[0] if postgres else row[3]) for row in rows))
    return plans


def test_a_timeline_page_reads_its_own_records_from_the_index_not_every_record(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """However long the episode, a page returns about its own lines' rows, and the statements that
    find them walk the index on (session_id, occurred_at, id) in its order: no sort of the episode."""
    monkeypatch.setattr(episodes, "TIMELINE_PAGE", 20)
    with Memory(store, embedder=None) as mem:
        sid, t0 = _tied_episode(mem, 600)
        start = episode_timeline(mem, sid)
        queries: dict[str, dict[str, Any]] = {
            "page": {"page": 0}, "page 7": {"page": 7}, "after": {"after": start["timeline_next"]},
            "at": {"at": str(t0 + 100)}, "end": {"at": "end"}}
        statements: list[tuple[str, tuple[Any, ...]]] = []
        rows = {}
        for name, query in queries.items():
            counter = {"statements": 0, "rows": 0}
            read = mem.store.read

            @contextmanager
            def counted_read(read: Any = read, counter: dict[str, int] = counter) -> Iterator[_CountingConnection]:
                with read() as conn:
                    yield _CountingConnection(conn, counter, statements)

            monkeypatch.setattr(mem.store, "read", counted_read)
            body = episode_timeline(mem, sid, **query)
            monkeypatch.undo()
            monkeypatch.setattr(episodes, "TIMELINE_PAGE", 20)
            assert len(body["timeline"]) == 20, name
            rows[name] = counter["rows"]
        paging = [(sql, params) for sql, params in statements
                  if ("ORDER BY m.occurred_at" in sql or "ORDER BY occurred_at" in sql or sql.startswith("SELECT count(*)"))
                  and not sql.startswith(_SUMMARY_IDS[:40]) and "IS NOT NULL OR" not in sql]
        plans = _plans(mem, paging)
        summaries = [(sql, params) for sql, params in statements if sql.startswith(_SUMMARY_IDS[:40])]
        summary_plans = _plans(mem, summaries)
        gap_holders = [(sql, params) for sql, params in statements if "IS NOT NULL OR" in sql]
        gap_plans = _plans(mem, gap_holders)
    assert all(count <= 20 + 10 for count in rows.values()), rows  # the page's records and a few more rows
    assert len(paging) >= 10
    for (sql, _), plan in zip(paging, plans):
        assert "memories_by_session_time" in plan and "TEMP B-TREE" not in plan and "Sort" not in plan, (sql, plan)
    # the markers' episode row: its summary from an index of summaries, no count of every record
    assert len(summaries) == len(queries) and all("memories_summaries" in plan for plan in summary_plans), summary_plans
    assert not any(sql.startswith(_ACTIVE_COUNTS[:40]) for sql, _ in statements)
    # and the records that record gaps from an index of them, not a look into every record's context
    assert len(gap_holders) == len(queries) and all("memories_gap_holders" in plan for plan in gap_plans), gap_plans


def test_overviews_without_counts_find_the_same_summary(store: str) -> None:
    with Memory(store, embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.save_perception("episode summary", "procedural", session_id=sid, occurred_at=1e9 + 5)
        newest = mem.save_perception("episode summary, again", "procedural", session_id=sid, occurred_at=1e9 + 9)
        mem.save_perception("later, but forgotten", "procedural", session_id=sid, occurred_at=1e9 + 20)
        mem.forget(mem.session_timeline(sid)["memories"][-1]["id"], "a test")
        mem.learn("a fact", session_id=sid)
        counted = mem.session_overviews([sid, "ses_000000000000"])
        uncounted = mem.session_overviews([sid, "ses_000000000000"], counts=False)
        with pytest.raises(ValidationError) as refused:
            mem.session_overviews([sid], counts="no")
    assert counted[sid]["summary"]["id"] == uncounted[sid]["summary"]["id"] == newest["memory_id"]
    assert (counted[sid]["facts"], counted[sid]["perceptions"]) == (1, 2)
    assert (uncounted[sid]["facts"], uncounted[sid]["perceptions"]) == (None, None)
    assert uncounted["ses_000000000000"] == {"facts": None, "perceptions": None, "summary": None}
    assert refused.value.field == "counts"
