"""A short FetchPush experiment, end to end: the simulation, the real stdio MCP server, the statistics.

It asserts that the experiment runs and that what it reports is computed correctly from
what happened (recomputed here, independently), never a success rate.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from scipy.stats import binomtest

from robotmem import Memory

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "experiment_fetchpush.py"
EPISODES, SWEEP = 12, 3


def _load_script() -> ModuleType:
    try:
        import gymnasium_robotics  # noqa: F401
        import mujoco  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the [sim] extra must be installed in CI: {exc}")
        pytest.skip(f"the FetchPush simulation needs the [sim] extra (pip install -e '.[sim]'): {exc}")
    spec = importlib.util.spec_from_file_location("experiment_fetchpush", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, dict[str, Any], Path, Path]:
    exp = _load_script()
    out, home = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("store")
    assert exp.main(["--episodes", str(EPISODES), "--sweep-episodes", str(SWEEP), "--workers", "1",
                     "--window", "4", "--seed", "7", "--out", str(out), "--home", str(home)]) == 0
    return exp, json.loads((out / "results.json").read_text()), out, home


def test_the_memory_arm_ran_every_episode_through_the_mcp_server(run: Any) -> None:
    exp, result, _, home = run
    log = result["memory_log"]
    assert len(log) == EPISODES
    with Memory(home / "memory.db", collection=exp.COLLECTION, embedder=None) as mem:
        sessions = mem.list_sessions(collection=exp.COLLECTION)
        assert len(sessions) == EPISODES and all(s["ended_at"] is not None for s in sessions)
        rows = {r["episode"]["seed"]: r for r in result["eval_rows"]}
        by_score = sorted(exp.score_of(exp.outcome_of(rows[e["seed"]], e["factor"])) for e in log)
        assert sorted(s["outcome_score"] for s in sessions) == pytest.approx(by_score)
        # Every episode's fact is there (merged ones too): the same factors and verdicts as the log.
        stats = mem.outcome_stats("params.push_factor", query="push factor")
    tally: dict[float, list[int]] = {}
    for entry in log:
        n_s = tally.setdefault(entry["factor"], [0, 0])
        n_s[0] += 1
        n_s[1] += int(entry["success"])
    assert {g["value"]: [g["count"], g["successes"]] for g in stats["groups"]} == tally


def test_each_choice_saw_exactly_the_earlier_episodes_of_its_object_type(run: Any) -> None:
    _, result, _, _ = run
    for i, entry in enumerate(result["memory_log"]):
        earlier = [e for e in result["memory_log"][:i] if e["object_type"] == entry["object_type"]]
        expected: dict[str, list[int]] = {}
        for e in earlier:
            n_s = expected.setdefault(str(e["factor"]), [0, 0])
            n_s[0] += 1
            n_s[1] += int(e["success"])
        assert entry["seen"] == expected, i


def test_reported_rates_intervals_and_paired_differences_are_recomputed_exactly(run: Any) -> None:
    exp, result, _, _ = run
    rows = result["eval_rows"]
    assert len(rows) == EPISODES
    for arm, factors in result["chosen"].items():
        success = [rows[i]["trials"][exp.FACTORS.index(f)]["success"] for i, f in enumerate(factors)]
        assert result["success"][arm] == success
        reported = result["arms"][arm]["all"]
        k = sum(success)
        assert (reported["successes"], reported["n"]) == (k, EPISODES)
        ci = binomtest(k, EPISODES).proportion_ci(confidence_level=0.95, method="wilson")
        assert (reported["low"], reported["high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    for name, (a, b) in {"memory - best fixed": ("memory", "best fixed"),
                         "memory - bandit": ("memory", "bandit")}.items():
        d = [int(x) - int(y) for x, y in zip(result["success"][a], result["success"][b])]
        mean, half = statistics.fmean(d), 1.959963984540054 * statistics.stdev(d) / math.sqrt(len(d))
        reported = result["differences"][name]
        assert reported["mean"] == pytest.approx(mean)
        if half > 0:
            assert (reported["low"], reported["high"]) == pytest.approx((mean - half, mean + half))


def test_the_controls_choose_what_they_claim(run: Any) -> None:
    exp, result, _, _ = run
    chosen = result["chosen"]
    assert set(chosen["default"]) == {exp.DEFAULT_FACTOR}
    assert set(chosen["best fixed"]) == {result["best_fixed_factor"]}
    types = [r["episode"]["object_type"] for r in result["eval_rows"]]
    assert chosen["per-type oracle"] == [result["per_type_factor"][t] for t in types]
    seeds = [r["episode"]["seed"] for r in result["eval_rows"]]
    assert len(set(seeds)) == EPISODES, "every episode is a fresh seed"
    assert set(chosen["memory"]) <= set(exp.FACTORS) and set(chosen["bandit"]) <= set(exp.FACTORS)


def test_the_simulation_is_deterministic_so_one_table_serves_every_arm(run: Any) -> None:
    exp, result, _, _ = run
    sim = exp.PushSim()
    row = result["eval_rows"][0]
    episode = exp.Episode(**row["episode"])
    for factor in (exp.FACTORS[0], exp.FACTORS[-1]):
        again = exp.PushSim.run(sim, episode, factor)
        assert vars(again) == pytest.approx(row["trials"][exp.FACTORS.index(factor)] | {
            "object_xy": tuple(row["trials"][0]["object_xy"]), "goal_xy": tuple(row["trials"][0]["goal_xy"])})


def test_the_learning_curve_is_a_png(run: Any) -> None:
    _, _, out, _ = run
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
