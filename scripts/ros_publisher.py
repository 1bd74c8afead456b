"""A real ROS 1 node (Debian's /usr/bin/python3 + python3-rospy) that publishes test streams.

Run by the real-rosbridge tests and scripts/bench_rosbridge_real.py as ``/usr/bin/python3 scripts/ros_publisher.py SPEC``
with the ROS environment of the real server (bridges/rosbridge/testing/real_server.py).
SPEC is JSON: {"streams": [{"topic", "kind", "hz"}], "seconds", "wait_for_subscriber", "text", "sim_time"}.
"sim_time": {"start": S, "resets": [s, ...]} stamps with simulated time instead of the wall clock: it
starts at S and goes back to 0 at each reset (seconds after the start), as Gazebo's "reset world" does;
the odometry goes back to x = 0 with it. Each stream's line then has "segments": its count per time base.
kinds: odom (along +x at 1 m/s, frame odom), joints (6 joints, sine), image (8x8 mono8), big_image
(mono8, 2048 px wide, the stream's "bytes" of pixels, default 4 MB: a camera's frame in size),
pose_cov (PoseWithCovarianceStamped in map), learn (one std_msgs/String), blip (a type no
server knows). Prints one JSON line per stream when done: topic, count, first and last stamp.
"""

import json
import math
import sys
import time

import genpy
import rospy
from geometry_msgs.msg import PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String


class Blip(genpy.Message):
    """A message type that exists only in this node: rosbridge cannot load it."""

    _md5sum = "992ce8a1687cec8c8bd883ec73ca41d1"
    _type = "robotmem_test/Blip"
    _has_header = False
    _full_text = "string data\n"
    __slots__ = ["data"]
    _slot_types = ("string",)

    def __init__(self, *args, **kwds):
        super().__init__(*args, **kwds)
        if self.data is None:
            self.data = ""

    def _get_types(self):
        return self._slot_types

    def serialize(self, buff):
        String(data=self.data).serialize(buff)

    def deserialize(self, str_):
        self.data = String().deserialize(str_).data
        return self


TYPES = {"odom": Odometry, "joints": JointState, "image": Image, "big_image": Image, "pose_cov": PoseWithCovarianceStamped,
         "learn": String, "blip": Blip}


#: big_image pixels, made once per size (making 4 MB per frame would limit the rate)
_PIXELS = {}


def make(kind, n, hz, stamp, text, size=4 << 20):
    t = n / hz
    if kind == "odom":
        msg = Odometry()
        msg.header.stamp, msg.header.frame_id, msg.child_frame_id = stamp, "odom", "base_link"
        msg.pose.pose.position.x = t
        msg.pose.pose.orientation.w = 1.0
    elif kind == "pose_cov":
        msg = PoseWithCovarianceStamped()
        msg.header.stamp, msg.header.frame_id = stamp, "map"
        msg.pose.pose.position.x, msg.pose.pose.position.y = t, 0.5
        msg.pose.pose.orientation.w = 1.0
    elif kind == "joints":
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = [f"joint{i}" for i in range(6)]
        msg.position = [math.sin(t + i) for i in range(6)]
        msg.velocity = [0.0] * 6
    elif kind == "image":
        msg = Image()
        msg.header.stamp, msg.header.frame_id = stamp, "camera"
        msg.height, msg.width, msg.encoding, msg.step = 8, 8, "mono8", 8
        msg.data = bytes((n + i) % 256 for i in range(64))
    elif kind == "big_image":
        width = 2048
        height = max(1, size // width)
        if size not in _PIXELS:
            _PIXELS[size] = bytes(range(256)) * (width * height // 256) + bytes(width * height % 256)
        msg = Image()
        msg.header.stamp, msg.header.frame_id = stamp, "camera"
        msg.height, msg.width, msg.encoding, msg.step = height, width, "mono8", width
        msg.data = _PIXELS[size]
    elif kind == "blip":
        msg = Blip(data=f"blip {n}")
    else:
        msg = String(data=text or f"note {n}")
    return msg


def main():
    spec = json.loads(sys.argv[1])
    rospy.init_node("robotmem_test_publisher", anonymous=True, disable_signals=True)
    streams = []
    for s in spec["streams"]:
        pub = rospy.Publisher(s["topic"], TYPES[s["kind"]], queue_size=1000)
        streams.append({**s, "pub": pub, "count": 0, "first": None, "last": None, "next": 0.0})
    if spec.get("wait_for_subscriber"):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(s["pub"].get_num_connections() for s in streams):
            time.sleep(0.01)
        time.sleep(0.2)
    print(json.dumps({"ready": True}), flush=True)
    start = time.monotonic()
    sim = spec.get("sim_time")
    resets = list(sim["resets"]) if sim else []
    sim_zero, sim_start = 0.0, sim["start"] if sim else 0.0  # wall offset of the last reset, sim time then
    for s in streams:
        s["segments"], s["n0"] = [0], 0
    while time.monotonic() - start < spec["seconds"]:
        now = time.monotonic() - start
        if resets and now >= resets[0]:
            sim_zero, sim_start = resets.pop(0), 0.0
            for s in streams:
                s["segments"].append(0)
                s["n0"] = s["count"]
        for s in streams:
            if s["kind"] == "learn" and s["count"]:
                continue
            if now >= s["next"]:
                stamp = rospy.Time.from_sec(sim_start + now - sim_zero) if sim else rospy.Time.now()
                n = s["count"] - s["n0"]  # odometry starts from x = 0 again after a reset
                s["pub"].publish(make(s["kind"], n, s["hz"], stamp, spec.get("text"), s.get("bytes", 4 << 20)))
                s["count"] += 1
                s["segments"][-1] += 1
                s["first"] = s["first"] if s["first"] is not None else stamp.to_sec()
                s["last"] = stamp.to_sec()
                s["next"] += 1.0 / s["hz"]
        wait = min(s["next"] for s in streams) - (time.monotonic() - start)
        if wait > 0:
            time.sleep(wait)
    time.sleep(0.3)  # let the last messages leave the socket
    for s in streams:
        print(json.dumps({"topic": s["topic"], "count": s["count"], "first": s["first"], "last": s["last"],
                          "segments": s["segments"]}), flush=True)


if __name__ == "__main__":
    main()
