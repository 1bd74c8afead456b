"""A message recorded after an episode's `end` marker but stamped before it lands in that episode.

The recorder writes messages as they arrive, so a camera frame stamped 0.2 s before `end`
that crossed the network 0.3 s after it is stored after the marker: replay must put it
where the live bridge puts it (late_grace_s, docs/bridge.md "Late messages").
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_paths
from robotmem import Memory

S = 1_000_000_000
T0 = 1_735_689_600 * S
STRING = "std_msgs/msg/String"
ODOM = "nav_msgs/msg/Odometry"
IMAGE = "sensor_msgs/msg/Image"
CAMERA = "/camera/image_raw"
#: the first episode's `end` marker (log time; markers carry no stamp)
END = T0 + 3 * S
#: the late frame: stamped before END, recorded after it
LATE_STAMP, LATE_LOG = END - S // 5, END + 3 * S // 10
#: the second episode's `start`
SECOND = END + S // 2


def _drive(make_datasets: ModuleType, start_ns: int, seconds: int, x0: float) -> list[tuple[int, str, str, Any]]:
    """Odometry at 10 Hz and a camera frame every second but the last, each logged at its stamp."""
    messages = [(start_ns + i * S // 10, "/odom", ODOM,
                 make_datasets.odometry(start_ns + i * S // 10, x0 + 0.05 * i, 0.0, 0.0, 0.5, 0.0))
                for i in range(1, seconds * 10)]
    messages += [(start_ns + S // 2 + k * S, CAMERA, IMAGE,
                  make_datasets.camera_image(start_ns + S // 2 + k * S, x0, 0.0)) for k in range(seconds - 1)]
    return sorted(messages, key=lambda m: m[0])


def _recording(make_datasets: ModuleType, path: Path, late_log: int = LATE_LOG, second: int = SECOND) -> None:
    """Two episodes between markers; the first one's last frame is recorded after its `end`."""
    string = make_datasets.string
    messages = [(T0, "/robotmem/episode", STRING, string("start")), *_drive(make_datasets, T0, 3, 0.0),
                (END, "/robotmem/episode", STRING, string("end 0.9")),
                (late_log, CAMERA, IMAGE, make_datasets.camera_image(LATE_STAMP, 1.4, 0.0)),
                (second, "/robotmem/episode", STRING, string("start")),
                *_drive(make_datasets, second, 3, 2.0),
                (second + 7 * S // 2, "/robotmem/episode", STRING, string("end 0.4"))]
    make_datasets.write_mcap(path, messages)


def _frame_stamps(mem: Memory, session_id: str) -> list[int]:
    memories = mem.session_timeline(session_id)["memories"]
    return sorted(m["context"]["episode"]["t_ns"] for m in memories
                  if m["context"].get("source", {}).get("topic") == CAMERA)


def test_a_frame_recorded_after_the_end_marker_but_stamped_before_it_is_in_its_episode(
        tmp_path: Path, make_datasets: ModuleType) -> None:
    path = tmp_path / "late_frame.mcap"
    _recording(make_datasets, path)
    options = ReplayOptions(episode_split="topic:/robotmem/episode")
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        (result,) = replay_paths(mem, [path], BridgeConfig(), options)
        first, second = result.stats.session_ids
        assert _frame_stamps(mem, first) == [T0 + S // 2, T0 + 3 * S // 2, LATE_STAMP]
        assert _frame_stamps(mem, second) == [SECOND + S // 2, SECOND + 3 * S // 2]
        camera = result.stats.topics[CAMERA]
        assert (camera.late, camera.outside_episode, result.stats.episodes_ended) == (1, 0, 2)
        assert mem.get_session(first)["outcome_score"] == 0.9
        stored = mem.stats()

        (again,) = replay_paths(mem, [path], BridgeConfig(), options)  # the late frame is stored already, too
        camera = again.stats.topics[CAMERA]
        assert (again.stats.records_written, camera.already_stored, camera.outside_episode) == (0, 5, 0)
        assert mem.stats() == stored


def test_a_frame_recorded_after_the_window_stays_outside_as_live_even_with_nothing_in_between(
        tmp_path: Path, make_datasets: ModuleType) -> None:
    # Live, the bridge's clock closes the window 2 s after the end although nothing arrives;
    # replay has the log time, when the recorder received the frame: 2.5 s after the end.
    path = tmp_path / "too_late_frame.mcap"
    _recording(make_datasets, path, late_log=END + 5 * S // 2, second=END + 5 * S)
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        (result,) = replay_paths(mem, [path], BridgeConfig(), ReplayOptions(episode_split="topic:/robotmem/episode"))
        first, _ = result.stats.session_ids
        assert _frame_stamps(mem, first) == [T0 + S // 2, T0 + 3 * S // 2]
        camera = result.stats.topics[CAMERA]
        assert (camera.late, camera.outside_episode) == (0, 1)
