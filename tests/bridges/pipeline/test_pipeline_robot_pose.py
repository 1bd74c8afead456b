"""Images, laser scans and joint chunks carry where the robot was: "what did the camera see near (x, y)"."""

from __future__ import annotations

from collections.abc import Callable

from pipeline_helpers import T0, S, image, joints, odom, stamp

from bridges.pipeline import BridgeConfig, Pipeline, RosMessage
from robotmem import Memory


def _scan(t_ns: int) -> RosMessage:
    data = {"header": {"stamp": stamp(t_ns), "frame_id": "laser"}, "angle_min": -3.14, "angle_max": 3.14,
            "angle_increment": 6.28 / 36, "time_increment": 0.0, "scan_time": 0.1, "range_min": 0.1,
            "range_max": 10.0, "ranges": [2.0] * 36, "intensities": []}
    return RosMessage("/scan", "sensor_msgs/msg/LaserScan", t_ns, data)


def _drive_with_sensors(pipeline: Pipeline, seconds: int) -> None:
    """Along +x at 1 m/s: odometry at 10 Hz, a camera frame, a scan and joint states every second."""
    for tenth in range(seconds * 10):
        t_ns = T0 + tenth * S // 10
        pipeline.feed(odom(t_ns, tenth / 10, 2.0))
        if tenth % 10 == 5:
            pipeline.feed(image(t_ns))
            pipeline.feed(_scan(t_ns))
            pipeline.feed(joints(t_ns, [0.1 * tenth, 0.0]))


def test_the_camera_frame_taken_nearest_a_place_is_recalled_first(
        make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline()
    _drive_with_sensors(pipeline, 20)
    pipeline.close()
    found = mem.recall("", collection="test", n=3, min_confidence=0,
                       context_filter={"source.topic": "/camera/image_raw"},
                       spatial_sort={"field": "spatial.position", "target": [7.0, 2.0]})["results"]
    assert len(found) == 3
    nearest = found[0]["context"]["spatial"]
    assert nearest["position"] == [7.5, 2.0, 0.0] and nearest["frame"] == "odom"
    assert nearest["pose_topic"] == "/odom" and found[0]["context"]["episode"]["t_ns"] == T0 + 75 * S // 10


def test_scans_and_joint_chunks_carry_the_latest_pose(make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline(config=BridgeConfig(chunk_seconds=5.0))
    _drive_with_sensors(pipeline, 10)
    pipeline.close()
    scans = mem.recall("", collection="test", n=20, min_confidence=0, context_filter={"source.topic": "/scan"})
    assert sorted(r["context"]["spatial"]["position"][0] for r in scans["results"]) == [
        i + 0.5 for i in range(10)]
    chunks = mem.recall("", collection="test", n=5, min_confidence=0,
                        context_filter={"source.topic": "/joint_states"})["results"]
    assert len(chunks) >= 2
    for chunk in chunks:  # the pose at the chunk's last sample: x (m) equals its time (s) at 1 m/s
        end_s = (chunk["context"]["episode"]["t_end_ns"] - T0) / S
        assert chunk["context"]["spatial"]["position"] == [end_s, 2.0, 0.0]


def test_without_a_recent_pose_a_frame_gets_no_position(make_pipeline: Callable[..., Pipeline], mem: Memory) -> None:
    pipeline = make_pipeline(config=BridgeConfig(pose_max_age_s=2.0))
    pipeline.feed(odom(T0, 1.0, 1.0))
    pipeline.feed(image(T0 + 1 * S))   # 1 s after the pose: located
    pipeline.feed(image(T0 + 5 * S))   # 5 s after the last pose: not located
    pipeline.close()
    found = mem.recall("", collection="test", n=5, min_confidence=0,
                       context_filter={"source.topic": "/camera/image_raw"})["results"]
    located = {r["context"]["episode"]["t_ns"]: r["context"].get("spatial", {}).get("position") for r in found}
    assert located == {T0 + S: [1.0, 1.0, 0.0], T0 + 5 * S: None}
