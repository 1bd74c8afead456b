"""The live bridge end to end: loopback rosbridge server -> roslibpy -> pipeline -> a real store."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from rosbridge_helpers import (
    bridge_sessions,
    episode_summary,
    records,
    stored_pose_x,
    wait_received,
    wait_subscribed,
    zigzag_odometry,
)

from bridges.pipeline.config import BridgeConfig, load_bridge_config
from bridges.rosbridge.recall import REQUEST_TOPIC, RESPONSE_TOPIC
from bridges.rosbridge.status import format_summary
from bridges.rosbridge.testing import RosbridgeTestServer
from bridges.rosbridge.testing import messages as m
from robotmem import Memory

EPISODE = "/robotmem/episode"
LEARN = "/robotmem/learn"


def test_default_discovery_subscribes_the_listed_topics_the_default_rules_match(
        rosbridge_server: RosbridgeTestServer, start_bridge) -> None:
    for topic, msgtype in {"/odom": "nav_msgs/msg/Odometry", "/wheel/odometry": "nav_msgs/msg/Odometry",
                           "/front_camera/image_raw": "sensor_msgs/msg/Image",
                           "/front_camera/image_raw/compressed": "sensor_msgs/msg/CompressedImage",
                           "/scan": "sensor_msgs/msg/LaserScan", "/chatter": "std_msgs/msg/String"}.items():
        rosbridge_server.add_topic(topic, msgtype)
    bridge = start_bridge(rosbridge_server)
    # The explicit default topics are subscribed last; once the last one is there, all are.
    wait_subscribed(rosbridge_server, EPISODE)
    subs = {s.topic: s for s in rosbridge_server.subscriptions()}

    assert "/chatter" not in subs
    assert subs["/odom"].msgtype == "nav_msgs/msg/Odometry"
    assert subs["/wheel/odometry"].msgtype == "nav_msgs/msg/Odometry"  # matched by type
    image = subs["/front_camera/image_raw"]
    assert (image.throttle_rate, image.queue_length) == (1000, 1)  # images are throttled by rosbridge
    assert subs["/scan"].throttle_rate == 1000 and "/front_camera/image_raw/compressed" in subs
    assert {"/joint_states", "/amcl_pose", "/pose", LEARN, EPISODE} <= set(subs)
    assert bridge.wait_until(lambda s: bool(bridge.discovery_log), 10)
    report = bridge.discovery_log[0]
    assert report.startswith("topics from rosapi") and "/joint_states [sensor_msgs/msg/JointState]" in report
    assert "/amcl_pose" in report and "(not seen yet)" in report
    assert any(line.startswith("bridge: topics from rosapi") for line in start_bridge.status_lines)


def test_without_rosapi_the_configured_topics_are_subscribed_in_the_type_form_ros1_accepts(
        ros1_server_without_rosapi: RosbridgeTestServer, start_bridge) -> None:
    bridge = start_bridge(ros1_server_without_rosapi)
    wait_subscribed(ros1_server_without_rosapi, "/odom", "/joint_states", EPISODE)
    types = {s.topic: s.msgtype for s in ros1_server_without_rosapi.subscriptions()}
    assert types["/odom"] == "nav_msgs/Odometry" and types[EPISODE] == "std_msgs/String"
    assert bridge.wait_until(lambda s: bool(bridge.discovery_log), 10)
    assert "rosapi unavailable" in bridge.discovery_log[0]


def test_topics_that_appear_later_are_subscribed_on_rediscovery(rosbridge_server: RosbridgeTestServer,
                                                                start_bridge) -> None:
    start_bridge(rosbridge_server, discovery_interval_s=0.1)
    wait_subscribed(rosbridge_server, EPISODE)
    rosbridge_server.add_topic("/camera/depth/image_raw", "sensor_msgs/msg/Image")
    assert rosbridge_server.wait_for_subscription("/camera/depth/image_raw").throttle_rate == 1000


def test_episode_markers_start_and_end_a_session_with_context_score_and_the_robots_clock(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", EPISODE)
    rosbridge_server.publish(EPISODE, m.string('start {"task": {"name": "dock"}}'))
    for i in range(40):  # sim time: stamps start at 100 s, far from the wall clock
        rosbridge_server.publish("/odom", m.odometry(100.0 + 0.1 * i, 0.05 * i, 0.0))
    rosbridge_server.publish(EPISODE, m.string("end 0.75"))
    wait_received(bridge, EPISODE, 2)
    bridge.stop()

    (session,) = bridge_sessions(memory)
    assert session["status"] == "ended" and session["outcome_score"] == 0.75
    assert session["context"]["task"]["name"] == "dock" and session["context"]["robot"]["id"] == "tb3"
    # The marker has no stamp; it is placed on the odometry's clock, not the wall clock.
    assert abs(session["context"]["episode"]["t_start_ns"] - 100e9) < 1e9
    summary = episode_summary(memory, session["session_id"])
    assert summary["context"]["episode"]["messages"] == {"/odom": 40}
    assert summary["context"]["task"]["duration_s"] == pytest.approx(3.9, abs=0.5)


def test_a_frame_stamped_before_the_end_that_arrives_after_it_is_in_the_episode(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    camera = "/camera/image_raw"
    rosbridge_server.add_topic(camera, "sensor_msgs/msg/Image")
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", EPISODE, camera)
    rosbridge_server.publish(EPISODE, m.string("start"))
    for i in range(40):
        rosbridge_server.publish("/odom", m.odometry(100.0 + 0.1 * i, 0.05 * i, 0.0))
    rosbridge_server.publish(EPISODE, m.string("end 0.75"))
    wait_received(bridge, EPISODE, 2)
    rosbridge_server.publish(camera, m.image(103.7, 4, 4))  # throttled: it crossed the network late
    # Nothing else arrives: the bridge's clock finishes the episode late_grace_s (2 s) after its end.
    assert bridge.wait_until(lambda s: s.episodes_ended == 1, 15)
    (session,) = bridge_sessions(memory)
    assert session["status"] == "ended" and len(records(memory, session["session_id"], topic=camera)) == 1
    final = bridge.stop()
    assert final.late == {camera: 1} and camera not in final.outside_episode  # the summary and --json say so
    assert f"{camera}: received 1, ingested 1, dropped 0, malformed 0, rejected 0, late 1" in format_summary(final, 1.0)


def test_frames_the_server_throttled_are_all_kept_however_their_stamps_fall(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory, tmp_path: Path) -> None:
    """rosbridge throttles on its clock, the robot stamps on its own: on a loaded machine two
    frames the server sent a second apart can be stamped 0.6 s apart. The server already
    sampled the camera (throttle 1000 ms >= sample_every_s 1.0), so the pipeline keeps every
    frame; a camera the server does not throttle is still sampled on its stamps."""
    camera, depth = "/camera/image_raw", "/camera/depth/image_raw"
    rosbridge_server.add_topic(camera, "sensor_msgs/msg/Image")
    rosbridge_server.add_topic(depth, "sensor_msgs/msg/Image")
    config_file = tmp_path / "bridge.toml"
    config_file.write_text(f'[[topics]]\ntopic = "{depth}"\nmsgtype = "sensor_msgs/msg/Image"\n'
                           'converter = "image"\nthrottle_rate_ms = 0\nsample_every_s = 1.0\n')
    bridge = start_bridge(rosbridge_server, load_bridge_config(config_file))
    wait_subscribed(rosbridge_server, "/odom", EPISODE, camera, depth)
    assert rosbridge_server.wait_for_subscription(depth).throttle_rate == 0
    assert rosbridge_server.wait_for_subscription(camera).throttle_rate == 1000
    rosbridge_server.publish(EPISODE, m.string("start"))
    stamps = [100.0, 100.6, 101.9, 102.5]
    for t in stamps:
        rosbridge_server.publish("/odom", m.odometry(t, t - 100.0, 0.0))
        rosbridge_server.publish(camera, m.image(t, 4, 4))
        rosbridge_server.publish(depth, m.image(t, 4, 4))
        time.sleep(1.05)  # the server's throttle passes one frame a second (of its clock)
    rosbridge_server.publish(EPISODE, m.string("end"))
    wait_received(bridge, EPISODE, 2)
    final = bridge.stop()
    (session,) = bridge_sessions(memory)
    assert final.fed[camera] == len(records(memory, session["session_id"], topic=camera)) == len(stamps)
    # slots a second apart from 100 s, a frame up to 0.25 s early taking its slot: 100.6 is dropped
    assert len(records(memory, session["session_id"], topic=depth)) == len(stamps) - 1


def l_shaped_path(i: int, t0: float, origin: tuple[float, float]) -> dict:
    """30 s at 10 Hz: 15 m east, then 15 m north (1 m/s)."""
    t = 0.1 * i
    x, y = (t, 0.0) if t <= 15 else (15.0, t - 15.0)
    return m.odometry(t0 + t, origin[0] + x, origin[1] + y, yaw=0.0 if t <= 15 else math.pi / 2)


def drive_episode(server: RosbridgeTestServer, bridge, t0: float, origin: tuple[float, float], count: int) -> None:
    server.publish(EPISODE, m.string("start"))
    for i in range(300):
        server.publish("/odom", l_shaped_path(i, t0, origin))
    server.publish(EPISODE, m.string("end"))
    wait_received(bridge, EPISODE, count)


def test_pose_stream_is_stored_as_downsampled_chunks_with_spatial_context(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server, BridgeConfig(chunk_seconds=10.0))
    wait_subscribed(rosbridge_server, "/odom", EPISODE)
    drive_episode(rosbridge_server, bridge, 1000.0, (0.0, 0.0), 2)
    bridge.stop()

    (session,) = bridge_sessions(memory)
    chunks = records(memory, session["session_id"], topic="/odom")
    assert len(chunks) == 3  # 30 s in 10 s chunks
    payloads = [memory.get_data(c["id"]) for c in chunks]
    assert sum(p["raw_points"] for p in payloads) == 300
    assert all(len(p["x"]) <= 4 for p in payloads)  # straight legs collapse to their ends (RDP)
    spatial = sorted((c["context"]["spatial"] for c in chunks), key=lambda s: sum(s["start_position"]))
    assert spatial[0]["start_position"] == pytest.approx([0.0, 0.0, 0.0])
    assert spatial[-1]["end_position"] == pytest.approx([15.0, 14.9, 0.0], abs=1e-6)
    assert sum(s["path_length_m"] for s in spatial) == pytest.approx(29.9, abs=0.3)
    whole = episode_summary(memory, session["session_id"])["context"]["spatial"]
    assert whole["bbox"][0] == pytest.approx([0.0, 0.0, 0.0]) and whole["bbox"][1] == pytest.approx([15.0, 14.9, 0.0])
    assert whole["path_length_m"] == pytest.approx(29.9, abs=0.3)


def test_recall_near_a_place_the_robot_drove_through_finds_that_episode(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", EPISODE)
    drive_episode(rosbridge_server, bridge, 1000.0, (0.0, 0.0), 2)
    # The robot's clock runs on: 5 s later (a jump of minutes would be an idle gap).
    drive_episode(rosbridge_server, bridge, 1035.0, (100.0, 50.0), 4)
    bridge.stop()

    first, second = (s["session_id"] for s in bridge_sessions(memory))
    for place, expected in (([15.0, 7.0, 0.0], first), ([108.0, 50.0, 0.0], second)):
        hits = memory.recall(collection="robot", n=3,
                             spatial_sort={"field": "spatial.position", "target": place})["results"]
        assert hits and hits[0]["session_id"] == expected


def test_joint_states_become_joint_trajectory_chunks_of_numeric_arrays(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/joint_states")
    names = ["shoulder", "elbow", "wrist"]
    for i in range(100):
        angle = 0.01 * i
        rosbridge_server.publish("/joint_states", m.joint_state(10.0 + 0.01 * i, names, [angle, -angle, 2 * angle],
                                                                [1.0, -1.0, 2.0], [0.5, 0.5, 0.5]))
    wait_received(bridge, "/joint_states", 100)
    bridge.stop()

    (session,) = bridge_sessions(memory)
    (chunk,) = records(memory, session["session_id"], topic="/joint_states")
    data = memory.get_data(chunk["id"])
    assert data["names"] == names
    assert data["positions"][-1] == pytest.approx([0.99, -0.99, 1.98])
    assert len(data["t"]) == len(data["positions"]) == len(data["velocities"]) == len(data["efforts"])


def test_camera_frames_are_stored_as_small_thumbnails_never_full_resolution(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    rosbridge_server.add_topic("/front_camera/image_raw", "sensor_msgs/msg/Image")
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/front_camera/image_raw", "/odom")
    rosbridge_server.publish("/odom", m.odometry(5.0, 1.0, 2.0))
    rosbridge_server.publish("/front_camera/image_raw", m.image(5.0, 640, 480))
    wait_received(bridge, "/front_camera/image_raw", 1)
    bridge.stop()

    (session,) = bridge_sessions(memory)
    (frame,) = records(memory, session["session_id"], topic="/front_camera/image_raw")
    data = memory.get_data(frame["id"])
    assert max(data["thumbnail_shape"][:2]) <= 64
    assert len(data["thumbnail"]) <= 64 * 64 * 3 < 640 * 480 * 3
    assert frame["perception_type"] == "visual"


def test_learn_topic_stores_plain_text_and_json_insights(rosbridge_server: RosbridgeTestServer, start_bridge,
                                                         memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, LEARN)
    rosbridge_server.publish(LEARN, m.string("the loading ramp is slippery when wet"))
    rosbridge_server.publish(LEARN, m.string(json.dumps({"insight": "dock 3 charges faster than dock 1",
                                                         "context": {"task": {"name": "charging"}}})))
    wait_received(bridge, LEARN, 2)
    bridge.stop()

    ramp = memory.recall("loading ramp slippery", collection="robot", n=1)["results"][0]
    dock = memory.recall("which dock charges faster", collection="robot", n=1)["results"][0]
    assert ramp["content"] == "the loading ramp is slippery when wet" and ramp["type"] == "fact"
    assert dock["content"] == "dock 3 charges faster than dock 1" and dock["task"]["name"] == "charging"
    assert dock["context"]["robot"]["id"] == "tb3"


def test_malformed_messages_are_counted_and_ingestion_goes_on(rosbridge_server: RosbridgeTestServer,
                                                             start_bridge, memory: Memory) -> None:
    rosbridge_server.add_topic("/front_camera/image_raw", "sensor_msgs/msg/Image")
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/front_camera/image_raw", "/odom")
    rosbridge_server.publish_raw("this is not json")  # frames roslibpy cannot parse or route
    rosbridge_server.publish_raw(json.dumps({"op": "publish", "msg": {}}))
    rosbridge_server.publish_raw(json.dumps({"op": "publish", "topic": "/odom", "msg": [1, 2, 3]}))
    bad_pose = m.odometry(50.0, 0.0, 0.0)
    bad_pose["pose"]["pose"]["position"]["x"] = "north"
    rosbridge_server.publish("/odom", bad_pose)
    rosbridge_server.publish("/odom", {"header": m.header(50.0, "odom")})
    bad_image = m.image(50.0, 8, 8)
    bad_image["data"] = "*** not base64 ***"
    rosbridge_server.publish("/front_camera/image_raw", bad_image)
    for i in range(10):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    wait_received(bridge, "/odom", 13)
    assert bridge.wait_until(lambda s: s.bad_frames >= 2 and s.total("fed") >= 10, 10)
    snapshot = bridge.stop()

    assert snapshot.bad_frames == 2
    assert snapshot.malformed == {"/odom": 3, "/front_camera/image_raw": 1}
    assert snapshot.feed_errors == 0 and snapshot.connects == 1
    (session,) = bridge_sessions(memory)
    assert sorted(stored_pose_x(memory, session["session_id"])) == pytest.approx([0.1 * i for i in range(10)])


def test_ros_node_recall_request_through_the_bridge_finds_the_episode_near_a_place(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server)
    wait_subscribed(rosbridge_server, "/odom", EPISODE, REQUEST_TOPIC)
    drive_episode(rosbridge_server, bridge, 1000.0, (0.0, 0.0), 2)
    assert bridge.wait_until(lambda s: s.episodes_ended >= 1, 20)
    request = {"id": "nav2-7", "n": 1, "spatial_sort": {"field": "spatial.position", "target": [15.0, 7.0, 0.0]}}
    rosbridge_server.publish(REQUEST_TOPIC, m.string(json.dumps(request)))
    answer = json.loads(rosbridge_server.wait_for_message(RESPONSE_TOPIC)["data"])
    (session,) = bridge_sessions(memory)
    assert answer["id"] == "nav2-7" and answer["results"][0]["session_id"] == session["session_id"]


def test_status_lines_come_every_interval_with_per_topic_rates(rosbridge_server: RosbridgeTestServer,
                                                               start_bridge) -> None:
    bridge = start_bridge(rosbridge_server, status_interval_s=0.05)
    wait_subscribed(rosbridge_server, "/odom")
    for i in range(5):
        rosbridge_server.publish("/odom", zigzag_odometry(i))
    wait_received(bridge, "/odom", 5)
    lines = start_bridge.status_lines
    assert bridge.wait_until(lambda s: any("/odom" in line for line in lines if line.startswith("bridge connected |")),
                             10)


def test_automatic_episodes_end_after_an_idle_gap_and_restart_when_the_robot_moves(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory) -> None:
    bridge = start_bridge(rosbridge_server, BridgeConfig(idle_gap_s=5.0))
    wait_subscribed(rosbridge_server, "/odom")
    poses = [(float(t), 0.5 * t) for t in range(10)]  # driving for 10 s
    poses += [(float(t), 4.5) for t in range(10, 20)]  # parked for 10 s: longer than the gap
    poses += [(float(t), 4.5 + 0.5 * (t - 19)) for t in range(20, 30)]  # driving again
    for t, x in poses:
        rosbridge_server.publish("/odom", m.odometry(500.0 + t, x, 0.0))
    wait_received(bridge, "/odom", len(poses))
    bridge.stop()

    first, second = bridge_sessions(memory)
    assert first["context"]["source"]["policy"] == "topic:/robotmem/episode"  # markers, else automatic
    assert max(stored_pose_x(memory, first["session_id"])) == pytest.approx(4.5)
    assert min(stored_pose_x(memory, second["session_id"])) >= 4.5


def test_config_file_maps_another_topic_with_its_rosbridge_throttle_and_queue(
        rosbridge_server: RosbridgeTestServer, start_bridge, memory: Memory, tmp_path: Path) -> None:
    config_file = tmp_path / "bridge.toml"
    config_file.write_text(
        'default_topics = false\n'
        '[[topics]]\n'
        'topic = "/battery_state"\n'
        'msgtype = "sensor_msgs/msg/BatteryState"\n'
        'converter = "json_perception"\n'
        'throttle_rate_ms = 2000\n'
        'queue_length = 3\n', encoding="utf-8")
    rosbridge_server.add_topic("/battery_state", "sensor_msgs/msg/BatteryState")
    rosbridge_server.add_topic("/odom", "nav_msgs/msg/Odometry")
    bridge = start_bridge(rosbridge_server, load_bridge_config(config_file))
    subscription = rosbridge_server.wait_for_subscription("/battery_state")
    assert (subscription.throttle_rate, subscription.queue_length) == (2000, 3)
    assert bridge.wait_until(lambda s: bool(bridge.discovery_log), 10)
    assert "/odom" not in bridge.snapshot().subscribed  # the defaults are off
    rosbridge_server.publish("/battery_state", {"header": m.header(7.0, "base"), "voltage": 12.1,
                                                "percentage": 0.8})
    wait_received(bridge, "/battery_state", 1)
    bridge.stop()

    (session,) = bridge_sessions(memory)
    (battery,) = records(memory, session["session_id"], topic="/battery_state")
    assert memory.get_data(battery["id"])["percentage"] == pytest.approx(0.8)
