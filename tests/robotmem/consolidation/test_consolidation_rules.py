"""The merge rule's parts in isolation: context agreement, text guards, word similarity."""

from __future__ import annotations

import pytest

from robotmem.consolidation.context_rule import (
    Tolerance,
    context_bucket,
    contexts_agree,
    values_close,
)
from robotmem.consolidation.similarity import jaccard, signature

TOL = Tolerance(relative=0.05, absolute=1e-6)


def force(value: float, unit: str = "N", success: bool = True) -> dict:
    return {"params": {"grip_force": {"value": value, "unit": unit}}, "task": {"success": success}}


def test_params_within_the_relative_tolerance_agree():
    assert contexts_agree(force(5.0), force(5.2), TOL)


def test_params_beyond_the_relative_tolerance_differ():
    assert not contexts_agree(force(5.0), force(9.0), TOL)
    assert not contexts_agree(force(5.0), force(5.3), TOL)


def test_near_zero_params_use_the_absolute_tolerance():
    assert values_close(0.0, 5e-7, TOL)
    assert not values_close(0.0, 1e-3, TOL)


def test_a_different_unit_is_a_different_parameter_value():
    assert not contexts_agree(force(5.0, "N"), force(5.0, "lbf"), TOL)


def test_a_parameter_present_on_one_side_only_makes_contexts_differ():
    extra = force(5.0)
    extra["params"]["speed"] = 0.2
    assert not contexts_agree(force(5.0), extra, TOL)


def test_strings_and_booleans_in_params_compare_exactly():
    assert contexts_agree({"params": {"mode": "soft"}}, {"params": {"mode": "soft"}}, TOL)
    assert not contexts_agree({"params": {"mode": "soft"}}, {"params": {"mode": "Soft"}}, TOL)
    assert not contexts_agree({"params": {"on": True}}, {"params": {"on": 1}}, TOL)


def test_different_success_robot_or_task_make_contexts_differ():
    assert not contexts_agree(force(5.0, success=True), force(5.0, success=False), TOL)
    assert not contexts_agree({"robot": {"id": "arm-1"}}, {"robot": {"id": "arm-2"}}, TOL)
    assert not contexts_agree({"task": {"name": "pick"}}, {"task": {"name": "place"}}, TOL)


def test_a_missing_success_is_not_the_same_as_false():
    assert not contexts_agree({"task": {"success": False}}, {"task": {}}, TOL)
    assert contexts_agree({"task": {}}, {}, TOL)


def test_spatial_and_free_keys_are_not_compared():
    assert contexts_agree({"spatial": {"p": [0, 0]}, "note": "a"}, {"spatial": {"p": [3, 4]}, "note": "b"}, TOL)


def test_agreeing_contexts_always_share_a_bucket():
    assert context_bucket(force(5.0)) == context_bucket(force(5.2))
    assert context_bucket(force(5.0, success=True)) != context_bucket(force(5.0, success=False))


@pytest.mark.parametrize(
    "a, b",
    [
        ("lidar sees an obstacle at 1.5 m", "lidar sees an obstacle at 2.5 m"),
        ("grip_force=5N succeeded", "grip_force=9N succeeded"),
        ("camera 2 is miscalibrated", "camera is miscalibrated"),
    ],
)
def test_texts_with_different_numbers_have_different_guards(a, b):
    assert signature(a).guard != signature(b).guard


def test_the_same_number_written_differently_has_the_same_guard():
    assert signature("grip_force=5N succeeded").guard == signature("grip_force=5.0N succeeded").guard
    assert signature("gap of 12,5 mm").numbers == signature("gap of 12.5 mm").numbers


def test_digits_inside_words_are_numbers_tagged_with_their_word():
    assert signature("turtlebot3 uses ros2 and grip_force_2").numbers == (
        ("grip_force_", "2"), ("ros", "2"), ("turtlebot", "3"))
    assert signature("turtlebot3 is slow").guard != signature("turtlebot4 is slow").guard
    assert signature("turtlebot3 is slow").guard == signature("Turtlebot3 is slow.").guard


@pytest.mark.parametrize(
    "a, b",
    [
        ("use a slow approach for the mug", "do not use a slow approach for the mug"),
        ("the door can't be opened from inside", "the door can be opened from inside"),
        ("grasp succeeded with the soft gripper", "grasp failed with the soft gripper"),
        ("push the box left", "push the box right"),
    ],
)
def test_negations_and_contrast_words_change_the_guard(a, b):
    assert signature(a).guard != signature(b).guard


def test_word_similarity_ignores_case_and_punctuation():
    a, b = signature("Approach the mug slowly."), signature("approach the MUG slowly")
    assert jaccard(a, b) == 1.0


def test_word_similarity_is_the_share_of_common_words():
    a, b = signature("approach the mug slowly from the left"), signature("approach the mug slowly from the left side")
    assert jaccard(a, b) == pytest.approx(6 / 7)
