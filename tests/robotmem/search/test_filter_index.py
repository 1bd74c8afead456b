"""The leaf index (store/leaves.py) against the reference evaluator: its candidate sets never miss a match."""

import json

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotmem.search.filter_index import smallest
from robotmem.search.filters import compile_filter
from robotmem.store.leaves import DEFER_LEAVES, EPOCH_BITS, EPOCH_LEAVES, LEAVES_SCHEMA, epoch_list

from filter_reference import matches
from test_filters import _context, filters

ODD_KEYS = ["grip_force", "9a", "a b", "x-y", "é", "q\"z", "a[0]", "CamelCase2"]
#: Memory ids are positions times this: consecutive memories often fall in different epochs of
#: the leaf index's key, so every lookup is tested across epochs. The other collection's ids are
#: one higher, and any of them in an answer is a leak.
SPREAD = (1 << EPOCH_BITS) // 3 + 1


@pytest.fixture(scope="module")
def conn():
    c = apsw.Connection(":memory:")
    c.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, collection TEXT NOT NULL, context BLOB NOT NULL)")
    for step in (LEAVES_SCHEMA, DEFER_LEAVES, EPOCH_LEAVES):  # migrations 6, 9 and 14
        c.execute(step)
    return c


def _fill(conn, contexts, collection="c"):
    conn.execute("DELETE FROM memories")
    conn.executemany("INSERT INTO memories (id, collection, context) VALUES (?, ?, jsonb(?))",
                     [(i * SPREAD, collection, json.dumps(c)) for i, c in enumerate(contexts)])
    # Another collection with the same contexts: candidates must not leak across.
    conn.executemany("INSERT INTO memories (id, collection, context) VALUES (?, 'other', jsonb(?))",
                     [(i * SPREAD + 1, json.dumps(c)) for i, c in enumerate(contexts)])


def _positions(rows):
    """The positions in ``contexts`` of the memory ids in the first column of ``rows``."""
    ids = [row[0] for row in rows]
    assert all(i % SPREAD == 0 for i in ids), "a memory of the other collection"
    return {i // SPREAD for i in ids}


def _exact(conn, compiled, ids):
    q = f"SELECT m.id FROM json_each(?) j CROSS JOIN memories m ON m.id = j.value WHERE {compiled.sql}"
    return _positions(conn.execute(q, [json.dumps(sorted(i * SPREAD for i in ids)), *compiled.params]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contexts=st.lists(_context(), min_size=1, max_size=12), spec=filters)
def test_every_leaf_candidate_set_holds_every_match(conn, contexts, spec):
    _fill(conn, contexts)
    compiled = compile_filter(spec)
    expected = {i for i, c in enumerate(contexts) if matches(c, spec)}
    for leaf_set in compiled.candidates:
        q, p = leaf_set.query("c", epoch_list(conn))
        ids = _positions(conn.execute(q, p))
        assert expected <= ids, (spec, contexts)
        assert _exact(conn, compiled, ids) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    contexts=st.lists(st.dictionaries(st.sampled_from(ODD_KEYS), st.one_of(
        st.integers(-3, 3), st.sampled_from(["a", "b"]), st.booleans(), st.none(),
        st.dictionaries(st.sampled_from(ODD_KEYS), st.integers(-3, 3), max_size=2))), min_size=1, max_size=8),
    key=st.lists(st.sampled_from(ODD_KEYS), min_size=1, max_size=2).map(".".join),
    op=st.sampled_from(["$eq", "$gte", "$lt", "$exists", "$in"]),
    value=st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"])),
)
def test_odd_keys_are_either_indexed_exactly_or_left_to_the_scan(conn, contexts, key, op, value):
    _fill(conn, contexts)
    arg = True if op == "$exists" else [value] if op == "$in" else value
    spec = {key: {op: arg}}
    compiled = compile_filter(spec)
    expected = {i for i, c in enumerate(contexts) if matches(c, spec)}
    for leaf_set in compiled.candidates:
        q, p = leaf_set.query("c", epoch_list(conn))
        assert expected <= _positions(conn.execute(q, p)), (spec, contexts)


def test_the_smallest_alternative_is_chosen(conn):
    _fill(conn, [{"task": {"success": True, "batch": i % 50}} for i in range(500)])
    compiled = compile_filter({"task.success": True, "task.batch": 7})
    chosen = smallest(conn, compiled.candidates, "c", cap=10_000, epochs=epoch_list(conn))
    assert chosen is not None and chosen[1] == 10
    q, p = chosen[0].query("c", epoch_list(conn))
    assert len(conn.execute(q, p).fetchall()) == 10


def test_negations_have_no_candidate_set():
    assert compile_filter({"a": {"$ne": 1}}).candidates == ()
    assert compile_filter({"a": {"$exists": False}}).candidates == ()
    assert compile_filter({"$or": [{"a": 1}, {"b": {"$nin": [1]}}]}).candidates == ()
    assert len(compile_filter({"$or": [{"a": 1}, {"b": {"$in": [1, 2]}}]}).candidates) == 1


def test_updates_and_deletes_keep_the_leaves_in_step(conn):
    _fill(conn, [{"a": 1}, {"a": 2}])
    conn.execute("UPDATE memories SET context = jsonb('{\"a\": 3, \"b\": {}}') WHERE id = 0")
    conn.execute("DELETE FROM memories WHERE id = ?", (SPREAD,))
    rows = conn.execute("SELECT path, value, kind, memory_id FROM context_leaves WHERE collection = 'c' "
                        "ORDER BY path").fetchall()
    assert rows == [("$.a", 3, "integer", 0), ("$.b", 0, "object", 0)]


def test_the_migration_fills_the_leaves_of_existing_memories(tmp_path):
    from robotmem import Memory
    from robotmem.store.migrations import migrate

    path = tmp_path / "old.db"
    conn = apsw.Connection(str(path))
    migrate(conn, to=5)
    conn.execute(
        "INSERT INTO memories (collection, type, content, search_text, context, content_hash, confidence, "
        "reinforced_at, first_seen, last_seen, created_at, occurred_at, updated_at) "
        "VALUES ('default', 'fact', 'old one', 'old one', jsonb('{\"task\": {\"batch\": 7}}'), 'h', 1, 0, 0, 0, 0, 0, 0)")
    migrate(conn)
    assert conn.execute("SELECT path, value FROM context_leaves").fetchall() == [("$.task.batch", 7)]
    conn.close()
    with Memory(path, embedder=None) as mem:
        assert [h["content"] for h in mem.recall("", min_confidence=0, context_filter={"task.batch": 7})["results"]] == ["old one"]


@pytest.fixture(scope="module")
def store():
    from robotmem.store.migrations import migrate

    c = apsw.Connection(":memory:")
    migrate(c)
    return c


def _new(context, text="x"):
    from robotmem.store.memories import NewMemory

    return NewMemory(collection="c", session_id=None, type="perception", perception_type="visual", content=text,
                     search_text=text, context=context, content_hash="h", protected=False, confidence=1.0, now=0.0,
                     occurred_at=0.0)


def _leaves_by_position(conn, ids):
    position = {memory_id: i for i, memory_id in enumerate(ids)}
    rows = conn.execute("SELECT collection, path, value, kind, memory_id FROM context_leaves "
                        "WHERE memory_id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)).fetchall()
    return sorted((c, p, json.dumps(v), k, position[m]) for c, p, v, k, m in rows)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contexts=st.lists(_context(), min_size=2, max_size=8))
def test_a_bulk_insert_indexes_the_same_leaves_and_text_as_the_per_row_triggers(store, contexts):
    from robotmem.store.memories import insert_memories, insert_memory

    store.execute("DELETE FROM memories")
    bulk = insert_memories(store, [_new(c, f"word{i}") for i, c in enumerate(contexts)])
    one_by_one = [insert_memory(store, _new(c, f"word{i}")) for i, c in enumerate(contexts)]
    assert _leaves_by_position(store, bulk) == _leaves_by_position(store, one_by_one)
    for i in range(len(contexts)):  # and the same full-text entries
        found = {r[0] for r in store.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (f"word{i}",))}
        assert found == {bulk[i], one_by_one[i]}
    assert store.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, -1) == 1


def test_a_failed_bulk_insert_leaves_the_trigger_on(store):
    from robotmem.store.deferred import insert_deferring_indexes

    def failing() -> list[int]:
        store.execute("INSERT INTO memories (collection, type, content, search_text, context, content_hash, "
                      "confidence, reinforced_at, first_seen, last_seen, created_at, occurred_at, updated_at) "
                      "VALUES ('c', 'fact', 'x', 'x', jsonb('{\"a\": 1}'), 'h', 1, 0, 0, 0, 0, 0, 0)")
        raise RuntimeError("the batch failed")

    store.execute("DELETE FROM memories")
    with pytest.raises(RuntimeError):
        insert_deferring_indexes(store, failing)
    store.execute("INSERT INTO memories (collection, type, content, search_text, context, content_hash, confidence, "
                  "reinforced_at, first_seen, last_seen, created_at, occurred_at, updated_at) "
                  "VALUES ('c', 'fact', 'y', 'y', jsonb('{\"b\": 2}'), 'h2', 1, 0, 0, 0, 0, 0, 0)")
    assert store.execute("SELECT path FROM context_leaves WHERE path = '$.b'").fetchall() == [("$.b",)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.sampled_from(["5", "05", "5.0", " 7", "4x", "abc", "", "10", 5, 4.5, "1e2"]), min_size=1,
                    max_size=8),
    op=st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$in"]),
    bound=st.sampled_from(["5", "4x", "10", "", "abc", "05", " 7"]),
)
def test_numeral_texts_stay_in_the_candidates(conn, values, op, bound):
    # The leaves store a text that reads as a number as that number: text ranges must still keep it.
    spec = {"f": {op: [bound] if op == "$in" else bound}}
    _fill(conn, [{"f": v} for v in values])
    expected = {i for i, v in enumerate(values) if matches({"f": v}, spec)}
    for leaf_set in compile_filter(spec).candidates:
        q, p = leaf_set.query("c", epoch_list(conn))
        assert expected <= _positions(conn.execute(q, p)), (values, spec)
