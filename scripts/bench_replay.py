#!/usr/bin/env python3
"""Replay throughput, end to end into a fresh store: messages per second.

    python scripts/bench_replay.py [--repeat 3] [--synthetic 100000]

Recordings: the two public recordings in ../shared/datasets (when present) and a
synthetic MCAP of N odometry messages (20 Hz drive, written with scripts/make_datasets.py's
writer) that shows the steady-state rate without the fixed per-file costs (opening,
decompressing the first chunk, generating deserialisers, embedding the few records).

For each: read+decode only (the reader), and end to end (reader -> pipeline -> SQLite
with the real embedding model, loaded before timing). Reports the median of --repeat runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import platform
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, open_reader, replay_recording
from robotmem import Memory

SHARED = Path(os.environ.get("ROBOTMEM_SHARED", REPO.parent / "shared")) / "datasets"
RECORDINGS = {
    "nav2 MCAP (real)": SHARED / "nav2_turtlebot_sim_mcap" / "nav2_turtlebot.mcap",
    "TurtleBot3 ROS 1 bag (real)": SHARED / "turtlebot3_nav_ros1_bag" / "rosbag_demo.bag",
}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_datasets", REPO / "scripts" / "make_datasets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_synthetic(path: Path, count: int) -> None:
    """``count`` Odometry messages of a robot driving circles at 20 Hz."""
    gen = _generator()
    messages = []
    for i in range(count):
        t = gen.T0_NS + i * 50_000_000
        angle = i * 0.002
        messages.append((t, "/odom", "nav_msgs/msg/Odometry",
                         gen.odometry(t, 5 * math.cos(angle), 5 * math.sin(angle), angle + math.pi / 2, 0.2, 0.04)))
    gen.write_mcap(path, messages)


def time_read(path: Path, topics: list[str]) -> tuple[int, float]:
    started = time.perf_counter()
    count = 0
    with open_reader(path) as reader:
        for _ in reader.iter_messages(topics=topics):
            count += 1
    return count, time.perf_counter() - started


def time_replay(path: Path, workdir: Path, run: int) -> tuple[int, float, int]:
    with Memory(workdir / f"bench-{path.stem}-{run}.db") as memory:
        memory.recall("warm up the embedding model")  # load the model before timing
        started = time.perf_counter()
        result = replay_recording(memory, path, BridgeConfig(), ReplayOptions(collection="bench"))
        seconds = time.perf_counter() - started
    return result.stats.messages, seconds, result.stats.records_written


def bench(name: str, path: Path, repeat: int, workdir: Path) -> None:
    with open_reader(path) as reader:
        file_topics = reader.topics()
    replays = [time_replay(path, workdir, i) for i in range(repeat)]
    messages, _, records = replays[0]
    selected = [t for t, s in replay_recording(None, path, BridgeConfig(),
                                               ReplayOptions(dry_run=True)).stats.topics.items() if s.messages]
    reads = [time_read(path, selected) for _ in range(repeat)]
    read_s = statistics.median(s for _, s in reads)
    replay_s = statistics.median(s for _, s, _ in replays)
    print(f"{name}: {path.name}, {path.stat().st_size / 1e6:.1f} MB, {sum(i.count or 0 for i in file_topics.values())} "
          f"messages in the file, {messages} replayed ({', '.join(selected)}), {records} records")
    print(f"  read+decode   {reads[0][0] / read_s:>9,.0f} msgs/s  ({read_s:.3f} s)")
    print(f"  end to end    {messages / replay_s:>9,.0f} msgs/s  ({replay_s:.3f} s, median of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--synthetic", type=int, default=100_000, help="odometry messages in the synthetic MCAP")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for name, path in RECORDINGS.items():
            if path.exists():
                bench(name, path, args.repeat, workdir)
            else:
                print(f"{name}: skipped, {path} not found")
        synthetic = workdir / f"synthetic_odom_{args.synthetic}.mcap"
        write_synthetic(synthetic, args.synthetic)
        bench(f"synthetic odometry MCAP ({args.synthetic:,} msgs)", synthetic, args.repeat, workdir)


if __name__ == "__main__":
    main()
