"""Benchmark the live ROS bridge: JointState at 1,000 Hz and Odometry at 50 Hz over loopback.

A rosbridge v2 server (bridges.rosbridge.testing) runs in a child process on 127.0.0.1 and
publishes both streams for ``--duration`` seconds; the bridge runs in this process with a
real store (temporary directory, the real embedding model) and the default config. The
script stops by itself and prints: messages/s ingested, drops, peak and sampled memory
(RSS) of the bridge process, and write lag (receive -> fed to the pipeline, and the
slowest store write).

    python scripts/bench_bridge.py [--duration 30] [--joint-hz 1000] [--odom-hz 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import platform
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bridges.pipeline.config import BridgeConfig
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

JOINTS = [f"joint_{i}" for i in range(7)]


def joint_state(i: int, hz: float) -> dict[str, Any]:
    t = i / hz
    positions = [math.sin(t + k) for k in range(len(JOINTS))]
    return m.joint_state(1000.0 + t, JOINTS, positions, [math.cos(t + k) for k in range(len(JOINTS))],
                         [0.1 * k for k in range(len(JOINTS))])


def odometry(i: int, hz: float) -> dict[str, Any]:
    t = i / hz
    return m.odometry(1000.0 + t, 5.0 * math.cos(t / 10.0), 5.0 * math.sin(t / 10.0), yaw=t / 10.0 + math.pi / 2,
                      vx=0.5)


def serve(conn: Any, joint_hz: float, odom_hz: float, duration: float) -> None:
    """Child process: the robot side. Reports its port, streams on "go", reports what it sent."""
    with RosbridgeTestServer(host="127.0.0.1") as server:
        server.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        server.add_topic("/odom", "nav_msgs/msg/Odometry")
        conn.send(server.port)
        assert conn.recv() == "go"
        server.wait_for_subscription("/joint_states", timeout=30)
        server.wait_for_subscription("/odom", timeout=30)
        started = time.monotonic()
        streams = [server.start_stream("/joint_states", lambda i: joint_state(i, joint_hz), joint_hz,
                                       int(joint_hz * duration)),
                   server.start_stream("/odom", lambda i: odometry(i, odom_hz), odom_hz, int(odom_hz * duration))]
        for stream in streams:
            stream.done.wait(duration * 3 + 30)
        conn.send({"sent": {s.topic: s.sent for s in streams}, "publish_s": time.monotonic() - started})
        conn.recv()  # "stop"


def cpu_seconds() -> float:
    """User + system CPU time of this process (the bridge; the server is a child process)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


class MemorySampler:
    """RSS of this process every ``interval`` seconds, on a thread of its own."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append((time.monotonic() - self._t0, rss_mb()))


def run(args: argparse.Namespace) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child, args.joint_hz, args.odom_hz, args.duration), daemon=True)
    server.start()
    port = parent.recv()
    with tempfile.TemporaryDirectory() as home, Memory(Path(home) / "bench.db", collection="bench") as memory:
        memory.recall("warm up the embedding model")  # model load is not what we measure
        options = BridgeOptions(url=f"ws://127.0.0.1:{port}", collection="bench", robot_id="bench",
                                status_interval_s=args.status_interval)
        bridge = RosBridge(memory, BridgeConfig(), options, status_sink=lambda line: print(line, flush=True))
        sampler = MemorySampler()
        rss_start = rss_mb()
        cpu_start = cpu_seconds()
        bridge.start()
        sampler.start()
        parent.send("go")
        report = parent.recv()
        expected = sum(report["sent"].values())
        caught_up = bridge.wait_until(lambda s: s.total("fed") >= expected, 60)
        snapshot = bridge.stop()
        cpu_used = cpu_seconds() - cpu_start
        sampler.stop()
        parent.send("stop")
    server.join(10)
    result = figures(args, report, snapshot, sampler, rss_start, caught_up)
    result["bridge_cpu_pct_of_one_core"] = round(100.0 * cpu_used / report["publish_s"], 1)
    return result


def figures(args: argparse.Namespace, report: dict[str, Any], snapshot: Any, sampler: MemorySampler,
            rss_start: float, caught_up: bool) -> dict[str, Any]:
    publish_s = report["publish_s"]
    rss = [mb for _, mb in sampler.samples]
    quarters = [rss[min(len(rss) - 1, int(len(rss) * q))] for q in (0.25, 0.5, 0.75, 1.0)] if rss else []
    return {
        "machine": f"{platform.machine()}, {mp.cpu_count()} cores, Python {platform.python_version()}",
        "duration_s": args.duration,
        "sent": report["sent"],
        "received": snapshot.received,
        "ingested": snapshot.fed,
        "dropped": snapshot.total("dropped"),
        "malformed": snapshot.total("malformed") + snapshot.bad_frames,
        "all_ingested": caught_up and snapshot.fed == report["sent"],
        "publish_s": round(publish_s, 2),
        "ingest_msgs_per_s": round(snapshot.total("fed") / publish_s, 1),
        "rss_mb": {"before": round(rss_start, 1), "peak": round(max(rss, default=rss_start), 1),
                   "at_25_50_75_100_pct": [round(q, 1) for q in quarters]},
        "queue_peak": snapshot.queue_peak,
        "max_receive_to_fed_lag_ms": round(snapshot.worst_lag_s * 1000, 1),
        "max_store_write_ms": round(snapshot.max_write_s * 1000, 1),
        "records_written": snapshot.records_written,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--joint-hz", type=float, default=1000.0)
    parser.add_argument("--odom-hz", type=float, default=50.0)
    parser.add_argument("--status-interval", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:28s} {value}")
    return 0 if result["all_ingested"] and result["dropped"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
