"""The kind of quantity a question asks for, and the kinds a memory states (robotmem.search.quantities)."""

from __future__ import annotations

import pytest

from robotmem.search.quantities import (asked_dimensions, stated_counts, stated_dimensions, states_any, states_unit,
                                        states_unit_of, states_value, value_units)


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
    ("wheel diameter of the lunar rover", {"length"}),
    ("power consumption of the vacuum pump", {"electric"}),
    ("battery capacity of the inspection drone", {"electric"}),   # a charge, not a volume
    ("what does the pill dispenser cost per month", {"cost"}),
    ("光伏电站除草机器人一天能除多少亩草", {"area"}),
    # a count is asked of the thing counted: the last word of the phrase
    ("how many twistlock cones does the bin hold", {"count:cone"}),
    ("how many ring frames can one doffing robot look after", {"count:frame"}),
    ("number of ground control points for a mapping flight", {"count:point"}),
    ("能放几个瓶子", {"count:个"}),
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
    "the fault cost us a whole shift",     # a complaint about a cost, not a question for one
    "robot parked in the loading area",    # an area that is a place
    "how many of the 20 flasks were contaminated",  # states the count it asks about
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
    ("the pump draws 450 W", "electric"),
    ("a 24V supply", "electric"),
    ("it covers 1,200 m² a shift", "area"),
    ("the lease is $40 a month", "cost"),
    ("每月 300 元", "cost"),
])
def test_a_number_with_its_unit_states_its_kind(text: str, kind: str):
    assert kind in stated_dimensions(text)


@pytest.mark.parametrize("text", [
    "the suspension rope frayed at the parapet edge and was replaced",
    "firmware 3.2.1 fixed it",           # a version is no quantity
    "robot 7 stopped at dock B",
    "after an hour the battery died",     # a time without a number: no value stated
    "it reached gate 3 a little late",     # a lone "a" after a number is no ampere
])
def test_text_without_a_measured_value_states_no_kind(text: str):
    assert stated_dimensions(text) == frozenset()


@pytest.mark.parametrize("question, text, states", [
    ("how many flasks fit in the incubator", "a fungus spread to 20 flasks in the incubator", True),
    ("how many flasks fit in the incubator", "six flasks were lost", True),
    ("how many ring frames can one doffing robot look after",
     "the doffing robot changes all 1,008 spindles of a ring frame in under four minutes", False),
    ("how many cartridges does the tape library hold", "the week's cartridges were already in the export slots", False),
    ("能放几个瓶子", "托盘上放了 12 个瓶子", True),
    ("what does the pill dispenser cost per month", "missed doses fell from 9 a month to 1", False),
    ("power consumption of the vacuum pump", "the pump draws 450 W at full suction", True),
])
def test_a_memory_answers_a_count_only_with_a_number_of_the_thing_counted(question: str, text: str, states: bool):
    assert states_any(asked_dimensions(question), text) is states


def test_counts_are_the_stems_of_the_things_numbered():
    assert {"count:flask", "count:spindl"} <= stated_counts("20 flasks and 1,008 spindles")
    assert "count:the" not in stated_counts("20 flasks in the incubator")


@pytest.mark.parametrize("text, units", [
    ("40 A current limit", {"40": "A"}),
    ("spinning hall humidity at 58 %", {"58": "%"}),
    ("electrode array advanced at 0.6 mm/s", {"0.6": "mm/s"}),
    ("12 N·m shoulder assist", {"12": "N·m"}),
    ("1,200 m2 at 3.5 knots", {"1,200": "m2", "3.5": "knots"}),
    ("it reached gate 3 a little late", {}),   # an article, not amperes
    ("firmware 3.2.1 on RG2-FT-0417", {}),      # versions and part numbers carry no unit
])
def test_numbers_written_with_a_unit_are_found_with_it(text: str, units: dict[str, str]):
    assert value_units(text) == units


@pytest.mark.parametrize("text, number, unit, states", [
    ("the H1's wrist motor hit its 40 A current limit", "40", "A", True),
    ("the knee motor tripped its 45 A current limit", "40", "A", False),
    ("landing from a 40 cm box jump", "40", "A", False),
    ("humidified back to 58%", "58", "%", True),
    ("advancing at 10.6 mm/s", "0.6", "mm/s", False),
    ("at 12 n·m the exoskeleton pushed", "12", "N·m", True),
])
def test_a_value_is_stated_only_with_its_own_number_and_unit(text: str, number: str, unit: str, states: bool):
    assert states_value(text, number, unit) is states


def test_a_number_given_with_any_unit_is_found_with_it():
    assert states_unit_of("landing from a 40 cm box jump", "40")
    assert not states_unit_of("case 40 was closed", "40")          # no unit: the word rule decides
    assert not states_unit_of("advancing at 10.6 mm/s", "0.6")     # another number


@pytest.mark.parametrize("text, unit, states", [
    ("With the shoulder exoskeleton set to 8 N·m of assist", "N·m", True),
    ("Advancing the electrode array at 0.1 mm/s", "mm/s", True),
    ("Advancing the electrode array at 0.1 mm/s", "mm", False),   # mm/s is a speed, not a length
    ("the knee motor tripped its 45 A current limit", "A", True),
    ("it reached gate 3 a little late", "A", False),              # an article
    ("the exoskeleton pushed the installers' arms up", "N·m", False),
])
def test_a_unit_is_stated_only_with_a_number_before_it(text: str, unit: str, states: bool):
    assert states_unit(text, unit) is states
