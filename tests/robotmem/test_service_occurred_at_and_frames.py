"""occurred_at on every write (recordings store when things happened) and spatial_sort frames."""

from __future__ import annotations

import pytest

from robotmem import Memory, ValidationError
from robotmem.validation import timestamp

DAY_2015 = 1432166400.0  # 2015-05-21T00:00:00Z


def test_learn_and_save_perception_store_the_given_occurred_at(mem: Memory):
    fact = mem.learn("door 3 sticks in the rain", occurred_at=DAY_2015 + 60)["memory_id"]
    seen = mem.save_perception("dock seen", occurred_at="2015-05-21T00:02:00Z")["memory_id"]
    mem.learn("recent note")
    found = mem.recall("", since="2015-05-21", until="2015-05-22", context_filter=None, min_confidence=0.0)
    assert sorted(hit["id"] for hit in found["results"]) == sorted([fact, seen])
    by_id = {hit["id"]: hit for hit in found["results"]}
    assert by_id[fact]["occurred_at"] == DAY_2015 + 60 and by_id[seen]["occurred_at"] == DAY_2015 + 120


@pytest.mark.parametrize("bad", ["yesterday", float("nan"), True])
def test_a_bad_occurred_at_is_refused_by_name_and_stores_nothing(mem: Memory, bad):
    with pytest.raises(ValidationError) as err:
        mem.learn("a note", occurred_at=bad)
    assert err.value.field == "occurred_at"
    with pytest.raises(ValidationError) as err:
        mem.save_perception("dock seen from the corridor", occurred_at=bad)
    assert err.value.field == "occurred_at"
    assert mem.stats()["memories"] == 0


def test_spatial_sort_with_a_frame_compares_only_memories_in_that_frame(mem: Memory):
    map_near = mem.learn("map near", {"spatial": {"position": [1, 0, 0], "frame": "map"}})["memory_id"]
    map_far = mem.learn("map far", {"spatial": {"position": [5, 0, 0], "frame": "map"}})["memory_id"]
    odom_closest = mem.learn("odom closest", {"spatial": {"position": [0, 0, 0], "frame": "odom"}})["memory_id"]
    unknown = mem.learn("no frame", {"spatial": {"position": [3, 0, 0]}})["memory_id"]
    sort = {"field": "spatial.position", "target": [0, 0, 0]}
    result = mem.recall("", spatial_sort={**sort, "frame": "map"}, n=4)
    order = [hit["id"] for hit in result["results"]]
    assert order[:3] == [map_near, unknown, map_far] and order[3] == odom_closest
    assert result["results"][3]["distance"] is None
    bounded = mem.recall("", spatial_sort={**sort, "frame": "map", "max_distance": 10}, n=4)
    assert [hit["id"] for hit in bounded["results"]] == [map_near, unknown, map_far]
    # Without a frame every memory is compared in its own frame, as before.
    assert [h["id"] for h in mem.recall("", spatial_sort=sort, n=4)["results"]][0] == odom_closest


def test_spatial_sort_frame_must_be_a_name(mem: Memory):
    with pytest.raises(ValidationError) as err:
        mem.recall("", spatial_sort={"field": "spatial.position", "target": [0, 0], "frame": ""})
    assert err.value.field == "spatial_sort.frame"


@pytest.mark.parametrize("bad", [1e300, -1e20, -1, 253402300800, "1e300", "1969-12-31T23:59:59Z", 10**400])
def test_a_time_outside_1970_to_9999_is_refused_by_name_and_stores_nothing(mem: Memory, bad):
    """1e300 used to be stored, and then every display of the memory crashed (time.gmtime overflows)."""
    with pytest.raises(ValidationError) as err:
        mem.learn("a note", occurred_at=bad)
    assert err.value.field == "occurred_at" and "9999-12-31" in err.value.message
    with pytest.raises(ValidationError) as err:
        mem.save_perceptions([{"description": "dock seen from the corridor", "occurred_at": bad}])
    assert err.value.field == "records[0].occurred_at"
    for window in ("since", "until"):  # they compare with occurred_at: the same rule
        with pytest.raises(ValidationError) as err:
            mem.recall("note", **{window: bad})
        assert err.value.field == window
        with pytest.raises(ValidationError) as err:
            mem.outcome_stats("task.success", **{window: bad})
        assert err.value.field == window
    assert mem.stats()["memories"] == 0


def test_the_ends_of_the_time_range_are_stored(mem: Memory):
    first = mem.learn("the first second of 1970", occurred_at=0)["memory_id"]
    last = mem.learn("the last second of 9999", occurred_at="9999-12-31T23:59:59Z")["memory_id"]
    assert mem.get(first)["occurred_at"] == 0.0 and mem.get(last)["occurred_at"] == 253402300799.0
    found = mem.recall("", since=0, until=253402300799, min_confidence=0.0)
    assert sorted(hit["id"] for hit in found["results"]) == sorted([first, last])


@pytest.mark.parametrize("stored", [["map"], {"name": "map"}, 5])
@pytest.mark.parametrize("asked", ['["map"]', '{"name":"map"}', "5"])
def test_a_frame_stored_as_no_string_is_another_frame(mem: Memory, stored, asked):
    # SQLite compared json_extract's JSON text of an array or object with the asked name, so the
    # frame '["map"]' found a memory whose frame is the array ["map"]; PostgreSQL found none
    odd = mem.learn("odd frame", {"spatial": {"position": [0, 0], "frame": stored}, "task": {"name": "t"}})["memory_id"]
    named = mem.learn("named frame", {"spatial": {"position": [1, 0], "frame": asked}, "task": {"name": "t"}})["memory_id"]
    sort = {"field": "spatial.position", "target": [0, 0], "frame": asked}
    for context_filter in (None, {"task.name": "t"}):  # the tree walk, and points read by id
        bounded = mem.recall("", spatial_sort={**sort, "max_distance": 10}, context_filter=context_filter)
        assert [(h["id"], h["distance"]) for h in bounded["results"]] == [(named, 1.0)], context_filter
        ranked = mem.recall("", spatial_sort=sort, context_filter=context_filter)["results"]
        assert [(h["id"], h["distance"]) for h in ranked] == [(named, 1.0), (odd, None)], context_filter


def test_a_null_frame_is_an_unknown_one_and_compared(mem: Memory):
    unknown = mem.learn("null frame", {"spatial": {"position": [0, 0], "frame": None}})["memory_id"]
    hits = mem.recall("", spatial_sort={"field": "spatial.position", "target": [0, 0], "frame": "map",
                                        "max_distance": 1})["results"]
    assert [h["id"] for h in hits] == [unknown]


def test_an_iso_time_with_nanoseconds_is_read_exactly_not_cut_to_microseconds(mem: Memory):
    # ROS writes nanosecond stamps; fromisoformat kept six digits, so since/until fell up to 1 us early
    before = mem.learn("just before since", occurred_at=1796112000.12345624)["memory_id"]
    after = mem.learn("just after since", occurred_at=1796112000.12345743)["memory_id"]
    since = mem.recall("", since="2026-12-01T08:00:00.123456789Z")["results"]
    assert [h["id"] for h in since] == [after]
    until = mem.recall("", since=1796112000.1234, until="2026-12-01T08:00:00.123457999Z")["results"]
    assert sorted(h["id"] for h in until) == [before, after]
    stamped = mem.learn("stamped", occurred_at="2026-12-01T08:00:00.999999999Z")["memory_id"]
    assert mem.get(stamped)["occurred_at"] == 1796112001.0  # the nearest float, not ...00.999999


@pytest.mark.parametrize("text, seconds", [
    ("2026-12-01T08:00:00.123456789Z", 1796112000.123456789),
    ("2026-12-01T08:00:00,5+01:00", 1796108400.5),
    ("20261201T080000.25Z", 1796112000.25),
    ("2026-12-01T08:00:00.1", 1796112000.1),
    ("2026-12-01T08:00:00Z", 1796112000.0),
    ("2026-12-01", 1796083200.0),
])
def test_an_iso_time_is_the_float_nearest_what_it_says(text: str, seconds: float):
    assert timestamp(text, "since") == seconds
