"""Replay of recordings with the properties real robots' recordings have (made in the test).

Humble-era bags without type definitions, PoseWithCovarianceStamped on /pose, recorded time
(occurred_at), stamps far from the log time, empty topics, errors, Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from recordings import (
    Msg,
    S,
    odometry,
    pose_with_covariance,
    string,
    write_mcap,
    write_ros2_bag,
)
from rosbags.rosbag2 import Writer

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_recording
from robotmem import Memory

RunCli = Callable[..., tuple[int, str, str]]
MAY_2015 = 1432166400 * S  # 2015-05-21T00:00:00Z
PWCS = "geometry_msgs/msg/PoseWithCovarianceStamped"


def _pose_track(topic: str, start_ns: int, seconds: float, hz: float = 10.0, speed: float = 0.5) -> list[Msg]:
    n = int(seconds * hz)
    return [Msg(topic, PWCS, start_ns + i * int(S / hz),
                pose_with_covariance(start_ns + i * int(S / hz), speed * i / hz, 0.0)) for i in range(n)]


def _records(memory: Memory, session_id: str) -> list[dict]:
    return memory.session_timeline(session_id)["memories"]


def test_a_humble_bag_without_type_definitions_replays_with_the_distro_s_and_says_so(
        tmp_path: Path, run_cli: RunCli, robotmem_home: Path) -> None:
    bag = write_ros2_bag(tmp_path / "tb4_humble", _pose_track("/pose", MAY_2015, 20.0), type_definitions=False)
    code, out, err = run_cli("replay", str(bag))
    assert code == 0, err
    assert "message definitions: ROS 2 humble standard definitions for geometry_msgs/msg/PoseWithCovarianceStamped" in out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["/pose"])
    assert row[1:5] == [PWCS, "pose_trajectory", "200", "2"]  # read by its type: a trajectory
    code, out, _ = run_cli("replay", str(bag), "--ros-distro", "jazzy", "--collection", "other")
    assert code == 0 and "ROS 2 jazzy standard definitions" in out
    with pytest.raises(SystemExit):
        run_cli("replay", str(bag), "--ros-distro", "noetic2")


def test_definitions_stored_in_a_recording_are_used_and_nothing_is_borrowed(tmp_path: Path, memory: Memory) -> None:
    bag = write_ros2_bag(tmp_path / "iron", _pose_track("/amcl_pose", MAY_2015, 5.0))
    result = replay_recording(memory, bag, BridgeConfig(), ReplayOptions())
    assert result.type_sources == {"recording": [PWCS]}
    assert result.stats.topics["/amcl_pose"].converter == "pose_trajectory"


@pytest.mark.parametrize("topic", ["/pose", "/amcl_pose", "/robot/localization"])
def test_pose_with_covariance_is_a_trajectory_whatever_its_topic(tmp_path: Path, memory: Memory, topic: str) -> None:
    bag = write_mcap(tmp_path / "loc.mcap", _pose_track(topic, MAY_2015, 12.0))
    result = replay_recording(memory, bag, BridgeConfig(), ReplayOptions())
    (session,) = result.stats.session_ids
    chunks = [r for r in _records(memory, session) if r["context"]["source"].get("topic") == topic]
    assert len(chunks) == 2 and all(c["context"]["spatial"]["frame"] == "map" for c in chunks)
    assert chunks[0]["context"]["spatial"]["start_position"] == [0.0, 0.0, 0.0]


def test_records_and_notes_occur_when_recorded_so_time_windows_find_a_2015_recording(
        tmp_path: Path, memory: Memory) -> None:
    messages = _pose_track("/amcl_pose", MAY_2015, 12.0)
    messages.append(Msg("/robotmem/learn", "std_msgs/msg/String", MAY_2015 + 5 * S, string("the lift was out of order")))
    messages.sort(key=lambda m: m.log_ns)
    result = replay_recording(memory, write_mcap(tmp_path / "2015.mcap", messages), BridgeConfig(), ReplayOptions())
    (session,) = result.stats.session_ids
    stored = _records(memory, session)
    assert len(stored) == 4  # two chunks, the note, the summary
    found = memory.recall("", session_id=session, since="2015-05-21", until="2015-05-22", n=10)["results"]
    assert len(found) == 4
    by_kind = {(r["type"], r["context"]["source"].get("topic")): r for r in found}
    assert by_kind[("fact", "/robotmem/learn")]["occurred_at"] == pytest.approx(MAY_2015 / S + 5)
    chunk_times = sorted(r["occurred_at"] for r in found if r["context"]["source"].get("topic") == "/amcl_pose")
    assert chunk_times == pytest.approx([MAY_2015 / S, MAY_2015 / S + 10.0])
    assert memory.recall("", session_id=session, since="2015-05-22", n=10)["results"] == []


def test_stamps_far_from_the_log_time_fall_back_to_it_and_are_counted(
        tmp_path: Path, memory: Memory, run_cli: RunCli) -> None:
    start = MAY_2015
    messages = [Msg("/odom", "nav_msgs/msg/Odometry", start + i * S // 10, odometry(start + i * S // 10, i / 100, 0.0))
                for i in range(100)]
    stale = start - int(4.8 * 86400 * S)  # 4.8 days before its log time
    messages[50] = Msg("/odom", "nav_msgs/msg/Odometry", messages[50].log_ns, odometry(stale, 0.5, 0.0))
    path = write_mcap(tmp_path / "stale.mcap", messages)
    result = replay_recording(memory, path, BridgeConfig(), ReplayOptions())
    assert result.stats.topics["/odom"].stamps_replaced == 1
    (session,) = result.stats.session_ids
    (summary,) = [r for r in _records(memory, session) if r["perception_type"] == "procedural"]
    assert summary["context"]["task"]["duration_s"] == pytest.approx(9.9)
    code, out, _ = run_cli("replay", str(path), "--collection", "again")
    assert code == 0 and "1 stamps far from the log time (log time used)" in out


def test_an_empty_topic_is_listed_with_zero_messages(tmp_path: Path, run_cli: RunCli) -> None:
    path = write_mcap(tmp_path / "empty.mcap", _pose_track("/amcl_pose", MAY_2015, 2.0),
                      empty_topics={"/diagnostics_agg": "std_msgs/msg/String"})
    code, out, _ = run_cli("replay", str(path))
    assert code == 0 and "/diagnostics_agg (0)" in out and "(?)" not in out


def test_a_recording_that_cannot_be_read_is_named_once(tmp_path: Path, run_cli: RunCli) -> None:
    broken = tmp_path / "broken.mcap"
    broken.write_bytes(b"\x89MCAP0\r\n not really")
    code, _, err = run_cli("replay", str(broken))
    assert code == 1
    assert err.count(str(broken)) == 1, err


def _sessions(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
        finally:
            conn.close()
    except apsw.Error:
        return 0


def test_ctrl_c_says_interrupted_and_what_was_stored_and_a_rerun_continues(tmp_path: Path, robotmem_home: Path) -> None:
    episodes = [_pose_track("/amcl_pose", MAY_2015 + k * 100 * S, 30.0, hz=200.0) for k in range(12)]
    path = write_mcap(tmp_path / "long.mcap", [m for episode in episodes for m in episode])
    command = [sys.executable, "-m", "robotmem", "replay", str(path), "--episode-split", "gap:20"]
    env = dict(os.environ, ROBOTMEM_HOME=str(robotmem_home))
    # The replay must get Ctrl-C as a terminal sends it. A test run started in the background of a
    # non-interactive shell has SIGINT ignored, children inherit that, and the replay then ran to
    # its end (exit 0). A handler set here is reset to the default in the child.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    db = robotmem_home / "memory.db"
    deadline = time.monotonic() + 120
    while _sessions(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted: 0 recording(s) replayed in full, 1 in part" in err
    assert "Run the same command again to continue" in err and "INTERRUPTED" in out
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert "episodes: " in rerun.stdout and "already stored" in rerun.stdout
    with Memory(db, embedder=None) as memory:
        sessions = memory.recall("", n=100, context_filter={"source.policy": {"$exists": True}},
                                 min_confidence=0.0)["results"]
        summaries = [r for r in sessions if r["perception_type"] == "procedural"]
    assert len({s["session_id"] for s in summaries}) == 12


def test_a_bag_that_defines_only_its_custom_type_borrows_the_standard_ones(tmp_path: Path, memory: Memory) -> None:
    """Custom types keep the recording's definitions while standard ones come from the distro."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg("string label\nfloat64 value\n", "robotmem_test/msg/Blip"))
    folder = tmp_path / "mixed"
    track = _pose_track("/pose", MAY_2015, 5.0)
    with Writer(folder, version=8) as writer:
        pose_conn = writer.add_connection("/pose", PWCS, typestore=store)
        blip_conn = writer.add_connection("/blip", "robotmem_test/msg/Blip", typestore=store)
        for i, msg in enumerate(track):
            writer.write(pose_conn, msg.log_ns, store.serialize_cdr(msg.value, PWCS))
            blip = store.types["robotmem_test/msg/Blip"](label=f"b{i}", value=float(i))
            writer.write(blip_conn, msg.log_ns, store.serialize_cdr(blip, "robotmem_test/msg/Blip"))
    with sqlite3.connect(next(folder.glob("*.db3"))) as conn:  # as if the recorder had no definition for it
        conn.execute("DELETE FROM message_definitions WHERE topic_type = ?", (PWCS,))
    result = replay_recording(memory, folder, BridgeConfig(), ReplayOptions(topics=("/pose", "/blip")))
    assert result.type_sources == {"recording": ["robotmem_test/msg/Blip"],
                                   "ROS 2 humble standard definitions": [PWCS]}
    assert result.stats.topics["/pose"].converter == "pose_trajectory"
    pose, blip = result.stats.topics["/pose"], result.stats.topics["/blip"]
    assert (pose.messages, pose.malformed, blip.messages, blip.malformed) == (len(track), 0, len(track), 0)
    assert pose.records > 0 and blip.records > 0  # both decoded: the custom type by the file's definition
