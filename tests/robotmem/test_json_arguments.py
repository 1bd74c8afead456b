"""JSON arguments: objects and text holding JSON mean the same thing, and bad JSON text is a
ValidationError naming the field at every edge (one parser: robotmem.validation.parse_json)."""

from __future__ import annotations

import json

import pytest

from robotmem import Memory
from robotmem.errors import ValidationError
from robotmem.models import JSON_MAX_DEPTH
from robotmem.validation import json_object, json_value, parse_json


def test_json_object_accepts_an_object_unchanged() -> None:
    value = {"params": {"grip_force": 12.5}}
    assert json_object(value, "context") is value


def test_json_object_parses_a_string_holding_an_object() -> None:
    assert json_object('{"params": {"grip_force": 12.5}}', "context") == {"params": {"grip_force": 12.5}}


@pytest.mark.parametrize("absent", [None, "", "   ", "null"])
def test_json_object_treats_empty_and_null_as_absent(absent: str | None) -> None:
    assert json_object(absent, "context") is None


def test_malformed_json_object_is_a_validation_error_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        json_object('{"params": {"grip_force": 12.5}', "context_filter")
    assert caught.value.field == "context_filter"
    assert "not valid JSON" in caught.value.message


def test_a_json_array_where_an_object_belongs_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as caught:
        json_object("[1, 2]", "metadata")
    assert caught.value.field == "metadata"
    assert "must be a JSON object" in caught.value.message


def test_json_value_parses_strings_that_hold_arrays_or_objects() -> None:
    assert json_value("[0.1, 1.2]", "data") == [0.1, 1.2]
    assert json_value(' {"a": [1]}', "data") == {"a": [1]}


def test_json_value_keeps_plain_text_and_non_strings() -> None:
    assert json_value("gripper closed", "data") == "gripper closed"
    assert json_value([1, 2], "data") == [1, 2]
    assert json_value(3.5, "data") == 3.5


def test_malformed_json_payload_is_a_validation_error_naming_data() -> None:
    with pytest.raises(ValidationError) as caught:
        json_value("[0.1, 1.2", "data")
    assert caught.value.field == "data"


# -- the hardened parser ------------------------------------------------------------------

DEEP = "[" * 100_000  # far past Python's recursion limit


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (DEEP, "nested more than"),
        ('{"a":' * 5_000 + "1" + "}" * 5_000, "nested more than"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        ('{"a": "\ud800"}', "lone surrogate"),  # a lone surrogate already in the text
        ('{"a": 9223372036854775808}', "64-bit"),
        ('{"a": [-9223372036854775809]}', "64-bit"),
        ('{"a": 1' + "0" * 5_000 + "}", "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        ('{"a": -Infinity}', "not valid JSON"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_bad_json_text_is_a_validation_error_naming_the_field(text: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_json(text, "context_filter")
    assert caught.value.field.startswith("context_filter")
    assert says in caught.value.message


def test_nesting_is_counted_outside_strings_only() -> None:
    brackets_in_text = {"note": "[" * 1000 + "{" * 1000}
    assert parse_json(json.dumps(brackets_in_text), "context") == brackets_in_text
    escaped_quote = {"note": 'a \\" [[[' + "[" * 100}
    assert parse_json(json.dumps(escaped_quote), "context") == escaped_quote


def test_the_depth_limit_is_exact() -> None:
    at_limit = "[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH
    assert parse_json(at_limit, "data") is not None
    with pytest.raises(ValidationError):
        parse_json("[" + at_limit + "]", "data")
    nested: list = []
    for _ in range(JSON_MAX_DEPTH - 1):
        nested = [nested]
    json_object({"a": nested[0]}, "context")  # depth = JSON_MAX_DEPTH levels of containers
    with pytest.raises(ValidationError):
        json_object({"a": nested}, "context")


def test_valid_edge_values_pass() -> None:
    text = '{"big": 9223372036854775807, "small": -9223372036854775808, "pair": "\\ud83d\\ude00", "f": 1e308}'
    assert parse_json(text, "context") == {"big": 2**63 - 1, "small": -(2**63), "pair": "\U0001f600", "f": 1e308}


def test_too_long_text_is_refused_unread(monkeypatch) -> None:
    from robotmem import validation

    monkeypatch.setattr(validation, "JSON_TEXT_MAX_CHARS", 10)
    with pytest.raises(ValidationError) as caught:
        parse_json('{"a": "0123456789"}', "metadata")
    assert caught.value.field == "metadata" and "the limit is 10" in caught.value.message


def test_a_dict_with_a_lone_surrogate_or_a_huge_integer_is_refused() -> None:
    with pytest.raises(ValidationError, match="lone surrogate") as caught:
        json_object({"a": ["ok", "\udc80"]}, "context")
    assert caught.value.field == "context.a[1]"
    with pytest.raises(ValidationError, match="64-bit") as caught:
        json_object({"a": {"b": 2**64}}, "context")
    assert caught.value.field == "context.a.b"


# -- every Memory entry point uses it ---------------------------------------------------------

CALLS = {
    "learn context": lambda m, bad: m.learn("gripper slips on wet glass", context=bad),
    "recall context_filter": lambda m, bad: m.recall("gripper", context_filter=bad),
    "recall spatial_sort": lambda m, bad: m.recall("gripper", spatial_sort=bad),
    "save_perception data": lambda m, bad: m.save_perception("camera frame of the bin", data=bad),
    "save_perception metadata": lambda m, bad: m.save_perception("camera frame of the bin", metadata=bad),
    "start_session context": lambda m, bad: m.start_session(context=bad),
}
FIELDS = {"learn context": "context", "recall context_filter": "context_filter",
          "recall spatial_sort": "spatial_sort", "save_perception data": "data",
          "save_perception metadata": "metadata", "start_session context": "context"}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("bad", [DEEP, '{"a":' * 3000 + "1" + "}" * 3000, '{"a": "\\ud800"}',
                                 '{"a": 18446744073709551616}'])
def test_memory_answers_bad_json_text_with_a_validation_error(mem: Memory, call: str, bad: str) -> None:
    before = mem.stats()
    with pytest.raises(ValidationError) as caught:
        CALLS[call](mem, bad)
    assert caught.value.field.split(".")[0].split("[")[0] == FIELDS[call]
    assert mem.stats() == before  # nothing was written


def test_memory_answers_a_deeply_nested_dict_with_a_validation_error(mem: Memory) -> None:
    deep: dict = {}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(ValidationError) as caught:
        mem.learn("gripper slips on wet glass", context=deep)
    assert caught.value.field == "context"


def test_update_keeps_the_context_for_empty_or_null_text(mem: Memory) -> None:
    memory_id = mem.learn("gripper slips on wet glass", context={"task": {"name": "pick"}})["memory_id"]
    for absent in ("", "null", None):
        mem.update(memory_id, "gripper slips on wet glass bottles", context=absent)
        assert mem.get(memory_id)["context"] == {"task": {"name": "pick"}}
