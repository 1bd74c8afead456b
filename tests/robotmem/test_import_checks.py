"""check_memory's content hash: the file's is kept only when it is one learn could have given."""

from __future__ import annotations

from typing import Any

import pytest

from robotmem.context import content_hash
from robotmem.import_checks import ImportLimits, check_memory

_LIMITS = ImportLimits(max_payload_bytes=1 << 20, model_id=None, dim=None)
_TEXT = "the left door sticks"


def _record(context: dict[str, Any], claimed: str, session_id: str | None = "ses_1") -> dict[str, Any]:
    return {"id": 1, "collection": "default", "session_id": session_id, "type": "fact", "perception_type": None,
            "content": _TEXT, "context": context, "content_hash": claimed, "protected": 0, "confidence": 0.5,
            "evidence_count": 1, "status": "active", "superseded_by": None, "absorbed": [], "forgotten_at": None,
            "forget_reason": None, "access_count": 0, "last_accessed": None, "reinforced_at": 1.0,
            "first_seen": 1.0, "last_seen": 1.0, "created_at": 1.0, "occurred_at": 1.0, "updated_at": 1.0}


@pytest.mark.parametrize("learned", [{}, {"episode": {}}, {"episode": {"try": 2}, "task": {"name": "open"}},
                                     {"episode": {"outcome": 0.9}}])
def test_the_hash_of_the_context_before_end_session_is_kept(learned: dict[str, Any]):
    ended = {**learned, "episode": {**learned.get("episode", {}), "outcome": 0.9}}
    claimed = content_hash(_TEXT, learned)
    assert check_memory(_record(ended, claimed), _LIMITS)["content_hash"] == claimed


@pytest.mark.parametrize("claimed", [
    content_hash("the right door sticks", {}),  # another text: a later learn of it must not hit this memory
    content_hash(_TEXT, {"episode": {"outcome": 0.5}}),  # a context end_session cannot have started from
    "not a hash",
])
def test_any_other_hash_is_replaced_by_the_hash_of_the_context_as_it_is(claimed: str):
    ended = {"episode": {"outcome": 0.9}}
    assert check_memory(_record(ended, claimed), _LIMITS)["content_hash"] == content_hash(_TEXT, ended)


def test_without_a_session_end_session_added_nothing():
    context = {"episode": {"outcome": 0.9}}
    checked = check_memory(_record(context, content_hash(_TEXT, {}), session_id=None), _LIMITS)
    assert checked["content_hash"] == content_hash(_TEXT, context)


def test_a_hash_an_earlier_version_gave_a_large_float_is_taken_in_todays_form():
    from robotmem.context import canonical_json, content_hash_json

    learned = {"p": {"v": 1e17}}
    ended = {**learned, "episode": {"outcome": 0.9}}
    claimed = content_hash_json(_TEXT, canonical_json(learned))  # 1e17 hashed as written: "1e+17"
    assert claimed != content_hash(_TEXT, learned)
    assert check_memory(_record(ended, claimed), _LIMITS)["content_hash"] == content_hash(_TEXT, learned)


@pytest.mark.parametrize("field", ["occurred_at", "created_at", "last_accessed"])
@pytest.mark.parametrize("stored, kept, how", [
    (1_700_000_000_500.0, 1_700_000_000.5, "rescaled"),      # milliseconds since 1970
    (1_700_000_000_500_000, 1_700_000_000.5, "rescaled"),    # microseconds
    (1_700_000_000_500_000_000, 1_700_000_000.5, "rescaled"),  # nanoseconds
    (1e300, 253402300799.0, "clamped"),
    (-1e20, 0.0, "clamped"),
    (10**400, 253402300799.0, "clamped"),  # beyond float's range: rescaling it overflowed
])
def test_an_imported_time_outside_1970_to_9999_is_read_in_its_unit_or_brought_into_range(
        field: str, stored: float, kept: float, how: str):
    # Versions before the range stored such times; one line must not keep a backup from being restored.
    checked = check_memory({**_record({}, "not a hash"), field: stored}, _LIMITS)
    assert checked[field] == pytest.approx(kept, abs=1e-3) and checked["times_adjusted"] == [(field, how)]
    assert check_memory(_record({}, "not a hash"), _LIMITS)["times_adjusted"] == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "yesterday", True])
def test_an_imported_time_that_is_no_finite_number_is_refused(bad: Any):
    from robotmem.errors import ValidationError

    with pytest.raises(ValidationError) as info:
        check_memory({**_record({}, "not a hash"), "occurred_at": bad}, _LIMITS)
    assert info.value.field == "occurred_at"


def test_a_hash_an_earlier_version_gave_a_superscript_is_taken_in_todays_form():
    """Earlier versions hashed "10⁶" as "106" (NFKC): the file's hash is this text's, in that form."""
    text, learned = "max pressure 10⁶ Pa", {"task": {"name": "spec"}}
    ended = {**learned, "episode": {"outcome": 0.9}}
    claimed = content_hash("max pressure 106 Pa", learned)
    record = {**_record(ended, claimed), "content": text}
    assert check_memory(record, _LIMITS)["content_hash"] == content_hash(text, learned) != claimed
