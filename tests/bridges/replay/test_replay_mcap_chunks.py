"""The fast MCAP chunk scan yields exactly what mcap's reader yields, or steps aside."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap.writer import Writer

from bridges.replay import open_reader
from bridges.replay.mcap_chunks import iter_raw_messages


def _library(path: Path, topics: list[str] | None, start: int | None, end: int | None) -> list[tuple[int, int, bytes]]:
    with open(path, "rb") as handle:
        reader = make_reader(handle)
        return [(m.log_time, c.id, m.data) for _s, c, m in reader.iter_messages(
            topics=topics, log_time_order=True, starting_at=start, ending_before=end)]


def _fast(path: Path, topics: list[str] | None, start: int | None, end: int | None) -> list[tuple[int, int, bytes]]:
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
        ids = {cid for cid, c in summary.channels.items() if topics is None or c.topic in topics}
        found = iter_raw_messages(handle, summary, ids, start, end)
        assert found is not None
        return list(found)


@pytest.mark.parametrize("topics", [None, ["/odom"], ["/scan", "/robotmem/learn"]])
def test_the_chunk_scan_matches_mcaps_reader_on_the_demo(datasets: Path, topics: list[str] | None) -> None:
    path = datasets / "nav_demo.mcap"
    everything = _library(path, None, None, None)
    start, end = everything[200][0], everything[900][0]
    assert _fast(path, topics, None, None) == _library(path, topics, None, None)
    assert _fast(path, topics, start, end) == _library(path, topics, start, end)


def test_the_chunk_scan_matches_mcaps_reader_on_a_real_recording(shared_datasets: Path) -> None:
    path = shared_datasets / "nav2_turtlebot_sim_mcap" / "nav2_turtlebot.mcap"
    assert _fast(path, ["/odom", "/amcl_pose"], None, None) == _library(path, ["/odom", "/amcl_pose"], None, None)


def test_chunks_that_overlap_in_time_fall_back_to_mcaps_ordering(tmp_path: Path) -> None:
    path = tmp_path / "overlap.mcap"
    with open(path, "wb") as handle:
        writer = Writer(handle, chunk_size=64)  # tiny chunks: a few messages each
        writer.start(profile="ros2", library="test")
        schema = writer.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        channel = writer.register_channel("/chatter", "cdr", schema)
        times = [5, 1, 9, 2, 8, 3, 7, 4, 6] * 3  # arrival order jumps back and forth in time
        for i, t in enumerate(times):
            text = f"m{i}".encode()
            payload = b"\x00\x01\x00\x00" + len(text + b"\0").to_bytes(4, "little") + text + b"\0"
            writer.add_message(channel, log_time=t * 1_000_000_000, data=payload, publish_time=0)
        writer.finish()
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
        assert iter_raw_messages(handle, summary, {channel}, None, None) is None
    with open_reader(path) as reader:
        times_read = [m.t_ns for m in reader.iter_messages()]
    assert times_read == sorted(times_read) and len(times_read) == 27
