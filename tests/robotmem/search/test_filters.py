import json
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotmem import Memory, ValidationError
from robotmem.search.filters import compile_filter

from filter_reference import matches

PATHS = ["params.force", "params.speed", "task.success", "task.name", "robot.id", "spatial.zone", "note"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 2)),
    st.sampled_from(["a", "b", "pick", "place", ""]),
)
orderable = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 2)),
                      st.sampled_from(["a", "b", "pick"]))


def _context() -> st.SearchStrategy[dict]:
    def build(values: dict) -> dict:
        ctx: dict = {}
        for path, value in values.items():
            node = ctx
            *parents, leaf = path.split(".")
            ok = True
            for p in parents:
                child = node.setdefault(p, {})
                if not isinstance(child, dict):
                    ok = False
                    break
                node = child
            if ok:
                node[leaf] = value
        return ctx

    return st.dictionaries(st.sampled_from(PATHS), st.one_of(scalars, st.lists(scalars, max_size=2)),
                           max_size=5).map(build)


def _clause() -> st.SearchStrategy[dict]:
    path = st.sampled_from(PATHS)
    op_value = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne"]), scalars),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), orderable),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(scalars, min_size=1, max_size=3)),
        st.tuples(st.just("$exists"), st.booleans()),
    )
    plain = st.builds(lambda p, v: {p: v}, path, scalars)
    with_op = st.builds(lambda p, ov: {p: {ov[0]: ov[1]}}, path, op_value)
    return st.one_of(plain, with_op)


filters = st.recursive(
    _clause(),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda a, b: {**a, **b}, inner, inner),
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def conn():
    c = apsw.Connection(":memory:")
    c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context BLOB)")
    return c


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contexts=st.lists(_context(), min_size=1, max_size=12), spec=filters)
def test_sql_filter_selects_exactly_what_the_reference_evaluator_selects(conn, contexts, spec):
    conn.execute("DELETE FROM m")
    conn.executemany("INSERT INTO m (id, context) VALUES (?, jsonb(?))",
                     [(i, json.dumps(c)) for i, c in enumerate(contexts)])
    compiled = compile_filter(spec, column="m.context")
    got = {row[0] for row in conn.execute(f"SELECT id FROM m WHERE {compiled.sql}", compiled.params)}
    expected = {i for i, c in enumerate(contexts) if matches(c, spec)}
    assert got == expected, (spec, contexts)


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"task.success": {"$regex": "x"}}, "context_filter.task.success"),
        ({"$nor": [{"a": 1}]}, "context_filter.$nor"),
        ({"params.force": {"$in": []}}, "context_filter.params.force"),
        ({"params.force": {"$gt": True}}, "context_filter.params.force"),
        ({"params.force": {"$exists": "yes"}}, "context_filter.params.force"),
        ({"params..force": 1}, "context_filter.params..force"),
        ({"$or": {"a": 1}}, "context_filter.$or"),
        ({"params.force": {}}, "context_filter.params.force"),
        ({"params.force": [1, 2]}, "context_filter.params.force"),
    ],
)
def test_malformed_filters_are_validation_errors_naming_the_clause(spec, field):
    with pytest.raises(ValidationError) as info:
        compile_filter(spec)
    assert info.value.field == field


def test_recall_with_unknown_operator_is_a_validation_error(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.recall("x", context_filter={"params.force": {"$between": [1, 2]}})
    assert "$between" in info.value.message


def test_recall_with_malformed_filter_json_is_a_validation_error(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.recall("x", context_filter='{"task.success": tru')
    assert info.value.field == "context_filter"


def test_filter_is_exact_over_twenty_thousand_memories(tmp_path: Path, clock):
    """Exactly one of 20,000 memories matches: recall with the filter must return it."""
    with Memory(tmp_path / "big.db", clock=clock, embedder=None) as mem:
        records = [
            {"description": f"grasp attempt {i} on the red cube", "perception_type": "tactile",
             "metadata": {"params": {"grip_force": {"value": 20 + i % 50}}, "task": {"success": i % 2 == 0}}}
            for i in range(20_000)
        ]
        records[13_337]["metadata"] = {"params": {"grip_force": {"value": 7.5}}, "task": {"success": True}}
        ids = mem.save_perceptions(records)
        hits = mem.recall("grasp red cube", n=10,
                          context_filter={"task.success": True, "params.grip_force.value": {"$lt": 15}})
        assert [h["id"] for h in hits["results"]] == [ids[13_337]]
        assert hits["results"][0]["params"] == {"grip_force": {"value": 7.5}}
        none_text = mem.recall("", context_filter={"params.grip_force.value": 7.5})
        assert [h["id"] for h in none_text["results"]] == [ids[13_337]]


def test_a_nul_in_a_key_or_a_path_is_a_validation_error_naming_the_field(mem: Memory):
    """SQLite's JSON paths cannot name a key holding NUL ("bad JSON path") and PostgreSQL's jsonb
    cannot store one: refused where keys and paths enter, not a storage error later."""
    writes = {
        "context.a": lambda: mem.learn("x", {"a": {"b\x00c": 1}}),
        "context": lambda: mem.learn("x", '{"a\\u0000b": 1}'),
        "metadata": lambda: mem.save_perception("a nul key perception", metadata={"a\x00b": 1}),
        "records[0].metadata": lambda: mem.save_perceptions([{"description": "nul key", "metadata": {"\x00": 1}}]),
        "context ": lambda: mem.start_session(context={"a\x00b": 1}),
    }
    for field, write in writes.items():
        with pytest.raises(ValidationError) as info:
            write()
        assert info.value.field == field.strip() and "NUL" in info.value.message
    stored = mem.learn("cup on the table", {"a": 1})["memory_id"]
    mem.update(stored, "cup on the shelf", {"a": 2})
    with pytest.raises(ValidationError):
        mem.update(stored, "cup on the floor", {"a\x00b": 3})
    assert mem.get(stored)["content"] == "cup on the shelf" and mem.stats()["memories"] == 1
    reads = {
        "context_filter.a\x00b": lambda: mem.recall("cup", context_filter={"a\x00b": 1}),
        "context_filter.$or[0].a.\x00": lambda: mem.recall("cup", context_filter={"$or": [{"a.\x00": 1}]}),
        "group_by": lambda: mem.outcome_stats("a.\x00"),
        "spatial_sort.field": lambda: mem.recall("cup", spatial_sort={"field": "spatial.p\x00", "target": [0, 0]}),
    }
    for field, read in reads.items():
        with pytest.raises(ValidationError) as info:
            read()
        assert info.value.field == field and "NUL" in info.value.message


def test_a_nul_in_a_filter_value_or_a_frame_is_a_validation_error_naming_it_on_both_stores(mem: Memory):
    """No stored context holds a NUL (refused at write) and PostgreSQL cannot take one as a
    parameter ("unsupported Unicode escape sequence"): refused once, where the request is parsed."""
    mem.learn("cup on the table", {"task": {"name": "pick"}, "spatial": {"p": [0, 0], "frame": "map"}})
    nul = "pi\x00ck"
    reads = {
        "context_filter.task.name": [
            lambda: mem.recall("cup", context_filter={"task.name": nul}),
            lambda: mem.recall("cup", context_filter={"task.name": {"$ne": nul}}),
            lambda: mem.recall("cup", context_filter={"task.name": {"$in": ["pick", nul]}}),
            lambda: mem.recall("cup", context_filter={"task.name": {"$nin": [nul]}}),
            lambda: mem.recall("cup", context_filter={"task.name": {"$gte": nul}}),
            lambda: mem.outcome_stats("task.name", context_filter={"task.name": nul}),
        ],
        "context_filter.$or[1].task.name": [
            lambda: mem.recall("", context_filter={"$or": [{"task.name": "pick"}, {"task.name": nul}]}),
        ],
        "spatial_sort.frame": [
            lambda: mem.recall("cup", spatial_sort={"field": "spatial.p", "target": [0, 0], "frame": nul}),
        ],
    }
    for field, calls in reads.items():
        for read in calls:
            with pytest.raises(ValidationError) as info:
                read()
            assert info.value.field == field and "NUL" in info.value.message
    # A NUL in the query text is only text that matches nothing, on both stores alike.
    assert mem.recall("cup " + nul)["count"] == mem.recall("cup pi ck")["count"]
    assert mem.outcome_stats("task.name", query="cup " + nul)["matched"] == 0


def test_numbers_beyond_2_to_53_compare_as_documented(mem: Memory, backend: str):
    """docs/data-model.md, "Numbers beyond 2^53": integers compare exactly on both stores, floats
    among themselves alike; an integer against a float whose shortest decimal is not its exact
    value compares with that decimal on PostgreSQL (jsonb), with the exact value on SQLite."""
    f = 1.2345678901234568e18  # exactly 1234567890123456768; its shortest decimal is 1234567890123456800
    ids = {name: mem.learn(f"stamp {name}", {"t": t})["memory_id"] for name, t in [
        ("int", 1234567890123456789), ("exact_int", 1234567890123456768), ("float", f), ("min", -(2**63)),
        ("two_53", 2**53), ("two_53_plus", 2**53 + 1)]}

    def q(spec: dict) -> set[str]:
        found = {h["id"] for h in mem.recall("", context_filter=spec, n=100, min_relevance=0)["results"]}
        return {name for name, mid in ids.items() if mid in found}

    # Integers against integers, floats against floats: exact, and the same on both stores.
    assert q({"t": 1234567890123456768}) >= {"exact_int"}
    assert q({"t": {"$gt": 1234567890123456768, "$lt": 2**62}}) >= {"int"}
    assert q({"t": 2**53 + 1}) == {"two_53_plus"}
    assert q({"t": {"$lte": -(2**63)}}) == {"min"}
    assert q({"t": {"$gte": f, "$lte": f}}) >= {"float"}
    assert q({"t": 2.0**53}) == {"two_53"}  # 2.0**53's shortest decimal is its exact value
    if backend == "sqlite":  # a float by its exact binary value
        assert q({"t": f}) == {"exact_int", "float"}
        assert q({"t": {"$lte": f, "$gt": 2**60}}) == {"exact_int", "float"}
        assert q({"t": {"$lte": -2.0**63}}) == {"min"}
    else:  # a float by its shortest decimal: f is 1234567890123456800, -2.0**63 is -9223372036854776000
        assert q({"t": f}) == {"float"}
        assert q({"t": {"$lte": f, "$gt": 2**60}}) == {"int", "exact_int", "float"}
        assert q({"t": {"$lte": -2.0**63}}) == set()
