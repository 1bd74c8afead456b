"""Recording readers: format dispatch, topic counts, filters, and a lossless round trip."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest
from mcap.reader import make_reader

from bridges.replay import McapFileReader, RecordingError, RosbagsReader, open_reader
from bridges.replay.discovery import content_digest, find_recordings, session_id_prefix

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
    with open(folder / "metadata.yaml", "a", encoding="utf-8") as handle:
        handle.write("\n")
    assert content_digest(folder) != before
    digest = content_digest(copy)
    assert session_id_prefix(digest, "a") != session_id_prefix(digest, "b")
    assert session_id_prefix(digest, "a").startswith("rpl_") and len(session_id_prefix(digest, "a")) == 20
