"""The project's sample recordings: small, reproducible, and a good demo."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_recording
from robotmem import Memory

MB = 1024 * 1024


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_sample_recording_is_under_one_megabyte(datasets: Path) -> None:
    recordings = [p for p in datasets.rglob("*") if p.suffix in (".mcap", ".db3", ".bag")]
    assert len(recordings) >= 2
    for path in recordings:
        assert path.stat().st_size < MB, path


def test_the_generator_writes_identical_files_every_run(make_datasets: ModuleType, tmp_path: Path) -> None:
    for out in (tmp_path / "a", tmp_path / "b"):
        out.mkdir()
        make_datasets.write_mcap(out / "nav_demo.mcap", make_datasets.nav_demo_messages())
        make_datasets.write_ros2_bag(out / "arm_push_ros2", make_datasets.arm_push_messages())
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")


def test_the_nav_demo_replays_into_two_errands_you_can_recall(
    datasets: Path, memory: Memory, make_datasets: ModuleType
) -> None:
    result = replay_recording(memory, datasets / "nav_demo.mcap", BridgeConfig(),
                              ReplayOptions(collection="demo", robot_id="demo-bot",
                                            episode_split="topic:/robotmem/episode"))
    assert result.stats.episodes_ended == 2 and result.stats.facts_learned == 3
    sessions = {s["context"]["task"]["name"]: s for s in memory.list_sessions(collection="demo")}
    assert {name: s["outcome_score"] for name, s in sessions.items()} == {"fetch_cup": 0.9, "return_to_dock": 1.0}

    hits = memory.recall("where is the cup?", collection="demo", n=3)["results"]
    assert hits[0]["content"] == "The cup is on the kitchen counter next to the window"
    assert hits[0]["session_id"] == sessions["fetch_cup"]["session_id"]

    odom = [m for m in make_datasets.nav_demo_messages() if m[1] == "/odom"]
    fetch_end = next(i for i, m in enumerate(odom) if m[0] > sessions["return_to_dock"]["context"]["episode"]["t_start_ns"])
    xy = np.array([[m[3]["pose"]["pose"]["position"]["x"], m[3]["pose"]["pose"]["position"]["y"]] for m in odom[:fetch_end]])
    raw_length = float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum())
    summaries = memory.recall("", collection="demo", session_id=sessions["fetch_cup"]["session_id"], n=50,
                              context_filter={"source.policy": "topic:/robotmem/episode"})["results"]
    (summary,) = [h for h in summaries if h["perception_type"] == "procedural"]
    assert summary["spatial"]["path_length_m"] == pytest.approx(raw_length, rel=1e-3)
    assert summary["spatial"]["end_position"][:2] == pytest.approx([6.2, 3.0], abs=0.06)
