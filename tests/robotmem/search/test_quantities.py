"""The kind of quantity a question asks for, and the kinds a memory states (robotmem.search.quantities)."""

from __future__ import annotations

import pytest

from robotmem.search.quantities import asked_dimensions, stated_dimensions


@pytest.mark.parametrize("question, asked", [
    ("how often are the facade robot's suspension ropes replaced", {"time"}),
    ("weight of the shoulder exoskeleton in kilograms", {"mass"}),
    ("noise level of the loading arm", {"sound"}),
    ("maximum slew speed of the telescope mount", {"speed"}),
    ("tank capacity of the sprayer", {"volume"}),
    ("ammonia concentration in the poultry house", {"concentration"}),
    ("how high can the fork lift a pallet", {"length"}),
    ("how long the archive robot takes to bring a box", {"time"}),
    ("how long must the germ-killing lamp shine at each spot", {"time"}),
    ("highest the pruning robot can climb", {"length"}),
    ("heaviest pane the glass robot is rated to lift", {"mass"}),
    ("contact wire tension measured by the inspection car", {"force"}),
    ("what force does the gripper need for wet bottles", {"force"}),
    ("radar frequency of the runway FOD system", {"frequency"}),
    ("how many seeds per second the optical sorter handles", {"rate"}),
    ("跨运车每小时要烧多少升柴油", {"rate"}),
    ("紫外线消毒要照多久", {"time"}),
    ("冷库叉车货叉的最大起升高度", {"length"}),
])
def test_a_question_asking_for_a_quantity_names_its_kind(question: str, asked: set[str]):
    assert asked_dimensions(question) == asked


@pytest.mark.parametrize("question", [
    "nozzle temperature of 210 °C",      # states the value it asks about: an exact query, not a request
    "speed limit 0.35 m/s",
    "depth_kp=2.5",                      # a parameter's name is not a question about depth
    "cloudy water, the lights lit up the floating specks",  # "cloudy" is not "loud"
    "四足机器人读压力表",                   # reading a pressure gauge is not asking for a pressure
    "gripper slipped on the wet glass bottle",
    "how long is the tether",             # a time or a length: asks for neither
    "the hold-down force was too low",     # a complaint about a force, not a question for one
    "after an hour the battery died",      # an hour is not a rate
    "how long to bake bread at 180 °C for 20 minutes",  # states the time it asks about
    "",
])
def test_a_question_that_asks_for_no_quantity_names_none(question: str):
    assert asked_dimensions(question) == frozenset()


@pytest.mark.parametrize("text, kind", [
    ("the ropes are replaced every 600 operating hours", "time"),
    ("each rope lasts 1,200 h", "time"),
    ("the exoskeleton weighs 4.8 kg with its battery", "mass"),
    ("the arm was measured at 78 dB(A) at one metre", "sound"),
    ("slewing at 6 deg/s", "speed"),
    ("the tank holds 300 L", "volume"),
    ("ammonia peaked at 25 ppm", "concentration"),
    ("grip_force=12.5N", "force"),
    ("货叉起升高度 5.5 米", "length"),
    ("消毒照射 15 分钟", "time"),
    ("the sorter rejected 40 seeds a second", "rate"),
    ("3,000 seeds/s through the ejector bank", "rate"),
    ("每小时 120 盘", "rate"),
    ("the FOD radar runs at 76 GHz", "frequency"),
])
def test_a_number_with_its_unit_states_its_kind(text: str, kind: str):
    assert kind in stated_dimensions(text)


@pytest.mark.parametrize("text", [
    "the suspension rope frayed at the parapet edge and was replaced",
    "firmware 3.2.1 fixed it",           # a version is no quantity
    "robot 7 stopped at dock B",
    "after an hour the battery died",     # a time without a number: no value stated
])
def test_text_without_a_measured_value_states_no_kind(text: str):
    assert stated_dimensions(text) == frozenset()
