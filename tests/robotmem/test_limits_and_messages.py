"""Size limits on context/metadata, and error messages that never echo a huge value."""

from __future__ import annotations

import pytest

from robotmem import Memory, ValidationError
from robotmem.errors import MESSAGE_MAX_CHARS
from robotmem.models import CONTEXT_MAX_BYTES

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
