"""Size limits on context/metadata, and error messages that never echo a huge value."""

from __future__ import annotations

import json

import pytest

from robotmem import Memory, ValidationError
from robotmem.errors import MESSAGE_MAX_CHARS
from robotmem.models import CONTEXT_MAX_BYTES, CONTEXT_MAX_DEPTH

BIG = "x" * (CONTEXT_MAX_BYTES + 1)


@pytest.mark.parametrize("call, field", [
    (lambda m: m.learn("a lesson about cups", context={"note": BIG}), "context"),
    (lambda m: m.learn("a lesson about cups", context='{"note": "' + BIG + '"}'), "context"),
    (lambda m: m.save_perception("the cup on the table", metadata={"note": BIG}), "metadata"),
    (lambda m: m.save_perceptions([{"description": "the cup on the table", "metadata": {"n": BIG}}]),
     "records[0].metadata"),
    (lambda m: m.start_session(context={"note": BIG}), "context"),
])
def test_oversized_context_or_metadata_is_refused_naming_the_field(mem: Memory, call, field: str) -> None:
    # 20 MiB metadata used to be accepted, and every recall hitting it returned all of it.
    with pytest.raises(ValidationError) as err:
        call(mem)
    assert err.value.field == field
    assert str(CONTEXT_MAX_BYTES) in err.value.message
    assert mem.recall("", since=0, n=100, min_confidence=0)["results"] == []
    assert mem.list_sessions() == []


def test_oversized_context_in_update_is_refused_and_the_memory_kept(mem: Memory) -> None:
    memory_id = mem.learn("a lesson about cups", context={"note": "small"})["memory_id"]
    with pytest.raises(ValidationError) as err:
        mem.update(memory_id, "a corrected lesson about cups", context={"note": BIG})
    assert err.value.field == "context"
    assert mem.get(memory_id)["context"]["note"] == "small"


def test_a_context_at_the_limit_is_accepted_and_recalled(mem: Memory) -> None:
    note = "y" * (CONTEXT_MAX_BYTES - len('{"note":""}'))
    memory_id = mem.learn("a lesson about cups", context={"note": note})["memory_id"]
    assert mem.recall("cups")["results"][0]["id"] == memory_id


@pytest.mark.parametrize("call", [
    lambda m, v: m.recall("cup", session_id=v),
    lambda m, v: m.learn("cup lesson", collection=v),
    lambda m, v: m.save_perception("the cup on the table", perception_type=v),
    lambda m, v: m.recall("cup", since=v),
    lambda m, v: m.recall("", context_filter={v: {"$near": 1}}),
    lambda m, v: m.recall("", context_filter={"$" + v: 1}),
    lambda m, v: m.learn("cup lesson", context={"params": {v: float("nan")}}),
])
def test_error_messages_never_echo_a_huge_value(mem: Memory, call) -> None:
    huge = "q" * 10_000_000
    with pytest.raises(ValidationError) as err:
        call(mem, huge)
    assert len(err.value.message) <= MESSAGE_MAX_CHARS + 60
    assert len(str(err.value)) <= MESSAGE_MAX_CHARS + 60
    assert err.value.field is not None and len(err.value.field) < 300


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_times(mem: Memory, field: str, value: bool) -> None:
    with pytest.raises(ValidationError) as err:
        mem.recall("cup", **{field: value})
    assert err.value.field == field


def _nested(levels: int) -> dict[str, object]:
    """A context whose innermost value lies ``levels`` keys in."""
    value: dict[str, object] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return {"params": value} if levels else {}


@pytest.mark.parametrize("levels", [CONTEXT_MAX_DEPTH + 1, 64, 65, 3000])
@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
def test_a_context_too_deep_states_the_real_limit_naming_the_field(mem: Memory, levels: int, as_text: bool) -> None:
    # Text 3,000 deep said "more than 64 levels", a dict 33 deep "is nested too deeply": the limit is 32.
    context = _nested(levels)
    # Written out: json.dumps itself recurses too deep at 3,000 levels.
    text = '{"params": ' + '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1) + "}"
    with pytest.raises(ValidationError) as info:
        mem.learn("the gripper slipped", context=text if as_text else context)
    assert (info.value.field, info.value.message) == (
        "context", f"context is nested more than {CONTEXT_MAX_DEPTH} levels deep")
    with pytest.raises(ValidationError) as info:
        mem.save_perceptions([{"description": "wrist force", "metadata": context}])
    assert info.value.message == f"records[0].metadata is nested more than {CONTEXT_MAX_DEPTH} levels deep"


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
def test_a_context_at_the_depth_limit_is_stored(mem: Memory, as_text: bool) -> None:
    context = _nested(CONTEXT_MAX_DEPTH)
    memory_id = mem.learn("the gripper held", context=json.dumps(context) if as_text else context)["memory_id"]
    assert mem.get(memory_id)["context"]["params"] == context["params"]


@pytest.mark.parametrize("record", [1, "description", None])
def test_a_bulk_record_that_is_not_a_dict_is_named_without_a_stray_dot(mem: Memory, record: object) -> None:
    with pytest.raises(ValidationError) as info:
        mem.save_perceptions([{"description": "wrist force"}, record])  # type: ignore[list-item]
    assert info.value.field == "records[1]"
    assert info.value.message == f"records[1] must be a dict, got {type(record).__name__}"
