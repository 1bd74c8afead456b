"""Does memory make a push controller better? FetchPush-v4 with hidden object physics, over MCP.

Each episode draws a fresh seed: object and goal positions (the environment's own
reset), an object type (slippery, default, heavy: friction and mass changed in the
MuJoCo model) and a small jitter on the push speed. A scripted controller (approach
behind the object, descend, push toward the goal) pushes with a factor chosen from
FACTORS; the best factor depends on the type. Arms, all on the same episodes:

- default: factor 1.0 (the controller unscaled);
- best fixed: the factor with the highest success on separate sweep seeds;
- per-type oracle: the best factor per type on the sweep seeds (the ceiling);
- random: a factor drawn uniformly;
- bandit: Thompson sampling on its own counts, ignoring the object type (no memory);
- memory: Thompson sampling on the counts robotmem's ``outcome_stats`` returns for earlier
  episodes with the same object type, over MCP (start_session, outcome_stats, learn,
  end_session per episode) against ``python -m robotmem`` on a fresh temporary store.

The simulation is deterministic given the episode and the factor, so every
(episode, factor) is simulated once, in parallel processes, and every arm reads its
outcome from that table: the arms see identical physics, episode by episode.

    python scripts/experiment_fetchpush.py --episodes 1000 --sweep-episodes 400 --workers 2 --out docs/experiments
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

FACTORS = (0.25, 0.5, 1.0)
DEFAULT_FACTOR = 1.0
#: (friction of the object and the table under it, object mass in kg). MuJoCo takes the larger
#: friction of a contact pair, so a slippery object needs a slippery table under it too.
OBJECT_TYPES = {"slippery": (0.1, 2.0), "default": (1.0, 2.0), "heavy": (1.0, 10.0)}
JITTER_SIGMA = 0.15  # log-normal jitter on the push speed: success is a probability, not fixed by the seed
SWEEP_SEED_BASE = 10_000_000
EVAL_SEED_BASE = 20_000_000
COLLECTION = "fetchpush"
Z95 = 1.959963984540054


# -- episodes and the simulation -------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    seed: int
    object_type: str
    jitter: float


def draw_episode(seed: int) -> Episode:
    rng = np.random.default_rng(seed)
    kind = str(rng.choice(sorted(OBJECT_TYPES)))
    return Episode(seed=seed, object_type=kind, jitter=float(np.exp(rng.normal(0.0, JITTER_SIGMA))))


@dataclass(frozen=True)
class Trial:
    success: bool
    object_xy: tuple[float, float]
    goal_xy: tuple[float, float]
    start_distance: float
    final_distance: float


class PushSim:
    """FetchPush-v4 with settable object physics and the scripted push controller."""

    def __init__(self) -> None:
        import gymnasium as gym
        import gymnasium_robotics
        import mujoco

        gym.register_envs(gymnasium_robotics)
        self.env = gym.make("FetchPush-v4")
        model = self.env.unwrapped.model
        self.model = model
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object0")
        table = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "table0")
        self.body = body
        self.object_geom = next(i for i in range(model.ngeom) if model.geom_bodyid[i] == body)
        self.table_geom = next(i for i in range(model.ngeom) if model.geom_bodyid[i] == table)
        self.base_mass = float(model.body_mass[body])
        self.base_inertia = model.body_inertia[body].copy()

    def _set_type(self, kind: str) -> None:
        friction, mass = OBJECT_TYPES[kind]
        self.model.geom_friction[self.object_geom, 0] = friction
        self.model.geom_friction[self.table_geom, 0] = friction
        self.model.body_mass[self.body] = mass
        self.model.body_inertia[self.body] = self.base_inertia * mass / self.base_mass

    def run(self, episode: Episode, factor: float) -> Trial:
        self._set_type(episode.object_type)
        obs, _ = self.env.reset(seed=episode.seed)
        goal = obs["desired_goal"]
        start = obs["observation"][3:6].copy()
        phase = "approach"
        for _ in range(self.env.spec.max_episode_steps):
            action, phase = push_action(obs["observation"], goal, factor * episode.jitter, phase)
            obs, _, _, _, _ = self.env.step(action)
            if phase == "push" and _at_rest_on_goal(obs["observation"], goal):
                break  # nothing moves any more: the remaining steps cannot change the outcome
        final = obs["achieved_goal"]
        return Trial(
            success=bool(np.linalg.norm(final - goal) < self.env.unwrapped.distance_threshold),
            object_xy=(round(float(start[0]), 4), round(float(start[1]), 4)),
            goal_xy=(round(float(goal[0]), 4), round(float(goal[1]), 4)),
            start_distance=float(np.linalg.norm(start[:2] - goal[:2])),
            final_distance=float(np.linalg.norm(final[:2] - goal[:2])),
        )


def push_action(observation: np.ndarray, goal: np.ndarray, speed: float, phase: str) -> tuple[np.ndarray, str]:
    """Approach a point behind the object (seen from the goal), descend, push toward the goal at ``speed``."""
    grip, obj = observation[0:3], observation[3:6]
    to_goal = goal[:2] - obj[:2]
    distance = float(np.linalg.norm(to_goal))
    direction = to_goal / max(distance, 1e-6)
    behind = obj[:2] - direction * 0.06
    action = np.zeros(4)
    action[3] = -1.0  # gripper closed
    if phase == "approach":
        target = np.r_[behind, obj[2] + 0.06]
        if np.linalg.norm(target - grip) < 0.015:
            phase = "descend"
    if phase == "descend":
        target = np.r_[behind, obj[2]]
        if abs(grip[2] - obj[2]) < 0.01:
            phase = "push"
    if phase != "push":
        action[:3] = np.clip(10.0 * (target - grip), -1.0, 1.0)
        return action, phase
    if distance > 0.02:
        line = obj[:2] - direction * 0.045
        offset = line - grip[:2]
        sideways = offset - np.dot(offset, direction) * direction  # stay lined up behind the object
        action[:2] = speed * direction + 8.0 * sideways
        action[2] = 10.0 * (obj[2] - grip[2])
    action[:3] = np.clip(action[:3], -1.0, 1.0)
    return action, phase


def _at_rest_on_goal(observation: np.ndarray, goal: np.ndarray) -> bool:
    """The controller has stopped (object within 2 cm of the goal) and neither object nor gripper moves."""
    object_velocity, gripper_velocity = observation[14:17], observation[20:23]
    return bool(np.linalg.norm(goal[:2] - observation[3:5]) <= 0.02
                and np.abs(object_velocity).max() < 1e-5 and np.abs(gripper_velocity).max() < 1e-5)


_SIM: PushSim | None = None


def _simulate_chunk(seeds: Sequence[int]) -> list[dict[str, Any]]:
    global _SIM
    if _SIM is None:
        _SIM = PushSim()
    rows = []
    for seed in seeds:
        episode = draw_episode(seed)
        trials = [_SIM.run(episode, f) for f in FACTORS]
        rows.append({"episode": asdict(episode), "trials": [asdict(t) for t in trials]})
    return rows


def outcome_table(seeds: Sequence[int], workers: int, cache: Path | None = None) -> list[dict[str, Any]]:
    """Every episode under every factor, in ``workers`` processes; rows in seed order.

    With ``cache`` (JSON Lines), rows already there are reused and new ones appended as
    they finish, so an interrupted run resumes and a rerun does not simulate again.
    """
    done: dict[int, dict[str, Any]] = {}
    if cache is not None and cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            done[row["episode"]["seed"]] = row
    missing = [s for s in seeds if s not in done]
    chunks = [missing[i : i + 10] for i in range(0, len(missing), 10)]

    def keep(part: list[dict[str, Any]]) -> None:
        for row in part:
            done[row["episode"]["seed"]] = row
        if cache is not None:
            with cache.open("a") as f:
                f.writelines(json.dumps(row) + "\n" for row in part)

    if workers <= 1:
        for chunk in chunks:
            keep(_simulate_chunk(chunk))
    else:
        with get_context("spawn").Pool(workers) as pool:
            for part in pool.imap(_simulate_chunk, chunks):
                keep(part)
    return [done[s] for s in seeds]


# -- statistics ------------------------------------------------------------------------


def wilson(successes: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + Z95 * Z95 / n
    centre = (p + Z95 * Z95 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_difference(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Mean of a - b over paired episodes, with a normal 95 % interval on the paired differences."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else float("nan")
    return {"mean": mean, "low": mean - Z95 * se, "high": mean + Z95 * se, "n": len(d)}


def rate(successes: Sequence[bool]) -> dict[str, float]:
    s, n = int(sum(successes)), len(successes)
    low, high = wilson(s, n)
    return {"successes": s, "n": n, "rate": s / n if n else float("nan"), "low": low, "high": high}


# -- policies --------------------------------------------------------------------------


def thompson(counts: dict[float, tuple[int, int]], rng: np.random.Generator) -> float:
    """Sample Beta(1 + successes, 1 + failures) per factor; the largest sample wins."""
    draws = [rng.beta(1 + counts.get(f, (0, 0))[1], 1 + counts.get(f, (0, 0))[0] - counts.get(f, (0, 0))[1])
             for f in FACTORS]
    return FACTORS[int(np.argmax(draws))]


def best_factor(rows: Sequence[dict[str, Any]]) -> float:
    wins = np.array([[t["success"] for t in r["trials"]] for r in rows], dtype=float).sum(axis=0)
    return FACTORS[int(np.argmax(wins))]


def sweep_choices(sweep: Sequence[dict[str, Any]]) -> tuple[float, dict[str, float], dict[str, Any]]:
    """Best single factor and best factor per type, from the sweep episodes only."""
    per_type = {k: best_factor([r for r in sweep if r["episode"]["object_type"] == k]) for k in OBJECT_TYPES}
    table = {
        kind: {str(f): rate([r["trials"][i]["success"] for r in sweep if r["episode"]["object_type"] == kind])
               for i, f in enumerate(FACTORS)}
        for kind in OBJECT_TYPES
    }
    table["all"] = {str(f): rate([r["trials"][i]["success"] for r in sweep]) for i, f in enumerate(FACTORS)}
    return best_factor(sweep), per_type, table


def outcome_of(row: dict[str, Any], factor: float) -> dict[str, Any]:
    trial: dict[str, Any] = row["trials"][FACTORS.index(factor)]
    return trial


def run_fixed(rows: Sequence[dict[str, Any]], choose: Callable[[dict[str, Any]], float]) -> list[float]:
    return [choose(r) for r in rows]


def run_bandit(rows: Sequence[dict[str, Any]], rng: np.random.Generator) -> list[float]:
    counts: dict[float, tuple[int, int]] = {}
    chosen = []
    for row in rows:
        factor = thompson(counts, rng)
        n, s = counts.get(factor, (0, 0))
        counts[factor] = (n + 1, s + int(outcome_of(row, factor)["success"]))
        chosen.append(factor)
    return chosen


def score_of(trial: dict[str, Any]) -> float:
    """The episode's outcome score: 1 on success, else the share of the way covered (at most 0.9)."""
    if trial["success"]:
        return 1.0
    covered = 1.0 - trial["final_distance"] / max(trial["start_distance"], 1e-6)
    return round(min(0.9, max(0.0, covered)), 4)


async def run_memory(rows: Sequence[dict[str, Any]], rng: np.random.Generator, home: Path) -> list[dict[str, Any]]:
    """The memory arm: one robotmem session per episode, factors chosen from outcome_stats, over stdio MCP."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {**os.environ, "ROBOTMEM_HOME": str(home), "ROBOTMEM_EMBEDDINGS": "off"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "robotmem", "serve"], env=env)
    log: list[dict[str, Any]] = []
    with (home / "server.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await session.call_tool(tool, arguments)
                if result.is_error or not isinstance(result.structured_content, dict):
                    raise RuntimeError(f"{tool} failed: {result.content}")
                return result.structured_content

            for row in rows:
                episode, kind = row["episode"], row["episode"]["object_type"]
                first = row["trials"][0]
                context = {"object": {"type": kind},
                           "spatial": {"object_position": first["object_xy"], "goal_position": first["goal_xy"]}}
                sid = (await call("start_session", {"collection": COLLECTION, "context": context}))["session_id"]
                stats = await call("outcome_stats", {"group_by": "params.push_factor", "collection": COLLECTION,
                                                     "context_filter": {"object.type": kind}})
                seen = {float(g["value"]): (g["count"], g["successes"]) for g in stats["groups"]}
                factor = thompson(seen, rng)
                trial = outcome_of(row, factor)
                verdict = "success" if trial["success"] else "failure"
                await call("learn", {
                    "insight": f"push factor {factor} on the {kind} object: {verdict}",
                    "session_id": sid,
                    "context": {**context, "params": {"push_factor": factor},
                                "task": {"name": "fetch_push", "success": trial["success"]}},
                })
                await call("end_session", {"session_id": sid, "outcome_score": score_of(trial)})
                log.append({"seed": episode["seed"], "object_type": kind, "factor": factor,
                            "success": trial["success"], "seen": {str(f): list(c) for f, c in seen.items()}})
    return log


# -- the experiment --------------------------------------------------------------------


def evaluate(eval_rows: Sequence[dict[str, Any]], sweep_rows: Sequence[dict[str, Any]], rng_seed: int,
             home: Path) -> dict[str, Any]:
    best, per_type, sweep_table = sweep_choices(sweep_rows)
    rng = np.random.default_rng(rng_seed)
    chosen: dict[str, list[float]] = {
        "default": run_fixed(eval_rows, lambda r: DEFAULT_FACTOR),
        "best fixed": run_fixed(eval_rows, lambda r: best),
        "per-type oracle": run_fixed(eval_rows, lambda r: per_type[r["episode"]["object_type"]]),
        "random": [float(rng.choice(FACTORS)) for _ in eval_rows],
        "bandit": run_bandit(eval_rows, np.random.default_rng(rng_seed + 1)),
    }
    started = time.perf_counter()
    memory_log = asyncio.run(run_memory(eval_rows, np.random.default_rng(rng_seed + 2), home))
    memory_wall = time.perf_counter() - started
    chosen["memory"] = [entry["factor"] for entry in memory_log]
    success = {arm: [bool(outcome_of(r, f)["success"]) for r, f in zip(eval_rows, factors)]
               for arm, factors in chosen.items()}
    half = len(eval_rows) // 2
    return {
        "best_fixed_factor": best,
        "per_type_factor": per_type,
        "sweep": sweep_table,
        "arms": {arm: {"all": rate(s), "second_half": rate(s[half:])} for arm, s in success.items()},
        "differences": {
            "memory - best fixed": paired_difference(success["memory"], success["best fixed"]),
            "memory - bandit": paired_difference(success["memory"], success["bandit"]),
            "oracle - best fixed": paired_difference(success["per-type oracle"], success["best fixed"]),
            "memory - best fixed (second half)": paired_difference(success["memory"][half:],
                                                                   success["best fixed"][half:]),
            "memory - bandit (second half)": paired_difference(success["memory"][half:], success["bandit"][half:]),
        },
        "chosen": chosen,
        "success": success,
        "memory_log": memory_log,
        "memory_arm_wall_s": memory_wall,
    }


def plot_learning_curve(success: dict[str, list[bool]], path: Path, window: int) -> None:
    """Top: success per arm, moving mean. Bottom: memory's paired lead, cumulative mean with a 95 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7.5), dpi=110, sharex=True)
    for arm, outcomes in success.items():
        values = np.asarray(outcomes, dtype=float)
        w = max(1, min(window, len(values)))
        moving = np.convolve(values, np.ones(w) / w, mode="valid")
        style = {"linewidth": 2.4} if arm == "memory" else {"linewidth": 1.2, "alpha": 0.85}
        top.plot(np.arange(w, len(values) + 1), moving, label=arm, **style)
    top.set_ylabel(f"success (moving mean of {window})")
    top.set_title("FetchPush-v4, object type hidden in the physics: success against episodes seen")
    top.set_ylim(0, 1)
    top.grid(alpha=0.3)
    top.legend(loc="lower right", fontsize=8, ncol=2)
    for other in ("best fixed", "bandit"):
        d = np.asarray(success["memory"], dtype=float) - np.asarray(success[other], dtype=float)
        n = np.arange(1, len(d) + 1)
        mean = np.cumsum(d) / n
        var = np.maximum(np.cumsum(d * d) / n - mean**2, 0.0) * n / np.maximum(n - 1, 1)
        half = Z95 * np.sqrt(var / n)
        start = min(20, len(d) - 1)
        top_line = bottom.plot(n[start:], 100 * mean[start:], label=f"memory - {other}")[0]
        bottom.fill_between(n[start:], 100 * (mean - half)[start:], 100 * (mean + half)[start:],
                            color=top_line.get_color(), alpha=0.15)
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.set_xlabel("episodes seen")
    bottom.set_ylabel("paired difference so far (pp)")
    bottom.grid(alpha=0.3)
    bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def markdown_table(result: dict[str, Any]) -> str:
    lines = ["| arm | success, all episodes [95 % CI] | second half [95 % CI] |", "|---|---|---|"]
    for arm, r in result["arms"].items():
        a, h = r["all"], r["second_half"]
        lines.append(f"| {arm} | {a['rate']:.1%} [{a['low']:.1%}, {a['high']:.1%}] ({a['successes']}/{a['n']}) "
                     f"| {h['rate']:.1%} [{h['low']:.1%}, {h['high']:.1%}] |")
    lines += ["", "| paired difference | mean [95 % CI] |", "|---|---|"]
    for name, d in result["differences"].items():
        lines.append(f"| {name} | {d['mean'] * 100:+.1f} pp [{d['low'] * 100:+.1f}, {d['high'] * 100:+.1f}] "
                     f"(n = {d['n']}) |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="paired evaluation episodes (fresh seeds)")
    parser.add_argument("--sweep-episodes", type=int, default=400, help="separate seeds for the fixed-factor sweep")
    parser.add_argument("--workers", type=int, default=2, help="simulation processes")
    parser.add_argument("--seed", type=int, default=0, help="offset of every seed (episodes and policies)")
    parser.add_argument("--window", type=int, default=100, help="learning curve moving-mean window")
    parser.add_argument("--out", type=Path, required=True, help="directory for results.json and learning_curve.png")
    parser.add_argument("--cache", type=Path, help="JSON Lines of simulated episodes to reuse and extend")
    parser.add_argument("--home", type=Path, help="keep the memory arm's robotmem store here (default: a temp dir)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    sweep_seeds = [SWEEP_SEED_BASE + args.seed * 100_000 + i for i in range(args.sweep_episodes)]
    eval_seeds = [EVAL_SEED_BASE + args.seed * 100_000 + i for i in range(args.episodes)]
    rows = outcome_table(sweep_seeds + eval_seeds, args.workers, args.cache)
    simulated = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="robotmem-fetchpush-") as tmp:
        home = args.home or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        result = evaluate(rows[len(sweep_seeds):], rows[: len(sweep_seeds)], args.seed, home)
    result.update(
        episodes=args.episodes, sweep_episodes=args.sweep_episodes, workers=args.workers, seed=args.seed,
        factors=list(FACTORS), object_types={k: {"friction": f, "mass_kg": m} for k, (f, m) in OBJECT_TYPES.items()},
        simulation_wall_s=simulated, wall_s=time.perf_counter() - started,
        eval_rows=rows[len(sweep_seeds):],
    )
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    plot_learning_curve(result["success"], args.out / "learning_curve.png", args.window)
    print(markdown_table(result))
    print(f"\nbest fixed factor {result['best_fixed_factor']}, per type {result['per_type_factor']}; "
          f"wall {result['wall_s']:.0f} s (simulation {simulated:.0f} s, memory arm {result['memory_arm_wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
