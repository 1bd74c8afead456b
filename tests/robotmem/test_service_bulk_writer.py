"""Memory.bulk_writer(): batches committed on a worker thread store what save_perceptions stores.

Runs on both backends (the conformance suite). The oracle for what a filter, a text query or
a spatial sort must find is computed here from the records themselves.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from robotmem import ConflictError, Memory, StorageError, ValidationError


def _records(collection: str, start: int, n: int) -> list[dict[str, Any]]:
    return [{
        "description": f"push trial {i}: the cube slid {i % 7} cm past the mark",
        "perception_type": "tactile",
        "collection": collection,
        "metadata": {
            "params": {"grip_force": {"value": round(1 + (i * 3.7) % 20, 2), "unit": "N"}},
            "task": {"name": ["pick", "push"][i % 2], "success": i % 3 == 0},
            "spatial": {"object_position": [round(i * 0.1, 3), round(-i * 0.05, 3), 0.02]},
            "robot": {"id": f"arm-{i % 3}", "part": f"RG2-FT-{400 + i}"},
        },
        "data": {"force": [0.5 * i, 0.25 * i]} if i % 4 == 0 else None,
    } for i in range(start, start + n)]


BATCHES = [(0, 12), (12, 1), (13, 17)]  # one batch of a single record goes the single-row way


def _contents(hits: dict[str, Any]) -> list[str]:
    return [hit["content"] for hit in hits["results"]]


def test_batches_of_a_bulk_writer_are_stored_as_save_perceptions_stores_them(hybrid_mem: Memory) -> None:
    records = [r for start, n in BATCHES for r in _records("bulk", start, n)]
    with hybrid_mem.bulk_writer() as writer:
        ids = [i for start, n in BATCHES for i in writer.save_perceptions(_records("bulk", start, n))]
    for start, n in BATCHES:
        hybrid_mem.save_perceptions(_records("plain", start, n))

    assert ids == sorted(ids) and len(set(ids)) == len(records)
    for memory_id, record in zip(ids, records):
        stored = hybrid_mem.get(memory_id)
        assert (stored["content"], stored["context"], stored["collection"]) == (
            record["description"], record["metadata"], "bulk")
        if record["data"] is not None:
            assert hybrid_mem.get_data(memory_id) == record["data"]
    bulk, plain = hybrid_mem.stats("bulk"), hybrid_mem.stats("plain")
    assert bulk["memories"] == plain["memories"] == len(records)
    assert bulk["embeddings"] == plain["embeddings"] == {hybrid_mem.embedder.model_id: len(records)}  # type: ignore[union-attr]

    # A selective filter (the leaf index), an identifier that only the context holds (full text)
    # and nearest-first order (the spatial index), each against the records themselves.
    wanted = {r["description"] for r in records
              if r["metadata"]["task"]["success"] and r["metadata"]["params"]["grip_force"]["value"] < 10}
    target = [1.03, -0.5, 0.02]  # no two records equally far
    nearest = sorted(records, key=lambda r: math.dist(r["metadata"]["spatial"]["object_position"], target))
    for collection in ("bulk", "plain"):
        found = hybrid_mem.recall("", collection=collection, n=50, min_relevance=0, context_filter={
            "task.success": True, "params.grip_force.value": {"$lt": 10}})
        assert set(_contents(found)) == wanted
        assert _contents(hybrid_mem.recall("RG2-FT-417", collection=collection, n=1))[0] == records[17]["description"]
        by_place = hybrid_mem.recall("", collection=collection, n=5, min_relevance=0, spatial_sort={
            "field": "spatial.object_position", "target": target})
        assert _contents(by_place) == [r["description"] for r in nearest[:5]]
    # The vectors went in too: a paraphrase's cosines are the same in both collections.
    by_meaning = [[(hit["content"], hit["similarity"]) for hit in hybrid_mem.recall(
        "block slid beyond the line", collection=collection, n=5, min_relevance=0)["results"]]
        for collection in ("bulk", "plain")]
    assert by_meaning[0] == by_meaning[1] and all(similarity > 0.2 for _, similarity in by_meaning[0])


def test_a_batch_is_seen_by_another_store_handle_once_flushed(mem: Memory, db_path: Any) -> None:
    with mem.bulk_writer() as writer:
        writer.save_perceptions(_records("default", 0, 5))
        writer.flush()
        with Memory(db_path, embedder=None) as other:
            assert other.stats()["memories"] == 5
        writer.save_perceptions(_records("default", 5, 5))
    assert mem.stats()["memories"] == 10


def test_a_bad_record_is_refused_at_once_and_nothing_of_its_batch_is_written(mem: Memory) -> None:
    bad = _records("default", 10, 3)
    bad[1]["metadata"]["task"] = 3
    with mem.bulk_writer() as writer:
        ids = writer.save_perceptions(_records("default", 0, 4))
        with pytest.raises(ValidationError) as info:
            writer.save_perceptions(bad)
        assert info.value.field == "records[1].metadata.task"
        ids += writer.save_perceptions(_records("default", 20, 2))
    assert mem.stats()["memories"] == 6
    expected = _records("default", 0, 4) + _records("default", 20, 2)
    assert [mem.get(i)["content"] for i in ids] == [r["description"] for r in expected]


def test_a_record_for_an_ended_episode_is_refused_as_save_perceptions_refuses_it(mem: Memory) -> None:
    session = mem.start_session()["session_id"]
    mem.end_session(session)
    with mem.bulk_writer() as writer:
        with pytest.raises(ConflictError) as info:
            writer.save_perceptions([{"description": "late reading", "session_id": session}])
        assert info.value.field == "records[0].session_id"  # the record, as every batch field error
    assert mem.stats()["memories"] == 0


def test_closing_the_memory_stores_the_last_batch_of_an_open_writer(db_path: Any) -> None:
    memory = Memory(db_path, embedder=None)
    writer = memory.bulk_writer()
    ids = writer.save_perceptions(_records("default", 0, 7))
    memory.close()
    with Memory(db_path, embedder=None) as reopened:
        assert [reopened.get(i)["content"] for i in ids] == [r["description"] for r in _records("default", 0, 7)]
    with pytest.raises(StorageError):
        writer.save_perceptions(_records("default", 7, 1))


def _refuse_poison(memory: Memory) -> None:
    """A real statement of a batch's index step fails on the worker: the leaf index refuses a value."""
    memory.store.connection().execute(  # type: ignore[attr-defined]
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON context_leaves WHEN new.value = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned leaf'); END")


@pytest.mark.sqlite_only
def test_closing_the_memory_closes_every_writer_and_raises_the_failure(tmp_path: Path) -> None:
    db = tmp_path / "two-writers.db"
    memory = Memory(db, embedder=None)
    _refuse_poison(memory)
    failing, fine = memory.bulk_writer(), memory.bulk_writer()
    poisoned = _records("default", 0, 2)
    poisoned[0]["metadata"]["robot"]["id"] = "poison"
    failing.save_perceptions(poisoned)
    kept = fine.save_perceptions(_records("default", 10, 3))  # waits for the write lock, then is handed over
    with pytest.raises(StorageError):
        memory.close()
    with Memory(db, embedder=None) as reopened:
        assert reopened.stats()["memories"] == 3
        assert [reopened.get(i)["content"] for i in kept] == [r["description"] for r in _records("default", 10, 3)]


@pytest.mark.sqlite_only
def test_a_batch_whose_index_statement_fails_is_reported_by_the_next_call_and_not_stored(tmp_path: Path) -> None:
    db = tmp_path / "poisoned.db"
    with Memory(db, embedder=None) as memory:
        _refuse_poison(memory)
        poisoned = _records("default", 10, 4)
        poisoned[2]["metadata"]["robot"]["id"] = "poison"
        with memory.bulk_writer() as writer:
            first = writer.save_perceptions(_records("default", 0, 3))
            lost = writer.save_perceptions(poisoned)  # handed over: the failure comes later
            with pytest.raises(StorageError) as info:
                writer.save_perceptions(_records("default", 20, 3))
            assert "writing to the memory store failed" in info.value.message
            after = writer.save_perceptions(_records("default", 30, 2))
        assert len(lost) == 4 and len(first) + len(after) == 5
        conn = memory.store.connection()  # type: ignore[attr-defined]
        stored = {content for (content,) in conn.execute("SELECT content FROM memories")}
        assert stored == {r["description"] for r in _records("default", 0, 3) + _records("default", 30, 2)}
        # The rows and the indexes agree: every stored memory has its leaves and its full-text entry.
        assert conn.execute("SELECT count(DISTINCT memory_id) FROM context_leaves").fetchone()[0] == 5
        assert conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0] == 5


def test_a_word_past_postgresqls_lexeme_limit_in_a_batch_is_stored_with_the_batches_around_it(mem: Memory) -> None:
    word = "ж" * 1100  # 2,200 bytes: PostgreSQL takes lexemes of at most 2,046 (tokens are cut there)
    with mem.bulk_writer() as writer:
        for description in ("bulk frame A", word, "bulk frame C"):
            writer.save_perceptions([{"description": description, "collection": "bulk"}])
    everything = mem.recall("", collection="bulk", context_filter={"x": {"$exists": False}}, n=10, min_confidence=0)
    assert sorted(_contents(everything)) == sorted(["bulk frame A", word, "bulk frame C"])
    assert _contents(mem.recall(word, collection="bulk", min_relevance=0)) == [word]


def test_a_bulk_writers_load_ends_with_the_vector_index_written_as_an_import_does(
        db_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk writer's load into a new collection left it without its vector index: on SQLite no
    snapshot (the next process's first recall loaded an exact mirror of the whole collection, 1.5 KB a
    vector), on PostgreSQL an HNSW index left unbuilt by a batch of BULK_ROWS or more (recall scanned
    exactly until some single write built it). Closing the writer now ends the load as an import does;
    a load stopped by an exception, a writer made with write_indexes=False, or one Memory.close
    closes, writes no index."""
    from test_service_sessions import TextVectors

    from robotmem.search import ann_index
    from robotmem.store.postgres.memories import BULK_ROWS

    monkeypatch.setattr(ann_index, "MIN_ROWS", 60)  # SQLite's snapshot threshold, 20,000 otherwise
    n = BULK_ROWS + 10

    def built(mem: Memory, collection: str) -> list[bool]:
        return [s["built"] and not s["stale"] for s in mem.stats(collection)["vector_indexes"]]

    with Memory(db_path, embedder=TextVectors()) as mem:
        with mem.bulk_writer() as writer:
            writer.save_perceptions(_records("loaded", 0, n))
        assert built(mem, "loaded") == [True]

        with pytest.raises(RuntimeError), mem.bulk_writer() as writer:
            writer.save_perceptions(_records("stopped", 0, n))
            raise RuntimeError("the load stopped")
        assert mem.stats("stopped")["memories"] == n and built(mem, "stopped") == [False]

        with mem.bulk_writer(write_indexes=False) as writer:  # a write path timed on its own
            writer.save_perceptions(_records("unindexed", 0, n))
        assert built(mem, "unindexed") == [False]
        with pytest.raises(ValidationError) as refused:
            mem.bulk_writer(write_indexes="no")  # type: ignore[arg-type]
        assert refused.value.field == "write_indexes"

        left_open = mem.bulk_writer()
        left_open.save_perceptions(_records("left_open", 0, n))
    with Memory(db_path, embedder=TextVectors()) as mem:
        assert mem.stats("left_open")["memories"] == n and built(mem, "left_open") == [False]
        left_open.close()  # after its Memory closed: nothing more to do
