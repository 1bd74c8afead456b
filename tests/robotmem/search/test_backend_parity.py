"""The same workload on SQLite and PostgreSQL gives the same document frequencies and the same
recall answers after consolidation and forget.

SQLite's FTS5 index holds active and archived memories only (its triggers, migrations.py);
PostgreSQL counted every row's ``search_tsv``, superseded and forgotten included, so a word's
IDF, and with it relevance and consolidation's ``related``, differed once a store had merged
or forgotten memories (PostgreSQL migration 5 and ``document_frequencies``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from robotmem import Memory
from robotmem.search.relevance import document_frequencies


class Clock:
    """A settable clock, one per store, so both see the same times."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

OBJECTS = {"mug": "ceramic handle", "bottle": "plastic neck", "box": "cardboard lid", "cup": "paper rim",
           "can": "metal tab"}
WORDS = ["arm", "gripper", "slipped", "wet", "mug", "bottle", "box", "sink", "shelf", "slowly", "carefully",
         "approach", "closing", "holding", "ceramic", "tab", "nowhere"]
QUERIES = ["gripper slipped wet mug", "approach the bottle slowly", "arm shelf sink", "wet box holding",
           "closing the gripper carefully", "cup near the sink", "metal tab of the can slipped", "arm gripper",
           "paper rim", "ceramic handle slowly"]


def _workload(mem: Memory, clock: Clock) -> list[dict[str, Any]]:
    """12 sessions of notes; end_session merges the near-duplicates of one object (superseded
    rows); then every third approach note and the box's merged note are forgotten. Returns the
    end_session summaries."""
    summaries, approach, slipped = [], [], {}
    for e in range(12):
        sid = mem.start_session(context={"robot": {"id": f"arm-{e % 2}"}})["session_id"]
        obj = list(OBJECTS)[e % len(OBJECTS)]
        for k in range(3):
            clock.advance(10)
            text = (f"the arm gripper slipped while holding the wet {obj} {OBJECTS[obj]} near the sink on the "
                    f"left shelf {'again' if k % 2 else 'carefully'}")
            slipped.setdefault(obj, mem.learn(text, {"task": {"name": "pick"}}, session_id=sid)["memory_id"])
        clock.advance(10)
        text = f"approach the {obj} slowly with the arm before closing the gripper {e}"
        approach.append(mem.learn(text, {"task": {"name": "pick"}}, session_id=sid)["memory_id"])
        clock.advance(60)
        summaries.append(mem.end_session(sid, outcome_score=(e % 3) / 2))
    for memory_id in approach[::3]:
        mem.forget(memory_id, "wrong")
    box = mem.get(slipped["box"])
    mem.forget(box["superseded_by"] or box["id"], "wrong")
    return summaries


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, module_postgres_url: str) -> Iterator[dict[str, Any]]:
    """The workload on a SQLite file and on PostgreSQL, each with its summaries."""
    out: dict[str, Any] = {}
    opened = []
    for name, target in (("sqlite", tmp_path_factory.mktemp("parity") / "m.db"), ("postgresql", module_postgres_url)):
        clock = Clock()
        mem = Memory(target, clock=clock, embedder=None)
        opened.append(mem)
        out[name] = (mem, _workload(mem, clock))
    yield out
    for mem in opened:
        mem.close()


def _statuses(mem: Memory) -> list[str]:
    statuses = []
    for memory_id in range(1, 200):
        try:
            statuses.append(mem.get(memory_id)["status"])
        except Exception:  # past the last id
            break
    return statuses


def test_the_workload_leaves_superseded_and_forgotten_memories_alike(stores: dict[str, Any]):
    sqlite, postgres = _statuses(stores["sqlite"][0]), _statuses(stores["postgresql"][0])
    assert sqlite == postgres
    assert sqlite.count("superseded") >= 10 and sqlite.count("forgotten") >= 3


def test_document_frequencies_count_only_searchable_memories_on_both_stores(stores: dict[str, Any]):
    counts = {}
    for name, (mem, _) in stores.items():
        with mem._db.read() as conn:
            counts[name] = document_frequencies(conn, WORDS)
    assert counts["sqlite"] == counts["postgresql"]
    # Every memory has "arm", in its text or (robot id) not at all: the live ones are what is counted.
    mem = stores["sqlite"][0]
    live = [s for s in _statuses(mem) if s in ("active", "archived")]
    assert counts["postgresql"]["arm"] == len(live) and counts["postgresql"]["nowhere"] == 0


def test_document_frequencies_of_no_words_is_empty(stores: dict[str, Any]):
    with stores["postgresql"][0]._db.read() as conn:
        assert document_frequencies(conn, []) == {}


@pytest.mark.parametrize("query", QUERIES)
def test_recall_answers_the_same_on_both_stores(stores: dict[str, Any], query: str):
    answers = {}
    for name, (mem, _) in stores.items():
        answers[name] = [(h["id"], h["relevance"]) for h in
                         mem.recall(query, n=10, min_confidence=0, min_relevance=0)["results"]]
    sqlite, postgres = answers["sqlite"], answers["postgresql"]
    assert sqlite, query
    assert sorted(i for i, _ in sqlite) == sorted(i for i, _ in postgres)
    by_id = dict(postgres)
    assert all(abs(r - by_id[i]) <= 1e-6 for i, r in sqlite), (sqlite, postgres)
    # The default answer (min_relevance 0.5) too.
    defaults = {name: [h["id"] for h in mem.recall(query, n=5)["results"]] for name, (mem, _) in stores.items()}
    assert defaults["sqlite"] == defaults["postgresql"]


def test_consolidation_relates_the_same_memories_on_both_stores(stores: dict[str, Any]):
    related = {name: [[r["id"] for r in s["related"]] for s in summaries] for name, (_, summaries) in stores.items()}
    assert related["sqlite"] == related["postgresql"]
    assert any(related["sqlite"])


def test_outcome_stats_with_query_words_agree(stores: dict[str, Any]):
    stats = {name: mem.outcome_stats(group_by="robot.id", query="wet mug") for name, (mem, _) in stores.items()}
    assert stats["sqlite"] == stats["postgresql"]


def test_postgres_counts_a_word_once_per_read_snapshot(postgres_url: str):
    with Memory(postgres_url, embedder=None) as mem:
        ids = [mem.learn(f"zebra crossing note {i}")["memory_id"] for i in range(3)]
        with mem._db.read() as conn:
            statements = []
            execute = conn.execute

            def counting(query: str, params: Any = ()) -> Any:
                statements.append(query)
                return execute(query, params)

            conn.execute = counting  # type: ignore[method-assign]
            try:
                assert document_frequencies(conn, ["zebra", "crossing"]) == {"zebra": 3, "crossing": 3}
                assert document_frequencies(conn, ["crossing", "zebra", "nowhere"]) == {
                    "crossing": 3, "zebra": 3, "nowhere": 0}
            finally:
                del conn.execute
            assert len(statements) == 2 and statements[0] == statements[1]  # the second: "nowhere" alone
        mem.forget(ids[0], "test")
        with mem._db.read() as conn:  # a new snapshot counts anew
            assert document_frequencies(conn, ["zebra"]) == {"zebra": 2}
