"""Payload series are bounded: a long one is decimated, keeping its extremes, and says so."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from robotmem import Memory
from robotmem.view import episode_detail
from robotmem.view.series import MAX_POINTS, MAX_SERIES, decimate

SAMPLES = 200_000


def test_decimation_keeps_each_stretchs_extremes_in_time_order() -> None:
    t = [i * 0.001 for i in range(SAMPLES)]
    v = [math.sin(i / 500) for i in range(SAMPLES)]
    v[123_456] = 50.0  # one spike among 200,000 samples must survive
    v[7] = -50.0
    shown_t, shown_v = decimate(t, v)
    assert len(shown_t) == len(shown_v) <= MAX_POINTS
    assert shown_t == sorted(shown_t) and (shown_t[0], shown_t[-1]) == (t[0], t[-1])
    assert max(shown_v) == 50.0 and min(shown_v) == -50.0
    assert all(v[round(x / 0.001)] == y for x, y in zip(shown_t, shown_v))  # real samples, not averages
    assert decimate(t[:10], v[:10]) == (t[:10], v[:10])


def test_a_long_tactile_series_reaches_the_page_decimated_and_says_so() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        fz = [float(i % 1000) for i in range(SAMPLES)]
        mem.save_perception("press", "tactile", data={"t": [i * 0.001 for i in range(SAMPLES)], "fz": fz},
                            session_id=sid)
        detail = episode_detail(mem, sid)
    (force,) = detail["series"]["forces"]
    assert (force["name"], force["samples"], force["decimated"]) == ("fz", SAMPLES, True)
    assert len(force["t"]) <= MAX_POINTS and (min(force["v"]), max(force["v"])) == (0.0, 999.0)
    assert len(json.dumps(detail)) < 100_000  # what the page downloads, not 200,000 samples twice


def test_a_short_series_is_sent_whole() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.save_perception("joints", "proprioceptive",
                            data={"names": ["a"], "t": [1.0, 0.0], "positions": [[0.2], [0.1]]}, session_id=sid)
        (joint,) = episode_detail(mem, sid)["series"]["joints"]
    assert (joint["v"], joint["samples"], joint["decimated"]) == ([0.1, 0.2], 2, False)


def test_the_curves_of_many_records_are_one_per_name_and_a_chart_has_a_bounded_number(
        tactile_episode: Callable[..., str]) -> None:
    with Memory(embedder=None) as mem:
        series = episode_detail(mem, tactile_episode(mem, 1_500))["series"]
        (curve,) = series["forces"]
        assert (curve["name"], curve["records"], curve["samples"]) == ("f0 /fingertip", 1_500, 3_000)
        assert curve["t"] == sorted(curve["t"]) and len(curve["t"]) <= MAX_POINTS
        wide = episode_detail(mem, tactile_episode(mem, 3, keys=MAX_SERIES + 4))["series"]
    assert len(wide["forces"]) == MAX_SERIES and wide["omitted"] == {"joints": 0, "forces": 4, "images": 0}


def test_samples_that_are_not_finite_are_left_out_of_the_json() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.save_perception("press with a dropout", "tactile", session_id=sid,
                            data={"t": [0.0, 1.0, 2.0], "fz": [1.0, float("nan"), 3.0]})
        mem.save_perception("laser scan with no return", "visual", session_id=sid,
                            data={"min_range": float("inf"), "mean_range": 2.0})
        detail = episode_detail(mem, sid)
    json.dumps(detail, allow_nan=False)  # what the web server sends, strictly
    (force,) = detail["series"]["forces"]
    assert force["v"] == [1.0, 3.0] and force["t"][1] - force["t"][0] == 2.0
    assert [s["v"] for s in detail["series"]["scans"]] == [[], [2.0]]


def test_the_page_reads_only_the_payloads_it_draws() -> None:
    # Images (their thumbnail is fetched by the page) and point clouds (drawn nowhere) are not
    # decoded: 150 of each made the page take 825 MB and twice the time.
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        image = mem.save_perception("wrist camera frame", "visual", session_id=sid,
                                    data={"thumbnail": {"base64": "AAAA"}, "thumbnail_shape": [2, 2, 3],
                                          "pixels": [[0, 0, 0]] * 4})
        cloud = mem.save_perception("depth camera cloud", "visual", session_id=sid,
                                    data={"points": [[0.1, 0.2, 0.3]] * 1000})
        joints = mem.save_perception("arm joint log", "proprioceptive", session_id=sid,
                                     data={"names": ["j1"], "t": [0.0, 0.1], "positions": [[0.1], [0.2]]})
        force = mem.save_perception("wrist force", "tactile", session_id=sid, data={"t": [0.0, 0.1], "fz": [1.0, 2.0]})
        scan = mem.save_perception("laser scan summary", "visual", session_id=sid,
                                   data={"min_range": 0.4, "mean_range": 2.5})
        pose = mem.save_perception(
            "pose trajectory /odom chunk 0", "proprioceptive", session_id=sid,
            data={"t0_ns": 100_000_000_000, "t": [0.0, 1.0], "x": [0.0, 1.0], "y": [0.0, 0.0]},
            metadata={"source": {"topic": "/odom"}, "spatial": {"start_position": [0, 0, 0], "end_position": [1, 0, 0],
                                                                "position": [0, 0, 0], "frame": "odom"}})
        read: list[int] = []
        many = mem.get_data_many
        mem.get_data_many = lambda ids, **kw: read.extend(ids) or many(ids, **kw)  # type: ignore[method-assign]
        detail = episode_detail(mem, sid)
    assert set(read) == {joints["memory_id"], force["memory_id"], scan["memory_id"], pose["memory_id"]}
    assert detail["series"]["images"] == [image["memory_id"]]
    assert cloud["memory_id"] not in read
    assert [s["name"] for s in detail["series"]["joints"]] == ["j1"] and detail["series"]["forces"]
    assert detail["series"]["scans"] and len(detail["paths"]) == 1
