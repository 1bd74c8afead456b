"""JSON-valued tool parameters: objects and strings holding JSON mean the same thing."""

from __future__ import annotations

import pytest

from robotmem.errors import ValidationError
from robotmem.mcp.jsonargs import json_object, json_value


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
