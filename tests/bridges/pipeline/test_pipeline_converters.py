"""Joint, image, laser and JSON converters, through the pipeline into a real store."""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pipeline_helpers import T0, S, by_topic, joints, pose_stamped

from bridges.pipeline import BridgeConfig, Pipeline, RosMessage, TopicRule
from bridges.pipeline.converters import make_converter
from bridges.pipeline.converters.image import thumbnail
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]


def _session(mem: Memory) -> str:
    (session,) = mem.list_sessions()
    return str(session["session_id"])


def _image(t_ns: int, width: int, height: int, encoding: str, pixels: bytes, step: int) -> RosMessage:
    data = {"header": {"stamp": {"sec": t_ns // S, "nanosec": t_ns % S}, "frame_id": "cam"}, "height": height,
            "width": width, "encoding": encoding, "is_bigendian": 0, "step": step, "data": pixels}
    return RosMessage("/camera/image_raw", "sensor_msgs/msg/Image", t_ns, data)


def test_joint_states_become_chunks_of_numeric_arrays(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    for i in range(150):  # 15 s at 10 Hz
        pipeline.feed(joints(T0 + i * S // 10, [0.01 * i, -0.02 * i, 0.5]))
    pipeline.close()
    chunks = by_topic(mem, _session(mem), "/joint_states")
    assert len(chunks) == 2
    data = mem.get_data(chunks[0]["id"])
    assert data["names"] == ["j0", "j1", "j2"]
    assert data["raw_samples"] == 101  # straight ramps: the ends describe them exactly
    assert np.asarray(data["positions"]).shape == (2, 3) and data["positions"][-1] == pytest.approx([1.0, -2.0, 0.5])
    assert np.asarray(data["velocities"]).shape == (2, 3) and data["efforts"] == []
    assert data["t"][0] == 0.0 and data["t"][-1] == pytest.approx(10.0)
    assert chunks[0]["robot"]["joints"] == ["j0", "j1", "j2"]
    assert chunks[0]["params"]["joint_travel"]["j1"] == pytest.approx(2.0)
    assert "joint trajectory /joint_states" in chunks[0]["content"] and "largest motion j1" in chunks[0]["content"]


def test_a_change_in_the_joint_set_starts_a_new_chunk(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    pipeline.feed(joints(T0, [0.0, 0.0]))
    pipeline.feed(joints(T0 + S // 10, [0.1, 0.1]))
    pipeline.feed(joints(T0 + S // 5, [0.2], names=["gripper"]))
    pipeline.close()
    names = sorted(tuple(mem.get_data(c["id"])["names"]) for c in by_topic(mem, _session(mem), "/joint_states"))
    assert names == [("gripper",), ("j0", "j1")]


def test_an_rgb_image_is_stored_as_a_small_thumbnail_not_the_frame(mem: Memory, make_pipeline: MakePipeline) -> None:
    width, height = 640, 480
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    frame[:, : width // 2] = [255, 0, 0]  # left half red
    frame[:, width // 2:] = [0, 0, 255]  # right half blue
    pipeline = make_pipeline()
    pipeline.feed(_image(T0, width, height, "rgb8", frame.tobytes(), width * 3))
    pipeline.close()
    (record,) = by_topic(mem, _session(mem), "/camera/image_raw")
    data = mem.get_data(record["id"])
    shape = data["thumbnail_shape"]
    assert shape == [48, 64, 3]
    assert data["thumbnail"]["bytes"] == 48 * 64 * 3  # get_data gives bytes as {"base64", "bytes"}
    thumb = np.frombuffer(base64.b64decode(data["thumbnail"]["base64"]), dtype=np.uint8).reshape(shape)
    assert thumb[0, 0].tolist() == [255, 0, 0] and thumb[0, -1].tolist() == [0, 0, 255]
    assert record["perception_type"] == "visual"
    assert record["context"]["perception"] == {"width": 640, "height": 480, "encoding": "rgb8", "frame_id": "cam"}
    assert record["payload"]["bytes"] < 20_000  # the frame itself was 921,600 bytes


def test_bgr_frames_are_reordered_and_mono16_is_scaled_to_its_range() -> None:
    bgr = np.array([[[10, 20, 30]]], dtype=np.uint8)
    assert thumbnail(bgr.tobytes(), 1, 1, 3, "bgr8", False, 64).tolist() == [[[30, 20, 10]]]
    depth = np.array([[1000, 2000], [3000, 5000]], dtype="<u2")
    grey = thumbnail(depth.tobytes(), 2, 2, 4, "mono16", False, 64)
    assert grey.tolist() == [[0, 64], [128, 255]]


def test_images_are_sampled_once_per_second_by_default(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    pixels = bytes(16 * 16)
    for i in range(300):  # 30 s at 10 Hz
        pipeline.feed(_image(T0 + i * S // 10, 16, 16, "mono8", pixels, 16))
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].records in (30, 31)  # one per second, on a grid
    assert stats.topics["/camera/image_raw"].sampled_out == 300 - stats.topics["/camera/image_raw"].records


def test_frames_throttled_to_about_one_per_second_are_all_kept(make_pipeline: MakePipeline) -> None:
    """rosbridge's 1 fps throttle: frames come a little under or over a second apart."""
    pipeline = make_pipeline()
    pixels = bytes(16 * 16)
    jitter = [-0.04, 0.03, -0.02, 0.0, -0.05, 0.04, -0.01, 0.02, -0.03, 0.01]
    t = 0.0
    for i in range(29):
        pipeline.feed(_image(T0 + int(t * S), 16, 16, "mono8", pixels, 16))
        t += 1.0 + jitter[i % len(jitter)]
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].records == 29
    assert stats.topics["/camera/image_raw"].sampled_out == 0


@pytest.mark.parametrize(("upstream_s", "kept"), [(1.0, 4), (5.0, 4), (0.5, 3), (0.0, 3)])
def test_a_topic_the_source_throttled_at_least_as_much_is_not_sampled_again(
        make_pipeline: MakePipeline, upstream_s: float, kept: int) -> None:
    """Stamps 0.6 s apart that a 1 s server throttle chose: kept when the source throttles at or
    above the rule's interval; sampled on the stamps (one early frame dropped) otherwise."""
    pipeline = make_pipeline(upstream_interval_s=lambda topic: upstream_s if topic == "/camera/image_raw" else 0.0)
    for t in (0.0, 0.6, 1.9, 2.5):
        pipeline.feed(_image(T0 + int(t * S), 16, 16, "mono8", bytes(16 * 16), 16))
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].records == kept
    assert stats.topics["/camera/image_raw"].sampled_out == 4 - kept


def test_an_unsupported_encoding_keeps_metadata_and_a_short_buffer_is_malformed(
    mem: Memory, make_pipeline: MakePipeline
) -> None:
    pipeline = make_pipeline()
    pipeline.feed(_image(T0, 4, 4, "bayer_rggb8", bytes(16), 4))
    pipeline.feed(_image(T0 + 2 * S, 4, 4, "rgb8", bytes(10), 12))
    stats = pipeline.close()
    assert stats.topics["/camera/image_raw"].malformed == 1
    (record,) = by_topic(mem, _session(mem), "/camera/image_raw")
    assert "thumbnail" not in mem.get_data(record["id"])
    assert "metadata only" in record["content"]


def _jpeg(width: int, height: int, body_bytes: int) -> bytes:
    """A baseline JPEG's marker layout: SOI, APP0 (JFIF), SOF0 with the frame size, SOS, scan data, EOI."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    sos = b"\xff\xda" + struct.pack(">H", 12) + b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    return b"\xff\xd8" + app0 + sof0 + sos + bytes(body_bytes) + b"\xff\xd9"


def _png(width: int, height: int) -> bytes:
    """A real (grey, 8-bit) PNG file."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\x00" + bytes(width) for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _compressed(t_ns: int, fmt: str, blob: bytes) -> RosMessage:
    data = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": "cam"}, "format": fmt, "data": blob}
    return RosMessage("/cam/compressed", "sensor_msgs/msg/CompressedImage", t_ns, data)


def test_compressed_images_are_metadata_only_by_default_with_the_size_from_the_header(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline()
    pipeline.feed(_compressed(T0, "jpeg", _jpeg(640, 480, 40_000)))  # a 640x480 frame well under 64 KiB
    pipeline.feed(_compressed(T0 + 2 * S, "png", _png(32, 24)))
    pipeline.close()
    stored = sorted(by_topic(mem, _session(mem), "/cam/compressed"), key=lambda r: r["context"]["perception"]["format"])
    jpeg, png = (mem.get_data(r["id"]) for r in stored)
    assert "compressed" not in jpeg and "compressed" not in png
    assert (jpeg["width"], jpeg["height"], jpeg["bytes"]) == (640, 480, len(_jpeg(640, 480, 40_000)))
    assert (png["width"], png["height"]) == (32, 24)
    assert "640x480" in stored[0]["content"] and "metadata only" in stored[0]["content"]


def test_compressed_images_keep_their_bytes_only_under_the_cap(mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(config=BridgeConfig(compressed_image_max_bytes=100))
    for i, size in enumerate([50, 5000]):
        data = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": "cam"}, "format": "jpeg", "data": bytes(size)}
        pipeline.feed(RosMessage("/cam/compressed", "sensor_msgs/msg/CompressedImage", T0 + 2 * i * S, data))
    pipeline.close()
    kept = {mem.get_data(r["id"])["bytes"]: "compressed" in mem.get_data(r["id"])
            for r in by_topic(mem, _session(mem), "/cam/compressed")}
    assert kept == {50: True, 5000: False}


def test_a_laser_scan_is_stored_as_a_compact_summary(mem: Memory, make_pipeline: MakePipeline) -> None:
    ranges = [2.0] * 360
    ranges[90] = 0.5  # nearest obstacle at +90 degrees
    ranges[10] = float("inf")
    ranges[11] = float("nan")
    ranges[12] = 0.01  # below range_min
    data = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": "laser"}, "angle_min": 0.0,
            "angle_max": 2 * math.pi * 359 / 360, "angle_increment": 2 * math.pi / 360, "time_increment": 0.0,
            "scan_time": 0.1, "range_min": 0.1, "range_max": 10.0, "ranges": ranges, "intensities": []}
    pipeline = make_pipeline()
    pipeline.feed(RosMessage("/scan", "sensor_msgs/msg/LaserScan", T0, data))
    pipeline.close()
    (record,) = by_topic(mem, _session(mem), "/scan")
    summary = mem.get_data(record["id"])
    assert summary["beams"] == 360 and summary["valid"] == 357
    assert summary["min_range"] == 0.5 and summary["max_range"] == 2.0
    assert summary["nearest_bearing_rad"] == pytest.approx(math.pi / 2)
    assert len(summary["sectors"]) == 36 and min(summary["sectors"]) == 0.5
    assert "nearest obstacle 0.50 m at 90 deg" in record["content"]


def test_json_perception_stores_small_messages_and_only_field_names_of_big_ones(
    mem: Memory, make_pipeline: MakePipeline
) -> None:
    config = BridgeConfig(topics=(TopicRule("/battery", None, "json_perception"),), json_max_bytes=200)
    pipeline = make_pipeline(config=config)
    pipeline.feed(RosMessage("/battery", "sensor_msgs/msg/BatteryState", T0,
                             {"percentage": 0.8, "voltage": float("nan"), "blob": b"\x00\x01"}))
    pipeline.feed(RosMessage("/battery", "sensor_msgs/msg/BatteryState", T0 + S, {"cells": list(range(200))}))
    pipeline.close()
    small, big = sorted(by_topic(mem, _session(mem), "/battery"), key=lambda r: r["context"]["episode"]["t_ns"])
    assert mem.get_data(small["id"]) == {"percentage": 0.8, "voltage": None, "blob": "<2 bytes>"}
    assert mem.get_data(big["id"])["truncated"] is True
    assert small["content"].startswith("sensor_msgs/msg/BatteryState on /battery: ")


def _tf(t_ns: int, x: float, rotation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)) -> RosMessage:
    qx, qy, qz, qw = rotation
    link = {"header": {"stamp": {"sec": t_ns // S, "nanosec": t_ns % S}, "frame_id": "odom"},
            "child_frame_id": "base_link",
            "transform": {"translation": {"x": x, "y": 0.0, "z": 0.0},
                          "rotation": {"x": qx, "y": qy, "z": qz, "w": qw}}}
    return RosMessage("/tf", "tf2_msgs/msg/TFMessage", t_ns, {"transforms": [link]})


@pytest.mark.parametrize("absurd", [1e308, -1e308, 1e9])
def test_an_absurd_finite_position_is_malformed_and_no_valid_message_after_it_is_lost(
        mem: Memory, make_pipeline: MakePipeline, absurd: float) -> None:
    # The audit's stream: 15 PoseStamped on /pose, the 6th at x = 1e308. The next valid pose
    # raised OverflowError (x ** 2) in the motion check and was lost with it.
    pipeline = make_pipeline()
    sent = [pose_stamped(T0 + i * S // 10, absurd if i == 5 else 0.1 * i, 0.0) for i in range(15)]
    for msg in sent:
        pipeline.feed(msg)
    stats = pipeline.close()
    valid = [m for m in sent if abs(m.data["pose"]["position"]["x"]) < 1e6]
    assert stats.topics["/pose"].malformed == 1 and stats.topics["/pose"].messages == 15
    (chunk,) = by_topic(mem, _session(mem), "/pose")
    assert mem.get_data(chunk["id"])["raw_points"] == len(valid) == 14
    expected = sum(abs(b.data["pose"]["position"]["x"] - a.data["pose"]["position"]["x"])
                   for a, b in zip(valid, valid[1:]))
    assert chunk["spatial"]["path_length_m"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("bad", [{"x": 1e308}, {"rotation": (1e308, 0.0, 0.0, 1.0)}, {"rotation": (0.0, 0.0, 0.0, 0.0)}])
def test_a_transform_with_an_absurd_translation_or_a_denormalised_rotation_is_malformed(
        mem: Memory, make_pipeline: MakePipeline, bad: dict[str, Any]) -> None:
    # tf2 refuses a rotation whose |q|^2 is more than 0.01 from 1; composing through one scaled
    # the translations after it (to overflow for 1e308).
    pipeline = make_pipeline()
    sent = [_tf(T0 + i * S // 10, 0.1 * i) for i in range(15)]
    sent[5] = _tf(T0 + 5 * S // 10, **{"x": 0.5, **bad})
    for msg in sent:
        pipeline.feed(msg)
    stats = pipeline.close()
    assert stats.topics["/tf"].malformed == 1
    (chunk,) = by_topic(mem, _session(mem), "/tf")
    assert mem.get_data(chunk["id"])["raw_points"] == 14
    assert chunk["spatial"]["path_length_m"] == pytest.approx(1.4)


@pytest.mark.parametrize("message", [
    lambda t: pose_stamped(t, (t - T0) / S, 0.0), lambda t: joints(t, [(t - T0) / S]),
])
def test_a_buffer_is_ready_once_its_earliest_and_latest_message_span_a_chunk(
        message: Callable[[int], RosMessage]) -> None:
    """One rule for ready (set per message) and drain_ready: the buffer's max - min stamp. A
    message stamped before the ones buffered widens the span as much as one after them; measured
    from the new message instead, ready stayed False for a buffer that drain_ready would write."""
    first = message(T0 + 1 * S)
    config = BridgeConfig()
    converter = make_converter(first.topic, first.msgtype, config.rules_for(first.topic, first.msgtype)[0], config)
    chunk = converter.chunk_ns
    converter.feed(first)
    converter.feed(message(T0 + 1 * S + chunk - S // 2))
    assert not converter.ready
    converter.feed(message(T0 + S // 4))  # earlier than the first: the buffer spans a chunk and 0.25 s
    assert converter.ready
