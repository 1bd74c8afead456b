"""Episode rows and pages: what a list and a page need without reading every record, on either backend."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory
from robotmem.errors import ValidationError
from robotmem.store.outline import memory_outlines
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
    """A store connection that counts the statements run on it and the rows they return."""

    def __init__(self, conn: Any, counter: dict[str, int]) -> None:
        self._conn, self._counter = conn, counter

    def execute(self, *args: Any) -> _CountingCursor:
        self._counter["statements"] += 1
        return _CountingCursor(self._conn.execute(*args), self._counter)

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

    def count_contents(conn: Any, memory_ids: list[int], sections: Any) -> dict[int, dict[str, Any]]:
        contents.extend(memory_ids)
        return memory_outlines(conn, memory_ids, sections)

    with Memory(store, embedder=None) as mem:
        sid = tactile_episode(mem, 1_500)
        mem.end_session(sid)
        fetch_rows = mem._db.fetch_rows
        monkeypatch.setattr(mem._db, "fetch_rows", lambda conn, ids: full_rows.extend(ids) or fetch_rows(conn, ids))
        monkeypatch.setattr(episodes, "memory_outlines", count_contents)
        monkeypatch.setattr(Memory, "session_timeline", _refuse)
        detail = episode_detail(mem, sid)
        twice = episode_detail(mem, tactile_episode(mem, 3_000))
    assert full_rows == []  # not one record read whole (the episodes have no summary record)
    assert len(contents) == 2 * (TIMELINE_PAGE - 1)  # a page of each, less its start marker line
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
