"""The error boundary's wire shapes, and that nothing internal leaks to the client."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from robotmem.errors import ConflictError, NotFoundError, StorageError, ValidationError
from robotmem.mcp.boundary import (
    STORAGE_MESSAGE,
    error_result,
    ok_result,
    result_for_argument_errors,
    result_for_exception,
)


def _error(result_structured: object) -> dict[str, object]:
    assert isinstance(result_structured, dict)
    return result_structured["error"]


def test_success_carries_the_payload_as_structure_and_as_json_text() -> None:
    result = ok_result({"memory_id": 3, "status": "created"})
    assert not result.is_error
    assert result.structured_content == {"memory_id": 3, "status": "created"}
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]


def test_error_result_is_flagged_and_mirrors_its_json_as_text() -> None:
    result = error_result("not_found", "no memory 9", "memory_id")
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "not_found", "field": "memory_id", "message": "no memory 9"}
    }
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("exc", "code", "field"),
    [
        (ValidationError("n must be between 1 and 100, got 0", field="n"), "validation_error", "n"),
        (NotFoundError("no memory with id 9", field="memory_id"), "not_found", "memory_id"),
        (ConflictError("session ses_1 has ended", field="session_id"), "conflict", "session_id"),
    ],
)
def test_robotmem_errors_keep_their_code_field_and_message(exc: Exception, code: str, field: str) -> None:
    error = _error(result_for_exception("learn", exc).structured_content)
    assert error == {"code": code, "field": field, "message": str(exc)}


def test_storage_error_message_names_no_internals(caplog: pytest.LogCaptureFixture) -> None:
    secret = "disk I/O error in /srv/robot/memory.db: INSERT INTO memories"
    with caplog.at_level(logging.ERROR, logger="robotmem.mcp"):
        result = result_for_exception("learn", StorageError(secret))
    error = _error(result.structured_content)
    assert error["code"] == "storage_error"
    assert error["message"] == STORAGE_MESSAGE
    assert "/srv" not in json.dumps(result.structured_content)
    assert secret in caplog.text, "the server log keeps the cause"


def test_a_storage_failure_is_logged_as_one_line_with_its_cause(caplog: pytest.LogCaptureFixture) -> None:
    try:
        try:
            raise OSError("Connection refused")
        except OSError as cause:
            raise StorageError("cannot connect to PostgreSQL at postgresql://db/robots: Connection refused") from cause
    except StorageError as exc:
        with caplog.at_level(logging.DEBUG, logger="robotmem.mcp"):
            result_for_exception("learn", exc)
    assert [(r.levelno, r.getMessage(), r.exc_info) for r in caplog.records] == [
        (logging.ERROR, "tool learn: storage failure: cannot connect to PostgreSQL at postgresql://db/robots: "
         "Connection refused", None)]
    assert "Traceback" not in caplog.text


def test_unexpected_exception_is_internal_error_with_traceback_only_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        {}["missing_key_detail"]
    except KeyError as exc:
        with caplog.at_level(logging.ERROR, logger="robotmem.mcp"):
            result = result_for_exception("recall", exc)
    error = _error(result.structured_content)
    assert error["code"] == "internal_error"
    assert error["field"] is None
    assert "missing_key_detail" not in json.dumps(result.structured_content)
    assert "Traceback" in caplog.text and "missing_key_detail" in caplog.text


class _Args(BaseModel):
    insight: str
    n: int = Field(default=5, strict=True)


def test_argument_type_errors_become_a_validation_error_naming_the_parameter() -> None:
    with pytest.raises(PydanticValidationError) as caught:
        _Args.model_validate({"insight": "x", "n": "five"})
    error = _error(result_for_argument_errors("recall", caught.value).structured_content)
    assert error["code"] == "validation_error"
    assert error["field"] == "n"


def test_all_argument_problems_are_listed_and_the_first_is_the_field() -> None:
    with pytest.raises(PydanticValidationError) as caught:
        _Args.model_validate({"n": "five"})
    error = _error(result_for_argument_errors("learn", caught.value).structured_content)
    assert error["field"] == "insight"
    assert "insight: is required" in str(error["message"])
    assert "n:" in str(error["message"])
