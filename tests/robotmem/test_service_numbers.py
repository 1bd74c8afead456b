"""Numbers in a context read back as the numbers that were stored, on both stores.

PostgreSQL's jsonb keeps numbers as decimals and writes a float of 1e16 or more out in full
(1e300 as 301 digits); robotmem refuses integers beyond 64 bits at write, so such an integer
read back is the float it was (robotmem.context.load_stored_json).
"""

from decimal import Decimal
from pathlib import Path

import pytest

from robotmem import ConflictError, Memory

VALUES = {"huge": 1e300, "minus_huge": -1e300, "tiny": 1e-300, "plain": 1.5, "int_max": 2**63 - 1,
          "int_min": -(2**63), "big_float": 12345678901234567890.0, "minus_big_float": -1.2345678901234567e19,
          "half": 0.5, "one": 1}


def _same(got: dict, want: dict) -> None:
    assert got == want
    for key, value in want.items():
        assert type(got[key]) is type(value), key  # noqa: E721  (1e300 must not come back an int)


def test_numbers_read_back_as_stored_by_get_recall_and_filters(mem: Memory):
    mid = mem.learn("force sensor saturates", context={"params": dict(VALUES)})["memory_id"]
    record = mem.get(mid)
    _same(record["context"]["params"], VALUES)
    _same(record["params"], VALUES)
    hits = mem.recall("force sensor saturates", n=5)["results"]
    assert [h["id"] for h in hits] == [mid]
    _same(hits[0]["context"]["params"], VALUES)
    # What was read back is accepted when fed back: as a filter value and as a context.
    for key, value in VALUES.items():
        found = mem.recall("", context_filter={f"params.{key}": value}, n=5, min_relevance=0)["results"]
        assert [h["id"] for h in found] == [mid], key
    again = mem.learn("force sensor saturates again", context=record["context"])["memory_id"]
    _same(mem.get(again)["context"]["params"], VALUES)


def test_minus_zero_reads_back_as_zero(mem: Memory, backend: str):
    """Documented: PostgreSQL's numeric has no -0, so -0.0 reads back as 0.0 there (equal as numbers)."""
    mid = mem.learn("offset note", context={"params": {"offset": -0.0}})["memory_id"]
    offset = mem.get(mid)["context"]["params"]["offset"]
    assert offset == 0 and isinstance(offset, float)


def test_export_then_import_into_sqlite_keeps_the_numbers(mem: Memory, tmp_path: Path):
    mem.learn("force sensor saturates", context={"params": dict(VALUES)})
    mem.export(tmp_path / "dump.jsonl")
    with Memory(tmp_path / "copy.db", embedder=None) as target:
        assert target.import_(tmp_path / "dump.jsonl")["memories"] == 1
        hits = target.recall("force sensor saturates", n=5)["results"]
        _same(hits[0]["context"]["params"], VALUES)


def test_session_context_numbers_read_back_as_stored(mem: Memory):
    sid = mem.start_session(context={"params": {"limit": 1e300, "n": 2**63 - 1}})["session_id"]
    context = mem.get_session(sid)["context"]
    assert context == {"params": {"limit": 1e300, "n": 2**63 - 1}}
    assert isinstance(context["params"]["limit"], float)


@pytest.mark.parametrize("text, want", [
    ("{\"a\": 1" + "0" * 300 + "}", {"a": 1e300}),
    ("{\"a\": 9223372036854775807, \"b\": -9223372036854775808}", {"a": 2**63 - 1, "b": -(2**63)}),
    ("{\"a\": 12345678901234567000}", {"a": 12345678901234567000.0}),
    ("[1, 2.5, \"x\"]", [1, 2.5, "x"]),
])
def test_load_stored_json(text: str, want: object):
    from robotmem.context import load_stored_json

    got = load_stored_json(text)
    assert got == want and repr(got) == repr(want)


@pytest.mark.parametrize("value", [1e16, 1e17, -3e18, 2.0**62, 9.2e18])
def test_a_float_jsonb_reads_back_as_an_integer_hashes_as_learn_hashed_it(mem: Memory, value: float):
    """PostgreSQL reads a float of 1e16 or more (within 64 bits) back as an int: update without a
    context rehashes what it read, which must be the hash learn gave (and the equal int's)."""
    a = mem.learn("the sensor value check", context={"p": {"v": value}})["memory_id"]
    as_read = int(Decimal(repr(value)))  # what jsonb keeps: the shortest decimal, in full
    assert mem.learn("the sensor value check", context={"p": {"v": as_read}})["memory_id"] == a
    mem.update(a, "the sensor value check corrected")
    assert mem.learn("the sensor value check corrected", context={"p": {"v": value}}) == {
        "memory_id": a, "status": "duplicate"}
    assert mem.learn("the sensor value check corrected", context={"p": {"v": value / 10}})["status"] == "created"


def test_a_fact_hashed_by_an_earlier_version_is_still_found_by_learn(mem: Memory):
    """Stored hashes are not rewritten: a fact whose hash was taken of ``1e+17`` as written
    (before integral floats counted as integers) is still the duplicate of a new learn."""
    from robotmem.context import canonical_json, content_hash_json

    ctx = {"p": {"v": 1e17}}
    a = mem.learn("the old store's lesson", context=ctx)["memory_id"]
    legacy = content_hash_json("the old store's lesson", canonical_json(ctx))
    with mem._db.write() as conn:
        conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?", (legacy, a))
    assert mem.learn("the old store's lesson", context=ctx) == {"memory_id": a, "status": "duplicate"}
    b = mem.learn("another lesson of the old store", context=ctx)["memory_id"]
    with pytest.raises(ConflictError) as info:
        mem.update(b, "the old store's lesson", context=ctx)
    assert f"memory {a} already says this" in str(info.value)


def test_the_hash_form_changes_only_floats_jsonb_cannot_keep():
    from robotmem.context import canonical_json, content_hash, content_hash_json, content_hashes

    for ctx in ({"v": 1.5}, {"v": 9.0e15}, {"v": 2.0**63}, {"v": 1e300}, {"v": 2**63 - 1}, {"s": "1e+17"}):
        assert content_hash("t", ctx) == content_hash_json("t", canonical_json(ctx))
        assert content_hashes("t", ctx) == (content_hash("t", ctx),)  # no earlier form
    assert content_hash("t", {"v": [1e17]}) == content_hash("t", {"v": [10**17]})
    assert content_hash("t", {"v": 2.0**62}) == content_hash("t", {"v": 4611686018427388000})
    assert content_hashes("t", {"v": [1e17]})[1:] == (content_hash_json("t", '{"v":[1e+17]}'),)


def test_negative_zero_in_a_context_is_one_fact_with_zero_on_both_stores(mem: Memory):
    """PostgreSQL reads -0.0 back as 0.0: update without a context rehashed it so, and a learn of
    the same text and context made a second live copy there (SQLite: a duplicate)."""
    a = mem.learn("grip setting A", context={"params": {"v": -0.0}})["memory_id"]
    assert mem.learn("grip setting A", context={"params": {"v": -0.0}}) == {"memory_id": a, "status": "duplicate"}
    mem.update(a, "grip setting B")
    assert mem.learn("grip setting B", context={"params": {"v": -0.0}}) == {"memory_id": a, "status": "duplicate"}
    assert mem.learn("grip setting B", context={"params": {"v": 0.0}}) == {"memory_id": a, "status": "duplicate"}
    assert mem.learn("grip setting B", context={"params": {"v": 0}})["status"] == "created"
    b = mem.learn("grip setting C", context={"params": {"v": [0.0, -0.0]}})["memory_id"]
    with pytest.raises(ConflictError):
        mem.update(b, "grip setting B", context={"params": {"v": -0.0}})


def test_a_fact_hashed_with_negative_zero_by_an_earlier_version_is_still_found(mem: Memory):
    from robotmem.context import canonical_json, content_hash_json

    ctx = {"params": {"v": -0.0, "big": 1e17}}
    a = mem.learn("the old zero lesson", context=ctx)["memory_id"]
    b = mem.learn("the older zero lesson", context=ctx)["memory_id"]
    # Before -0.0 counted as 0.0 (a float of 1e17 was already an integer), and before that too.
    earlier = canonical_json({"params": {"v": -0.0, "big": 10**17}})
    with mem._db.write() as conn:
        conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?",
                     (content_hash_json("the old zero lesson", earlier), a))
        conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?",
                     (content_hash_json("the older zero lesson", canonical_json(ctx)), b))
    assert mem.learn("the old zero lesson", context=ctx) == {"memory_id": a, "status": "duplicate"}
    assert mem.learn("the older zero lesson", context=ctx) == {"memory_id": b, "status": "duplicate"}
    with pytest.raises(ConflictError):
        mem.update(a, "the older zero lesson", context=ctx)


def rewind_to_before_the_hash_rules(mem: Memory, conn: object) -> None:
    """The schema as before superscripts kept their form and -0.0 hashed as 0.0 (SQLite migration
    20, PostgreSQL migration 7): the next open migrates."""
    if mem._db.kind == "sqlite":
        conn.execute("PRAGMA user_version=19")  # type: ignore[attr-defined]
    else:
        conn.execute("DELETE FROM robotmem_schema WHERE version >= 7")  # type: ignore[attr-defined]


def test_a_fact_learned_with_negative_zero_before_the_rule_is_the_fact_with_zero_after(db_path: Path):
    """Its hash was of -0.0 as written, PostgreSQL kept 0.0: a learn with 0.0 made a second live
    copy there. The migration rehashes it; a store that already holds the copy still opens."""
    from robotmem.context import content_hash_json

    with Memory(db_path, embedder=None) as mem:
        a = mem.learn("grip setting B", context={"params": {"v": -0.0, "w": 0.0}})["memory_id"]
        c = mem.learn("grip setting C", context={"params": {"v": -0.0}})["memory_id"]
        with mem._db.write() as conn:
            for mid, text, written in ((a, "grip setting B", '{"params":{"v":-0.0,"w":0.0}}'),
                                       (c, "grip setting C", '{"params":{"v":-0.0}}')):
                conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?", (content_hash_json(text, written), mid))
        # As that version did: a second live copy of C.
        copy = mem.learn("grip setting C", context={"params": {"v": 0.0}})
        assert copy["status"] == "created"
        with mem._db.write() as conn:
            rewind_to_before_the_hash_rules(mem, conn)
    with Memory(db_path, embedder=None) as mem:  # migrates
        for ctx in ({"v": 0.0, "w": 0.0}, {"v": -0.0, "w": 0.0}, {"v": 0.0, "w": -0.0}):
            assert mem.learn("grip setting B", context={"params": ctx}) == {"memory_id": a, "status": "duplicate"}
        assert mem.learn("grip setting C", context={"params": {"v": 0.0}})["memory_id"] in (c, copy["memory_id"])
        assert mem.learn("grip setting C", context={"params": {"v": -0.0}})["status"] == "duplicate"
