"""Recordings damaged after they were written: copies of the real recordings (../shared/datasets)
with bytes zeroed, cut or removed, made in the test. Ground truth comes from reading the damaged
copies with rosbags' and mcap's own readers, not from robotmem."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader
from rosbags.rosbag1 import Reader as Ros1Reader

from robotmem import Memory

MCAP = "nav2_turtlebot_sim_mcap/nav2_turtlebot.mcap"
BAG = "turtlebot3_nav_ros1_bag/rosbag_demo.bag"
ZEROED = 20_000
RunCli = Callable[..., tuple[int, str, str]]


def _zeroed_in_the_middle(source: Path, folder: Path) -> Path:
    """The audit's damage: 20,000 bytes at half the file's size overwritten with zeros."""
    folder.mkdir(exist_ok=True)
    copy = folder / f"zeromid{source.suffix}"
    shutil.copyfile(source, copy)
    with open(copy, "r+b") as handle:
        handle.seek(copy.stat().st_size // 2)
        handle.write(bytes(ZEROED))
    return copy


def _raw_bag_until_damage(path: Path, topic: str) -> tuple[int, int]:
    """(``topic``'s messages rosbags' raw reader yields before it fails, the log time of the last one)."""
    count, last = 0, 0
    with Ros1Reader(path) as raw:
        try:
            for _connection, log_ns, _data in raw.messages([c for c in raw.connections if c.topic == topic]):
                count, last = count + 1, log_ns
        except Exception:  # noqa: BLE001 - the damage; what came before is the ground truth
            return count, last
    raise AssertionError(f"{path} reads to the end: the damage missed the messages")


def _sessions(memory: Memory) -> list[dict[str, Any]]:
    return memory.list_sessions(limit=1000)


def test_a_bag_zeroed_in_the_middle_keeps_what_came_before_ends_its_episode_and_the_next_file_replays(
        run_cli: RunCli, shared_datasets: Path, tmp_path: Path, robotmem_home: Path) -> None:
    bad = _zeroed_in_the_middle(shared_datasets / BAG, tmp_path / "bad")
    readable, last_ns = _raw_bag_until_damage(bad, "/location")  # the bag's pose topic
    assert readable > 0
    good = shared_datasets / MCAP
    code, out, err = run_cli("replay", str(bad), str(good), "--no-progress")
    assert code == 1
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert line.startswith(f"error: {bad}: damaged, reading stopped after ") and line.endswith("(skipped)"), line
    assert "episode(s) ended" in line and "Traceback" not in err
    assert str(good) in out  # the recording after the damaged one was replayed
    with Memory(robotmem_home / "memory.db", embedder=None) as memory:
        sessions = _sessions(memory)
        assert [s["status"] for s in sessions] == ["ended", "ended"]
        bag_session = next(s for s in sessions if s["session_id"].endswith(str(1625525130000000000)))
        records = memory.session_timeline(bag_session["session_id"])["memories"]
        stored = int(re.search(r"; (\d+) records of the messages before the damage", line).group(1))  # type: ignore[union-attr]
        assert len(records) == stored > 0
        # The episode holds exactly the pose messages the raw reader reads before the damage.
        summary = next(r for r in records if r["perception_type"] == "procedural")
        assert summary["context"]["episode"]["messages"] == {"/location": readable}
        assert summary["context"]["episode"]["t_end_ns"] <= last_ns
        before = memory.stats()
    # A second run stops at the same damage and stores nothing more (its episode is ended, not open).
    code, _, err = run_cli("replay", str(bad), "--no-progress")
    assert code == 1 and "already stored" in err
    with Memory(robotmem_home / "memory.db", embedder=None) as memory:
        assert memory.stats() == before
        assert all(s["status"] == "ended" for s in _sessions(memory))


def test_an_mcap_zeroed_in_its_only_chunk_stores_nothing_and_the_next_file_replays(
        run_cli: RunCli, shared_datasets: Path, tmp_path: Path, robotmem_home: Path) -> None:
    bad = _zeroed_in_the_middle(shared_datasets / MCAP, tmp_path / "bad")
    with open(bad, "rb") as handle, pytest.raises(Exception, match="corrupt"):
        for _ in make_reader(handle).iter_messages():  # mcap's own reader fails on it too
            pass
    good = shared_datasets / BAG
    code, out, err = run_cli("replay", str(bad), str(good), "--no-progress")
    assert code == 1
    assert (f"error: {bad}: damaged, reading stopped before its first message: ZstdError: "
            in err), err
    assert "nothing before the damage was stored (skipped)" in err and "Traceback" not in err
    assert str(good) in out
    with Memory(robotmem_home / "memory.db", embedder=None) as memory:
        sessions = _sessions(memory)
    assert len(sessions) == 1 and sessions[0]["status"] == "ended"


def _cut(source: Path, folder: Path, name: str, keep: slice | tuple[slice, slice]) -> Path:
    folder.mkdir(exist_ok=True)
    data = source.read_bytes()
    parts = keep if isinstance(keep, tuple) else (keep,)
    copy = folder / name
    copy.write_bytes(b"".join(data[part] for part in parts))
    return copy


@pytest.mark.parametrize(("name", "expected"), [
    ("half", "truncated: it does not end with MCAP's closing magic bytes"),
    ("middle_removed", "its summary or chunk index is damaged"),
    ("three_bytes", "not an MCAP file: it does not start with MCAP's magic bytes"),
])
def test_an_mcap_that_cannot_be_opened_says_whether_it_is_truncated_or_its_index_damaged(
        run_cli: RunCli, shared_datasets: Path, tmp_path: Path, name: str, expected: str) -> None:
    source = shared_datasets / MCAP
    size = source.stat().st_size
    keep = {"half": slice(0, size // 2),
            "middle_removed": (slice(0, size // 2), slice(size // 2 + ZEROED, size)),
            "three_bytes": slice(0, 3)}[name]
    bad = _cut(source, tmp_path / "bad", f"{name}.mcap", keep)
    with open(bad, "rb") as handle, pytest.raises(Exception):  # noqa: B017, PT011 - mcap's own reader fails too
        make_reader(handle).get_summary()
    code, _, err = run_cli("replay", str(bad), "--no-progress")
    assert code == 1 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {bad}: {expected}") and line.endswith("(skipped)"), line
    assert "opcode" not in line  # mcap's words for the byte it tripped on, not for the file
