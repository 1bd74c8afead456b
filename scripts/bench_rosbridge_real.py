"""Benchmark the bridge against the REAL rosbridge server (ROS 1) with a real rospy publisher.

Two runs, each with a fresh store (temporary folder, the real embedding model) and the
default bridge config; needs ../shared/rosbridge set up (setup.sh):

* ``throughput``: JointState at ``--joint-hz`` (1000) and Odometry at ``--odom-hz`` (50) for
  ``--duration`` (30 s), the node waiting until rosbridge subscribed. Figures: published by
  the node vs received and stored by the bridge (drops), worst receive -> pipeline lag.
* ``restarts``: Odometry at 50 Hz while rosbridge_websocket is killed and restarted
  ``--restarts`` (3) times, each time back ``--outage`` (5 s) after the kill. Figures: per
  outage, how long the server was away and how much odometry time was lost (the pause in
  received message stamps around it; target: at most the outage plus 2 s), and the share
  of all published odometry lost.

    python scripts/bench_rosbridge_real.py [--duration 30] [--restarts 3] [--outage 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bridges.pipeline import BridgeConfig
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.testing.real_server import RealRosbridge, missing_ros
from robotmem import Memory


def _bridge(memory: Memory, url: str) -> RosBridge:
    bridge = RosBridge(memory, BridgeConfig(), BridgeOptions(url=url, collection="bench", status_interval_s=3600.0),
                       status_sink=lambda line: None)
    bridge.start()
    if not bridge.wait_connected(30):
        raise RuntimeError("the bridge did not connect to the real server")
    bridge.wait_until(lambda s: {"/odom", "/joint_states"} <= set(s.subscribed), 10)
    return bridge


def throughput(server: RealRosbridge, folder: Path, seconds: float, joint_hz: float, odom_hz: float) -> dict[str, Any]:
    with Memory(folder / "throughput.db", collection="bench") as memory:
        bridge = _bridge(memory, server.url)
        publisher = server.publisher([{"topic": "/joint_states", "kind": "joints", "hz": joint_hz},
                                      {"topic": "/odom", "kind": "odom", "hz": odom_hz}], seconds=seconds)
        publisher.wait_ready()
        sent = publisher.result(timeout=seconds + 120)
        time.sleep(1.0)
        snap = bridge.stop()
    topics = {}
    for topic in ("/joint_states", "/odom"):
        published = sent[topic]["count"]
        span = sent[topic]["last"] - sent[topic]["first"]
        topics[topic] = {"published": published, "published_hz": round(published / span, 1) if span else None,
                         "received": snap.received.get(topic, 0), "stored": snap.fed.get(topic, 0),
                         "lost": published - snap.fed.get(topic, 0), "dropped_in_bridge": snap.dropped.get(topic, 0)}
    return {"seconds": seconds, "topics": topics, "worst_lag_ms": round(snap.worst_lag_s * 1000, 1),
            "records_written": snap.records_written, "max_write_ms": round(snap.max_write_s * 1000, 1)}


def restarts(server: RealRosbridge, folder: Path, count: int, outage_s: float, odom_hz: float) -> dict[str, Any]:
    settle_s = 6.0
    # a restart takes seconds of its own on a busy machine: publish long enough for every outage
    seconds = settle_s + count * (outage_s + settle_s + 6.0) + 4.0
    with Memory(folder / "restarts.db", collection="bench") as memory:
        bridge = _bridge(memory, server.url)
        publisher = server.publisher([{"topic": "/odom", "kind": "odom", "hz": odom_hz}], seconds=seconds)
        publisher.wait_ready()
        first = time.monotonic()
        outages = []
        startup = 3.0  # rosbridge_websocket takes seconds to start: begin that early enough
        time.sleep(settle_s)
        for _ in range(count):
            down_wall, down = time.time(), time.monotonic()
            server.kill_websocket()
            time.sleep(max(0.0, outage_s - startup))
            started = time.monotonic()
            server.start_websocket()  # returns once the port accepts connections
            startup = time.monotonic() - started
            outages.append((down_wall, time.monotonic() - down))
            time.sleep(settle_s)
        publisher_left_s = seconds - (time.monotonic() - first)
        sent = publisher.result(timeout=seconds + 120)["/odom"]
        time.sleep(1.0)
        snap = bridge.stop()
        pauses = _odom_pauses(memory)
    rows = []
    for down_wall, outage in outages:
        # the pause in received odometry stamps that spans the moment the server went away
        pause = next((p for p in pauses if p["start"] - 1.0 <= down_wall <= p["end"]), None)
        lost = None if pause is None else pause["end"] - pause["start"] - 1.0 / odom_hz
        rows.append({"outage_s": round(outage, 2), "odometry_lost_s": None if lost is None else round(lost, 2),
                     "lost_minus_outage_s": None if lost is None else round(lost - outage, 2)})
    # the share lost while the test ran its outages (not the quiet tail after the last one)
    return {"outages": rows, "published": sent["count"], "stored": snap.fed.get("/odom", 0),
            "publisher_tail_s": round(max(0.0, publisher_left_s), 1),
            "lost_share": round(1 - snap.fed.get("/odom", 0) / sent["count"], 4), "reconnects": snap.connects - 1}


def _odom_pauses(memory: Memory) -> list[dict[str, Any]]:
    """The pauses in received /odom stamps the episode summaries recorded (every received stamp
    goes through the gap rule; the stored path itself is downsampled)."""
    pauses: list[dict[str, Any]] = []
    for session in memory.list_sessions(collection="bench"):
        for record in memory.session_timeline(session["session_id"])["memories"]:
            if record["perception_type"] == "procedural":
                pauses += [g for g in record["context"].get("gaps", []) if g.get("topic") == "/odom"]
    return sorted(pauses, key=lambda g: g["start"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--joint-hz", type=float, default=1000.0)
    parser.add_argument("--odom-hz", type=float, default=50.0)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--outage", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    reason = missing_ros()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}
    with tempfile.TemporaryDirectory() as tmp, RealRosbridge() as server:
        result["throughput"] = throughput(server, Path(tmp), args.duration, args.joint_hz, args.odom_hz)
        result["restarts"] = restarts(server, Path(tmp), args.restarts, args.outage, args.odom_hz)
    print(json.dumps(result, indent=2) if args.json else _text(result))
    return 0


def _text(result: dict[str, Any]) -> str:
    lines = [f"machine: {result['machine']}"]
    t = result["throughput"]
    lines.append(f"throughput, {t['seconds']:.0f} s through the real rosbridge:")
    for topic, row in t["topics"].items():
        lines.append(f"  {topic}: published {row['published']} ({row['published_hz']} Hz), received "
                     f"{row['received']}, stored {row['stored']}, lost {row['lost']}, dropped in bridge "
                     f"{row['dropped_in_bridge']}")
    lines.append(f"  worst lag {t['worst_lag_ms']} ms, slowest write {t['max_write_ms']} ms, "
                 f"records {t['records_written']}")
    r = result["restarts"]
    lines.append(f"restarts: {len(r['outages'])} x rosbridge_websocket killed and back; odometry 50 Hz")
    for row in r["outages"]:
        lines.append(f"  outage {row['outage_s']} s: odometry lost {row['odometry_lost_s']} s "
                     f"(outage + {row['lost_minus_outage_s']} s)")
    lines.append(f"  published {r['published']}, stored {r['stored']}, lost {r['lost_share']:.1%}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
