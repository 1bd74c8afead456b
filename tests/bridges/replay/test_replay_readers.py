"""Recording readers: format dispatch, topic counts, filters, and a lossless round trip."""

from __future__ import annotations

import hashlib
import shutil
import struct
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from mcap.reader import NonSeekingReader, make_reader
from mcap.writer import CompressionType, IndexType
from recordings import Msg, odometry, write_mcap, write_mixed_encodings_mcap

from bridges.pipeline import BridgeConfig
from bridges.replay import McapFileReader, RecordingError, ReplayOptions, RosbagsReader, TopicInfo, open_reader, replay_paths
from bridges.replay.discovery import content_digest, find_recordings, legacy_digest, session_id_prefix
from bridges.replay.readers import RecordingDamaged

S = 1_000_000_000


def test_each_format_opens_with_its_reader(datasets: Path) -> None:
    with open_reader(datasets / "nav_demo.mcap") as mcap_reader:
        assert isinstance(mcap_reader, McapFileReader)
    with open_reader(datasets / "arm_push_ros2") as folder_reader:
        assert isinstance(folder_reader, RosbagsReader)
    with open_reader(datasets / "arm_push_ros2" / "arm_push_ros2.db3") as db3_reader:
        assert isinstance(db3_reader, RosbagsReader) and db3_reader.path == datasets / "arm_push_ros2"


def test_a_file_that_is_not_a_recording_is_a_recording_error_naming_it(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    with pytest.raises(RecordingError, match="notes.txt"):
        open_reader(notes)
    fake = tmp_path / "fake.mcap"
    fake.write_bytes(b"not an mcap file at all")
    with pytest.raises(RecordingError, match="fake.mcap"):
        open_reader(fake)
    broken_bag = tmp_path / "broken.bag"
    broken_bag.write_bytes(b"#ROSBAG V2.0\nnonsense")
    with pytest.raises(RecordingError, match="broken.bag"):
        open_reader(broken_bag)
    with pytest.raises(RecordingError, match="metadata.yaml"):
        open_reader(tmp_path)


def test_topic_counts_match_the_mcap_records(datasets: Path) -> None:
    counted: dict[str, int] = {}
    with open(datasets / "nav_demo.mcap", "rb") as handle:
        for _schema, channel, _message in make_reader(handle).iter_messages():
            counted[channel.topic] = counted.get(channel.topic, 0) + 1
    with open_reader(datasets / "nav_demo.mcap") as reader:
        topics = reader.topics()
        read = {}
        for msg in reader.iter_messages():
            read[msg.topic] = read.get(msg.topic, 0) + 1
    assert {t: i.count for t, i in topics.items()} == counted == read
    assert topics["/odom"].msgtype == "nav_msgs/msg/Odometry"


@pytest.mark.parametrize("recording", ["nav_demo.mcap", "arm_push_ros2"])
def test_iter_messages_filters_topics_and_a_half_open_log_time_window(datasets: Path, recording: str) -> None:
    with open_reader(datasets / recording) as reader:
        everything = list(reader.iter_messages())
        times = [m.t_ns for m in everything]
        assert times == sorted(times)  # the generator stamps = log times, so log order is time order
        start, end = times[100], times[300]
        window = list(reader.iter_messages(topics=["/joint_states"], start_time=start, end_time=end))
        assert list(reader.iter_messages(topics=["/nonexistent"])) == []
    expected = [m for m in everything if m.topic == "/joint_states" and start <= m.t_ns < end]
    assert [m.t_ns for m in window] == [m.t_ns for m in expected] and window


@pytest.mark.parametrize(("recording", "builder"), [("arm_push_ros2", "arm_push_messages"),
                                                    ("nav_demo.mcap", "nav_demo_messages")])
def test_reading_a_recording_returns_exactly_the_messages_that_were_written(
    datasets: Path, make_datasets: ModuleType, recording: str, builder: str
) -> None:
    written = getattr(make_datasets, builder)()
    with open_reader(datasets / recording) as reader:
        read = list(reader.iter_messages())
    assert len(read) == len(written)
    for msg, (t_ns, topic, msgtype, data) in zip(read, written):
        assert (msg.topic, msg.msgtype, msg.t_ns) == (topic, msgtype, t_ns)
        if msgtype == "sensor_msgs/msg/LaserScan":  # ranges are float32 on the wire
            assert msg.data["ranges"] == pytest.approx(data["ranges"], rel=1e-6)
            continue
        assert msg.data == data


def test_a_ros2_bag_folder_with_mcap_storage_reads_back_what_was_written(
    make_datasets: ModuleType, tmp_path: Path
) -> None:
    written = make_datasets.arm_push_messages()
    make_datasets.write_ros2_bag(tmp_path / "arm_mcap", written, storage="mcap")
    assert list((tmp_path / "arm_mcap").glob("*.mcap"))
    with open_reader(tmp_path / "arm_mcap") as reader:
        assert isinstance(reader, RosbagsReader)
        read = [(m.t_ns, m.topic, m.msgtype, m.data) for m in reader.iter_messages()]
    assert read == [tuple(m) for m in written]


def test_find_recordings_expands_folders_and_treats_bag_folders_as_one_recording(
    datasets: Path, tmp_path: Path
) -> None:
    shutil.copy(datasets / "nav_demo.mcap", tmp_path / "b.mcap")
    (tmp_path / "nested").mkdir()
    shutil.copy(datasets / "nav_demo.mcap", tmp_path / "nested" / "a.mcap")
    shutil.copytree(datasets / "arm_push_ros2", tmp_path / "nested" / "arm")
    (tmp_path / "readme.txt").write_text("not a recording")
    assert find_recordings([tmp_path]) == [tmp_path / "b.mcap", tmp_path / "nested" / "a.mcap", tmp_path / "nested" / "arm"]
    assert find_recordings([tmp_path / "nested" / "arm" / "arm_push_ros2.db3", tmp_path / "b.mcap", tmp_path / "b.mcap"]) == [
        tmp_path / "nested" / "arm", tmp_path / "b.mcap"]


def test_find_recordings_rejects_missing_paths_and_folders_without_recordings(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no such file"):
        find_recordings([tmp_path / "missing.bag"])
    with pytest.raises(RecordingError, match="holds no"):
        find_recordings([tmp_path])


def test_the_content_digest_follows_the_bytes_and_the_session_prefix_the_collection(
    datasets: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.mcap"
    shutil.copy(datasets / "nav_demo.mcap", copy)
    assert content_digest(copy) == content_digest(datasets / "nav_demo.mcap")  # renaming changes nothing
    folder = tmp_path / "arm"
    shutil.copytree(datasets / "arm_push_ros2", folder)
    before = content_digest(folder)
    with open(folder / "arm_push_ros2.db3", "ab") as handle:
        handle.write(b"\0")
    assert content_digest(folder) != before
    digest = content_digest(copy)
    assert session_id_prefix(digest, "a") != session_id_prefix(digest, "b")
    assert session_id_prefix(digest, "a").startswith("rpl_") and len(session_id_prefix(digest, "a")) == 20


def _unindexed_mcap(path: Path, count: int = 60) -> Path:
    """A valid MCAP written without a summary section: no index, channels and schemas only in the data."""
    messages = [Msg("/odom", "nav_msgs/msg/Odometry", (100 + i) * S, odometry((100 + i) * S, i / 10, 0.0))
                for i in range(count)]
    return write_mcap(path, messages, compression=CompressionType.NONE, chunk_size=4096, index_types=IndexType.NONE,
                      repeat_channels=False, repeat_schemas=False, use_statistics=False, use_summary_offsets=False)


def _oracle(path: Path) -> list[tuple[str, int, bytes]]:
    """mcap's own reader: (topic, log time, payload) of every message it reads, with CRCs checked."""
    with open(path, "rb") as handle:
        return [(c.topic, m.log_time, m.data)
                for _s, c, m in make_reader(handle, validate_crcs=True).iter_messages(log_time_order=True)]


def test_an_mcap_without_a_summary_is_read_linearly(tmp_path: Path) -> None:
    path = _unindexed_mcap(tmp_path / "noindex.mcap")
    with open(path, "rb") as handle:
        assert make_reader(handle).get_summary() is None
    expected = _oracle(path)
    with open_reader(path) as reader:
        assert reader.topics() == {"/odom": TopicInfo("nav_msgs/msg/Odometry", len(expected))}
        read = list(reader.iter_messages())
        assert reader.undecodable == {}
    assert [(m.topic, m.arrived_ns) for m in read] == [(t, log) for t, log, _ in expected]
    assert [m.data["pose"]["pose"]["position"]["x"] for m in read] == [i / 10 for i in range(60)]


def test_a_damaged_chunk_in_an_mcap_without_a_summary_is_a_clean_error_keeping_what_came_before(
        tmp_path: Path) -> None:
    path = _unindexed_mcap(tmp_path / "noindex.mcap")
    intact = _oracle(path)
    data = bytearray(path.read_bytes())
    middle = data.index(struct.pack("<d", 3.0))  # x of a message half-way through: its chunk's CRC breaks
    data[middle:middle + 8] = struct.pack("<d", 500.0)
    path.write_bytes(data)
    before = 0
    with open(path, "rb") as handle:  # the oracle reads up to the damaged chunk
        try:  # (make_reader's seeking reader reads a file without an index linearly, but unchecked)
            for _ in NonSeekingReader(handle, validate_crcs=True).iter_messages(log_time_order=False):
                before += 1
        except Exception:  # noqa: BLE001 - the damage
            pass
    assert 0 < before < len(intact)
    results: list[tuple[Path, Exception]] = []
    replayed = replay_paths(None, [path], BridgeConfig(), ReplayOptions(dry_run=True),
                            on_error=lambda p, e: results.append((p, e)))
    assert replayed == [] and len(results) == 1
    damage = results[0][1]
    assert isinstance(damage, RecordingDamaged) and damage.messages == before
    assert "CRCValidationError" in str(damage)


def test_channels_replay_cannot_decode_as_ros_are_counted_per_topic_with_the_reason(tmp_path: Path) -> None:
    path = write_mixed_encodings_mcap(tmp_path / "mixed.mcap")
    with open_reader(path) as reader:
        read = list(reader.iter_messages())
        undecodable, reasons = reader.undecodable, reader.undecodable_reason
    assert sorted({m.topic for m in read}) == ["/loose", "/odom", "/status"]
    assert [m.data for m in read if m.topic == "/status"] == [{"battery": 90 - i} for i in range(10)]
    assert [m.msgtype for m in read if m.topic == "/status"][0] == "robot.Status"
    assert undecodable == {"/pb": 10, "/custom": 10}
    assert "'protobuf'" in reasons["/pb"]
    assert "my_pkg/msg/Custom" in reasons["/custom"]


def _digest_of_every_file(folder: Path) -> str:
    """The bag folder digest as replay computed it before: every file's name and bytes, sorted."""
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(file.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def test_a_bag_folder_is_identified_by_its_recording_not_by_other_files_in_it(datasets: Path, tmp_path: Path) -> None:
    folder = tmp_path / "arm"
    shutil.copytree(datasets / "arm_push_ros2", folder)
    unchanged = content_digest(folder)
    assert legacy_digest(folder) == _digest_of_every_file(folder)  # what stores made before hold
    (folder / "NOTES.txt").write_text("operator notes")
    (folder / "plots").mkdir()
    (folder / "plots" / "path.png").write_bytes(b"\x89PNG")
    assert content_digest(folder) == unchanged
    metadata = folder / "metadata.yaml"
    metadata.write_text(yaml.safe_dump(yaml.safe_load(metadata.read_text())))  # the same, re-serialised
    assert content_digest(folder) == unchanged
    storage = folder / "arm_push_ros2.db3"
    with open(storage, "r+b") as handle:  # the recorded data itself still decides
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert content_digest(folder) != unchanged


def test_a_bag_folder_without_its_metadata_yaml_is_named_as_such(datasets: Path, tmp_path: Path) -> None:
    folder = tmp_path / "arm"
    shutil.copytree(datasets / "arm_push_ros2", folder)
    (folder / "metadata.yaml").unlink()
    for path in (folder, folder / "arm_push_ros2.db3", tmp_path):
        with pytest.raises(RecordingError, match="only with a metadata.yaml") as error:
            find_recordings([path])
        assert str(error.value).startswith(str(folder)) and "ros2 bag reindex" in str(error.value)
