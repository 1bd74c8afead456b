"""The fast MCAP chunk scan yields exactly what mcap's reader yields, or steps aside."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from mcap.stream_reader import CRCValidationError
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from bridges.pipeline.messages import RosMessage
from bridges.replay import open_reader
from bridges.replay.mcap_chunks import ChunkDamaged, _scan, iter_raw_messages
from bridges.replay.readers import RecordingDamaged

from recordings import Msg, S, odometry, write_mcap


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


def _odometry_mcap(path: Path, count: int = 60, **writer_options: Any) -> Path:
    """``count`` /odom messages at x = i / 10 in uncompressed chunks of a few messages each (the
    writer stores each chunk's CRC), so bytes of one chunk can be changed in place."""
    messages = [Msg("/odom", "nav_msgs/msg/Odometry", (100 + i) * S, odometry((100 + i) * S, i / 10, 0.0))
                for i in range(count)]
    options: dict[str, Any] = {"compression": CompressionType.NONE, "chunk_size": 4096, **writer_options}
    return write_mcap(path, messages, **options)


def _chunks(path: Path) -> list[Any]:
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
        assert summary is not None
        return sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset)


def _read_until_damage(path: Path) -> tuple[list[RosMessage], RecordingDamaged]:
    read: list[RosMessage] = []
    with open_reader(path) as reader, pytest.raises(RecordingDamaged) as damage:
        read.extend(reader.iter_messages())
    return read, damage.value


def _before(chunk: Any, path: Path) -> int:
    """Oracle: mcap's reader, on the intact file, counts the messages logged before ``chunk``."""
    with open(path, "rb") as handle:
        return sum(1 for _s, _c, m in make_reader(handle).iter_messages() if m.log_time < chunk.message_start_time)


#: a Chunk record: opcode, record length, start and end time, uncompressed size, then its CRC,
#: the compression name (a 4-byte length, empty when uncompressed), the records' length, the records
_CHUNK_CRC_AT = 1 + 8 + 8 + 8 + 8
_CHUNK_RECORDS_AT = _CHUNK_CRC_AT + 4 + 4 + 8


def test_a_chunk_whose_bytes_changed_is_damage_and_nothing_of_it_is_read(tmp_path: Path) -> None:
    path = _odometry_mcap(tmp_path / "odom.mcap")
    chunks = _chunks(path)
    assert len(chunks) >= 3
    intact_before = _before(chunks[1], path)
    data = bytearray(path.read_bytes())
    x = struct.pack("<d", (intact_before + 1) / 10)  # a message inside the second chunk
    where = data.index(x, chunks[1].chunk_start_offset)
    data[where:where + 8] = struct.pack("<d", 500.0)
    path.write_bytes(data)
    with open(path, "rb") as handle, pytest.raises(CRCValidationError):  # the oracle sees the damage
        list(make_reader(handle, validate_crcs=True).iter_messages())

    read, damage = _read_until_damage(path)
    assert "CRCValidationError" in str(damage) and damage.messages == intact_before
    assert [m.data["pose"]["pose"]["position"]["x"] for m in read] == [i / 10 for i in range(intact_before)]


def test_a_record_header_overwritten_inside_a_chunk_is_damage_not_the_end_of_the_chunk(tmp_path: Path) -> None:
    path = _odometry_mcap(tmp_path / "odom.mcap")
    chunks = _chunks(path)
    intact_before = _before(chunks[1], path)
    data = bytearray(path.read_bytes())
    start = chunks[1].chunk_start_offset
    data[start + _CHUNK_CRC_AT:start + _CHUNK_CRC_AT + 4] = bytes(4)  # no CRC stored: the scan must see it
    first_record = start + _CHUNK_RECORDS_AT
    data[first_record:first_record + 64] = b"\xff" * 64
    path.write_bytes(data)

    read, damage = _read_until_damage(path)
    assert "does not fit" in str(damage) and damage.messages == intact_before == len(read)


def test_a_record_cut_at_the_end_of_a_chunk_is_damage(tmp_path: Path) -> None:
    path = _odometry_mcap(tmp_path / "odom.mcap")
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
        chunk = _chunks(path)[0]
        handle.seek(chunk.chunk_start_offset + _CHUNK_RECORDS_AT)
        records = handle.read(chunk.chunk_length - _CHUNK_RECORDS_AT)
    with pytest.raises(ChunkDamaged):
        _scan(records[:-5], set(summary.channels), None, None)
