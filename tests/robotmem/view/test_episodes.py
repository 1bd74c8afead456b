"""Episode rows: what a list needs without reading every record, on either backend."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from robotmem import Memory
from robotmem.view import episode_detail, episode_rows
from robotmem.view.episodes import MAX_TIMELINE


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
        return episode_rows(mem), counter
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


def test_the_timeline_sent_is_capped_and_counts_what_it_leaves_out(tactile_episode: Callable[..., str]) -> None:
    with Memory(embedder=None) as mem:
        sid = tactile_episode(mem, 1_500)
        mem.end_session(sid)
        detail = episode_detail(mem, sid)
        twice = episode_detail(mem, tactile_episode(mem, 3_000))
    lines = detail["timeline"]
    assert len(lines) == MAX_TIMELINE + 1 and detail["timeline_omitted"] == 1_500 + 2 - MAX_TIMELINE
    assert (lines[0]["kind"], lines[-1]["kind"]) == ("start", "end")  # both ends of the episode stay in view
    (note,) = [line for line in lines if line["kind"] == "omitted"]
    assert f"{detail['timeline_omitted']:,} more lines" in note["content"] and sid in note["content"]
    # what the page downloads does not grow with the episode: twice the records, about the same size
    assert len(json.dumps(twice)) < 1.1 * len(json.dumps(detail))
