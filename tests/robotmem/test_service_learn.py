import hashlib

import pytest
from test_service_numbers import rewind_to_before_the_hash_rules

from robotmem import ConflictError, Memory, NotFoundError, ValidationError


def test_learn_returns_a_new_id_and_the_memory_reads_back(mem: Memory):
    result = mem.learn("  the gripper slips on wet glass  ", {"task": {"name": "pick"}, "extra": {"k": 1}})
    assert result["status"] == "created"
    record = mem.get(result["memory_id"])
    assert record["content"] == "the gripper slips on wet glass"
    assert record["task"] == {"name": "pick"} and record["context"]["extra"] == {"k": 1}
    assert record["type"] == "fact" and record["status"] == "active"


def test_learn_accepts_context_as_a_json_string(mem: Memory):
    mid = mem.learn("arm 2 drifts left", '{"robot": {"id": "arm-2"}}')["memory_id"]
    assert mem.get(mid)["robot"] == {"id": "arm-2"}


@pytest.mark.parametrize(
    "insight, context, field",
    [
        ("", None, "insight"),
        ("   ", None, "insight"),
        ("x" * 301, None, "insight"),
        (42, None, "insight"),
        ("ok", "[1, 2]", "context"),
        ("ok", "{not json", "context"),
        ("ok", {"params": [1, 2]}, "context.params"),
        ("ok", {"params": {"f": float("nan")}}, "context.params.f"),
    ],
)
def test_learn_rejects_bad_input_naming_the_field(mem: Memory, insight, context, field):
    with pytest.raises(ValidationError) as info:
        mem.learn(insight, context)
    assert info.value.field == field
    assert mem.stats()["memories"] == 0


def test_an_insight_of_exactly_300_characters_is_accepted(mem: Memory):
    assert mem.learn("y" * 300)["status"] == "created"


def test_exact_duplicate_returns_the_existing_id_and_reinforces_it(mem: Memory, clock):
    first = mem.learn("Joint 3 overheats above 60 C", {"robot": {"id": "r1"}})
    clock.advance(3600)
    again = mem.learn("joint 3   overheats above 60 c", {"robot": {"id": "r1"}})
    assert again == {"memory_id": first["memory_id"], "status": "duplicate"}
    record = mem.get(first["memory_id"])
    assert record["evidence_count"] == 2 and record["reinforced_at"] == clock.now
    different_context = mem.learn("Joint 3 overheats above 60 C", {"robot": {"id": "r2"}})
    assert different_context["status"] == "created"


def test_an_insight_worded_like_a_perception_is_a_new_fact_not_a_reinforced_perception(mem: Memory):
    [seen] = mem.save_perceptions([{"description": "gripper slipped on the wet cup",
                                    "metadata": {"robot": {"id": "r1"}}}])
    learned = mem.learn("gripper slipped on the wet cup", {"robot": {"id": "r1"}})
    assert learned["status"] == "created" and learned["memory_id"] != seen
    assert mem.get(seen)["evidence_count"] == 1
    assert mem.learn("gripper slipped on the wet cup", {"robot": {"id": "r1"}}) == {
        "memory_id": learned["memory_id"], "status": "duplicate"}


def test_learn_into_an_unknown_session_is_not_found(mem: Memory):
    with pytest.raises(NotFoundError) as info:
        mem.learn("x happened", session_id="ses_doesnotexist")
    assert info.value.field == "session_id"


def test_learn_into_an_ended_session_is_a_conflict(mem: Memory):
    sid = mem.start_session()["session_id"]
    mem.end_session(sid)
    with pytest.raises(ConflictError):
        mem.learn("late insight", session_id=sid)


def test_learn_in_a_session_uses_the_session_collection(mem: Memory):
    sid = mem.start_session(collection="lab-b")["session_id"]
    mid = mem.learn("door 4 sticks", session_id=sid)["memory_id"]
    assert mem.get(mid)["collection"] == "lab-b"
    with pytest.raises(ValidationError) as info:
        mem.learn("door 5 sticks", collection="lab-a", session_id=sid)
    assert info.value.field == "collection"


@pytest.mark.parametrize("call, field", [
    (lambda m: m.learn("grip \x00 force"), "insight"),
    (lambda m: m.learn("grip force 9N", context={"task": {"name": "pick\x00"}}), "context.task.name"),
    (lambda m: m.learn("grip force 9N", context={"params": {"tags": ["wet", "glass\x00"]}}), "context.params.tags[1]"),
    (lambda m: m.save_perception("wrist camera \x00 frame", "visual"), "description"),
    (lambda m: m.save_perception("wrist camera frame", "visual", metadata={"source": {"topic": "/cam\x00"}}),
     "metadata.source.topic"),
])
def test_a_nul_in_text_is_refused_on_both_stores_naming_the_field(mem: Memory, call, field):
    # PostgreSQL's text and jsonb cannot hold NUL: SQLite refuses it too, so no store holds what a fleet store cannot
    with pytest.raises(ValidationError) as info:
        call(mem)
    assert info.value.field == field and "NUL" in str(info.value)
    assert mem.stats()["memories"] == 0


def test_a_recall_query_holding_a_nul_is_answered_or_refused_by_name(mem: Memory):
    mem.learn("grip force 9N held the bottle")
    try:
        result = mem.recall("grip \x00 force", min_relevance=0)
    except ValidationError as exc:
        assert exc.field == "query"
    else:
        assert result["count"] >= 0


@pytest.mark.parametrize("plain, written", [
    ("max pressure 106 Pa", "max pressure 10⁶ Pa"), ("gripper opening 2 mm", "gripper opening ² mm"),
    ("area 12 m2", "area 1² m2"), ("speed limit 11/2 m/s", "speed limit 1½ m/s"),
    ("tray slots 12", "tray slots ①②"), ("layer H2O", "layer H₂O")])
def test_a_superscript_or_fraction_is_not_the_plain_digits(mem: Memory, plain: str, written: str):
    """NFKC folded "10⁶" into "106": the second fact was taken as a duplicate and not stored."""
    a = mem.learn(plain, {"task": {"name": "spec"}})["memory_id"]
    b = mem.learn(written, {"task": {"name": "spec"}})
    assert b["status"] == "created" and b["memory_id"] != a
    assert mem.get(b["memory_id"])["content"] == written
    assert mem.learn(written, {"task": {"name": "spec"}}) == {"memory_id": b["memory_id"], "status": "duplicate"}
    assert mem.learn(plain, {"task": {"name": "spec"}}) == {"memory_id": a, "status": "duplicate"}
    # Width, compatibility spaces and ligatures still fold.
    assert mem.learn("ＭＡＸ\u00a0pressure １０６ Pa", None)["memory_id"] == mem.learn("max pressure 106 pa", None)["memory_id"]
    assert mem.learn("the ﬁnal grip", None)["memory_id"] == mem.learn("the final grip", None)["memory_id"]


def _store_as_before_the_fold_rule(db_path, rows: dict[int, str]) -> None:
    """Write each memory's hash as robotmem before superscripts kept their form did (of NFKC of the
    whole text and the caller's context JSON), and rewind the schema so that the next open migrates."""
    from robotmem.context import nfkc_fold

    with Memory(db_path, embedder=None) as mem:
        with mem._db.write() as conn:
            for mid, context_json in rows.items():
                text = nfkc_fold(mem.get(mid)["content"])
                old = hashlib.sha256((text + "\x00" + context_json).encode()).hexdigest()
                conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?", (old, mid))
            rewind_to_before_the_hash_rules(mem, conn)


def test_a_fact_hashed_by_the_earlier_fold_is_found_and_tells_106_from_10_to_the_6(db_path):
    from robotmem.context import canonical_json

    ctx = {"task": {"name": "spec"}}
    with Memory(db_path, embedder=None) as mem:
        sup = mem.learn("max pressure 10⁶ Pa", ctx)["memory_id"]
        sub = mem.learn("layer H₂O", ctx)["memory_id"]
        sid = mem.start_session(context={})["session_id"]
        ended = mem.learn("gripper opening ² mm", ctx, session_id=sid)["memory_id"]
        mem.end_session(sid, outcome_score=1.0)
        plain = mem.learn("tray slots 12", ctx)["memory_id"]
    _store_as_before_the_fold_rule(db_path, {sup: canonical_json(ctx), sub: canonical_json(ctx),
                                             ended: canonical_json(ctx), plain: canonical_json(ctx)})
    with Memory(db_path, embedder=None) as mem:  # migrates
        # The same texts again: the stored facts (no second live copy after the upgrade).
        assert mem.learn("max pressure 10⁶ Pa", ctx) == {"memory_id": sup, "status": "duplicate"}
        assert mem.learn("layer H₂O", ctx) == {"memory_id": sub, "status": "duplicate"}
        assert mem.learn("gripper opening ² mm", ctx) == {"memory_id": ended, "status": "duplicate"}
        assert mem.learn("tray slots 12", ctx) == {"memory_id": plain, "status": "duplicate"}
        # The plain digits are other facts (PostgreSQL's unique index does not refuse them either).
        for text in ("max pressure 106 Pa", "layer H2O", "gripper opening 2 mm", "tray slots ①②"):
            created = mem.learn(text, ctx)
            assert created["status"] == "created", text
            assert mem.get(created["memory_id"])["content"] == text
        assert mem.learn("max pressure 106 Pa", ctx)["status"] == "duplicate"
