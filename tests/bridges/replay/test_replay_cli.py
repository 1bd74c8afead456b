"""``robotmem replay``: the summary table, JSON, dry run, errors, idempotency and crash recovery."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
import yaml
from mcap.writer import Writer as McapWriter
from recordings import Msg, S, joint_state, odometry, write_mcap, write_mixed_encodings_mcap, write_ros2_bag

from bridges.pipeline import BridgeConfig, Pipeline, TopicEpisodes
from bridges.replay import discovery, open_reader
from bridges.replay.discovery import content_digest, session_id_prefix
from bridges.replay.report import ProgressBar
from robotmem import Memory

RunCli = Callable[..., tuple[int, str, str]]
SPLIT = ("--episode-split", "topic:/robotmem/episode")


def _table_row(out: str, topic: str) -> list[str]:
    (line,) = [line for line in out.splitlines() if line.split() and line.split()[0] == topic]
    return line.split()


def test_replay_prints_a_table_of_messages_read_and_records_written(run_cli: RunCli, datasets: Path) -> None:
    code, out, err = run_cli("replay", str(datasets / "nav_demo.mcap"), *SPLIT, "--robot-id", "demo-bot")
    assert code == 0, err
    assert _table_row(out, "/odom")[3:5] == ["992", "6"]
    assert _table_row(out, "/robotmem/learn")[3:5] == ["3", "3"]
    scan = _table_row(out, "/scan")
    assert scan[3] == "100" and "50 sampled out" in " ".join(scan)
    assert "episodes: 2 new, 0 already stored, 0 rewritten" in out
    assert "msgs/s" in out


def test_a_second_replay_of_the_same_file_stores_nothing(run_cli: RunCli, datasets: Path, robotmem_home: Path) -> None:
    run_cli("replay", str(datasets / "arm_push_ros2"), *SPLIT)
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        before = mem.stats()
    code, out, _ = run_cli("replay", str(datasets / "arm_push_ros2"), *SPLIT)
    assert code == 0
    assert "episodes: 0 new, 3 already stored" in out and "records written: 0" in out
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        assert mem.stats() == before


def test_json_output_has_per_topic_stats_and_the_ignored_topics(run_cli: RunCli, datasets: Path) -> None:
    code, out, _ = run_cli("--json", "replay", "--topics", "/odom", "/nope", "--", str(datasets / "nav_demo.mcap"))
    assert code == 0
    (recording,) = json.loads(out)["recordings"]
    assert recording["selected_topics"] == ["/odom"]
    assert recording["missing_topics"] == ["/nope"]
    assert recording["ignored_topics"]["/scan"] == 100
    assert recording["stats"]["topics"]["/odom"]["messages"] == 992
    assert recording["stats"]["episodes_started"] == 1  # --episode-split file (default)


def test_a_topic_named_with_topics_but_without_a_rule_is_stored_as_sampled_json(run_cli: RunCli, tmp_path: Path,
                                                                               datasets: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text("default_topics = false\n")  # no rule covers anything now
    code, out, _ = run_cli("--json", "replay", str(datasets / "arm_push_ros2"), "--config", str(config),
                           "--topics", "/ee_pose")
    assert code == 0
    stats = json.loads(out)["recordings"][0]["stats"]["topics"]["/ee_pose"]
    assert stats["converter"] == "json_perception"
    assert stats["messages"] == 120 and stats["records"] + stats["sampled_out"] == 120 and stats["records"] <= 15


def test_dry_run_lists_episodes_and_records_and_creates_no_database(
    run_cli: RunCli, datasets: Path, robotmem_home: Path
) -> None:
    code, out, _ = run_cli("replay", str(datasets / "nav_demo.mcap"), *SPLIT, "--dry-run")
    assert code == 0
    assert not (robotmem_home / "memory.db").exists()
    assert out.count("would start episode rpl_") == 2
    assert "would learn: The cup is on the kitchen counter next to the window" in out
    assert "would store [proprioceptive] pose trajectory /odom" in out
    assert "would end episode" in out and "(outcome score 0.9)" in out


def test_dry_run_after_a_real_run_says_the_episodes_are_already_stored(run_cli: RunCli, datasets: Path) -> None:
    run_cli("replay", str(datasets / "arm_push_ros2"), *SPLIT)
    code, out, _ = run_cli("replay", str(datasets / "arm_push_ros2"), *SPLIT, "--dry-run")
    assert code == 0
    assert out.count("is already stored: nothing to do") == 3
    assert "would store" not in out


def test_bad_arguments_are_errors_naming_the_problem(run_cli: RunCli, tmp_path: Path, datasets: Path) -> None:
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--episode-split", "gap:soon")
    assert code == 2 and "episode_split" in err and "gap:SECONDS" in err
    code, _, err = run_cli("replay", str(tmp_path / "missing.bag"))
    assert code == 1 and "missing.bag: no such file" in err
    config = tmp_path / "bridge.toml"
    config.write_text("chunk_seconds = -3\n")
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--config", str(config))
    assert code == 2 and "(chunk_seconds)" in err  # exit 2 as `robotmem bridge` gives for the same file
    code, _, err = run_cli("--json", "replay", str(datasets / "nav_demo.mcap"), "--config", str(config))
    assert code == 2 and json.loads(err)["error"]["field"] == "chunk_seconds"


def test_under_json_a_recording_that_cannot_be_read_is_a_json_error(run_cli: RunCli, tmp_path: Path,
                                                                     datasets: Path) -> None:
    code, out, err = run_cli("--json", "replay", str(tmp_path / "missing.bag"))
    assert code == 1 and out == ""
    assert json.loads(err)["error"]["code"] == "recording_error" and "missing.bag: no such file" in err
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"\x89MCAP0\r\n" + b"\0" * 64)
    code, out, err = run_cli("--json", "replay", str(bad), str(datasets / "nav_demo.mcap"))
    assert code == 1
    errors = [json.loads(line)["error"] for line in err.splitlines() if line.startswith("{")]
    assert [e["code"] for e in errors] == ["recording_error"] and errors[0]["message"].endswith("(skipped)")
    assert json.loads(out)  # the good recording's results, still one JSON document on stdout


def test_a_perception_type_typo_in_the_config_stops_the_replay_before_anything_is_written(
        run_cli: RunCli, datasets: Path, robotmem_home: Path, tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = "smell"\n')
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--config", str(config))
    assert code == 2 and "topics[0].perception_type" in err and "proprioceptive" in err
    assert not (robotmem_home / "memory.db").exists()
    config.write_text('[[topics]]\ntopic = "/odom"\nconverter = "pose_trajectory"\nperception_type = "tactile"\n')
    code, out, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--config", str(config))
    assert code == 0, err
    assert _table_row(out, "/odom")[3:5] == ["992", "6"]


def test_a_bridge_toml_in_the_home_folder_is_used(run_cli: RunCli, datasets: Path, robotmem_home: Path) -> None:
    (robotmem_home / "bridge.toml").write_text("chunk_seconds = 100\n")
    code, out, _ = run_cli("replay", str(datasets / "nav_demo.mcap"))
    assert code == 0
    assert _table_row(out, "/odom")[3:5] == ["992", "1"]  # one 100 s chunk instead of six 10 s chunks


def test_an_episode_a_crashed_replay_left_open_is_rewritten(run_cli: RunCli, datasets: Path, robotmem_home: Path,
                                                            tmp_path: Path) -> None:
    recording = datasets / "nav_demo.mcap"
    prefix = session_id_prefix(content_digest(recording), "default")
    with Memory(robotmem_home / "memory.db") as mem:  # a run that dies half way through the first errand
        crashed = Pipeline(mem, BridgeConfig(), collection="default", robot_id=None, episode_policy=TopicEpisodes(),
                           source=str(recording.resolve()), session_id_for=lambda t: f"{prefix}_{t}")
        with open_reader(recording) as reader:
            for i, msg in enumerate(reader.iter_messages()):
                crashed.feed(msg)
                if i == 300:
                    break
        crashed.flush()
        open_sessions = mem.list_sessions(status="open")
    assert len(open_sessions) == 1

    code, out, _ = run_cli("replay", str(recording), *SPLIT)
    assert code == 0 and "1 new, 0 already stored, 1 rewritten" in out

    clean_home = tmp_path / "clean"
    code, _, _ = run_cli("--home", str(clean_home), "replay", str(recording), *SPLIT)
    assert code == 0
    with Memory(robotmem_home / "memory.db", embedder=None) as mem, Memory(clean_home / "memory.db", embedder=None) as ref:
        assert mem.list_sessions(status="open") == []
        active = mem.stats()["collections"]["default"]["by_status"]["active"]
        assert active == ref.stats()["collections"]["default"]["by_status"]["active"]


def test_the_progress_bar_shows_messages_and_percent() -> None:
    out = io.StringIO()
    bar = ProgressBar("demo.mcap", out=out, width=10)
    bar(500, 1000)
    bar(1000, 1000)
    text = out.getvalue()
    assert "demo.mcap [#####     ]  50%  500/1000 msgs" in text
    assert text.endswith("[##########] 100%  1000/1000 msgs\n")


def test_the_installed_robotmem_command_has_replay(datasets: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "robotmem", "--home", str(tmp_path), "--json", "replay", str(datasets / "arm_push_ros2"),
         "--dry-run"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["recordings"][0]["stats"]["topics"]["/joint_states"]["messages"] == 600


def test_without_the_ros_extra_replay_says_what_to_install(
    run_cli: RunCli, datasets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcap_ros2", None)  # as if mcap-ros2-support were not installed
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"))
    assert code == 1
    assert "replay needs mcap_ros2" in err and "robotmem[ros]" in err


def test_a_corrupt_message_is_counted_as_malformed_and_the_rest_is_replayed(run_cli: RunCli, tmp_path: Path) -> None:
    from mcap.writer import Writer

    path = tmp_path / "notes.mcap"
    with open(path, "wb") as handle:
        writer = Writer(handle)
        writer.start(profile="ros2", library="test")
        schema = writer.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        channel = writer.register_channel("/robotmem/learn", "cdr", schema)
        for i, text in enumerate([b"Keep the gripper closed on stairs", None, b"Charge before long missions"]):
            if text is None:
                payload = b"\x00\x01\x00\x00\xff\xff\xff\x7f"  # a string length far past the end
            else:
                payload = b"\x00\x01\x00\x00" + len(text + b"\0").to_bytes(4, "little") + text + b"\0"
            writer.add_message(channel, log_time=(i + 1) * 1_000_000_000, data=payload, publish_time=0)
        writer.finish()
    code, out, _ = run_cli("--json", "replay", str(path))
    assert code == 0
    stats = json.loads(out)["recordings"][0]["stats"]["topics"]["/robotmem/learn"]
    assert stats["messages"] == 3 and stats["malformed"] == 1 and stats["records"] == 2


def test_an_unreadable_file_in_a_folder_is_skipped_and_the_others_are_replayed(
    run_cli: RunCli, datasets: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "nightly"
    shutil.copytree(datasets / "arm_push_ros2", folder / "b_arm")
    (folder / "a_broken.mcap").write_bytes(b"\x89MCAP0\r\n truncated by a full disk")
    code, out, err = run_cli("replay", str(folder))
    assert code == 1
    assert "a_broken.mcap" in err and "(skipped)" in err
    assert "b_arm" in out and _table_row(out, "/joint_states")[3] == "600"


def test_a_recording_replayed_before_with_other_options_is_not_stored_again(
    run_cli: RunCli, datasets: Path, robotmem_home: Path
) -> None:
    # The README: its first command replays nav_demo with markers; `robotmem replay datasets/`
    # (the default split) then cut the same messages into one other episode and stored them twice.
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), *SPLIT, "--robot-id", "demo-bot")
    assert code == 0, err
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        errands = sorted(s["session_id"] for s in mem.list_sessions())
    code, out, err = run_cli("replay", str(datasets))
    assert code == 0, err
    nav = out[out.index("nav_demo.mcap"):]
    assert "episodes: 0 new, 1 already stored" in nav and "records written: 0" in nav
    assert "1 already stored by a replay of this recording with other options" in nav
    arm = out[out.index("arm_push_ros2"):out.index("nav_demo.mcap")]
    assert "episodes: 1 new" in arm
    nav_prefix = session_id_prefix(content_digest(datasets / "nav_demo.mcap"), "default")
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        assert sorted(s["session_id"] for s in mem.list_sessions() if s["session_id"].startswith(nav_prefix)) == errands
        cups = mem.recall("where is the cup")["results"]
        assert [hit["content"] for hit in cups] == ["The cup is on the kitchen counter next to the window"]

    # The other way round, and into another collection (where it is stored anew).
    code, out, _ = run_cli("--home", str(robotmem_home / "other"), "replay", str(datasets / "nav_demo.mcap"))
    assert code == 0 and "episodes: 1 new" in out
    code, out, _ = run_cli("--home", str(robotmem_home / "other"), "replay", str(datasets / "nav_demo.mcap"), *SPLIT)
    assert code == 0 and "episodes: 0 new, 2 already stored" in out and "records written: 0" in out
    code, out, _ = run_cli("--home", str(robotmem_home / "other"), "--collection", "lab",
                           "replay", str(datasets / "nav_demo.mcap"), *SPLIT)
    assert code == 0 and "episodes: 2 new, 0 already stored" in out


def test_a_run_stopped_between_episodes_continues_with_the_next_one(
    run_cli: RunCli, datasets: Path, robotmem_home: Path
) -> None:
    recording = datasets / "nav_demo.mcap"
    prefix = session_id_prefix(content_digest(recording), "default")
    with Memory(robotmem_home / "memory.db") as mem:  # stopped after the first errand ended, before the second
        stopped = Pipeline(mem, BridgeConfig(), collection="default", robot_id=None, episode_policy=TopicEpisodes(),
                           source=str(recording.resolve()), session_id_for=lambda t: f"{prefix}_{t}")
        with open_reader(recording) as reader:
            for msg in reader.iter_messages():
                if msg.t_ns >= 1735689625_000000000:  # the second errand starts at 25.1 s
                    break
                stopped.feed(msg)
        stopped.tick(1735689625_100000001)  # late_grace_s (2 s) after the first errand's end (23.1 s) has passed
        stopped.flush()
        assert [s["status"] for s in mem.list_sessions()] == ["ended"]
    code, out, _ = run_cli("replay", str(recording), *SPLIT)
    assert code == 0 and "episodes: 1 new, 1 already stored, 0 rewritten" in out
    assert "other options" not in out


def _odometry_recording(path: Path, count: int = 20) -> Path:
    return write_mcap(path, [Msg("/odom", "nav_msgs/msg/Odometry", (100 + i) * S, odometry((100 + i) * S, i / 10, 0.0))
                             for i in range(count)])


def test_channels_that_cannot_be_decoded_are_warned_per_topic_and_the_next_recording_replays(
        run_cli: RunCli, tmp_path: Path) -> None:
    mixed = write_mixed_encodings_mcap(tmp_path / "mixed.mcap")
    good = _odometry_recording(tmp_path / "good.mcap")
    code, out, err = run_cli("--json", "replay", str(mixed), str(good), "--dry-run", "--no-progress",
                             "--topics", "/odom", "/status", "/loose", "/pb", "/custom")
    assert code == 0
    first, second = json.loads(out)["recordings"]
    assert first["undecodable"]["/pb"]["messages"] == 10 and "'protobuf'" in first["undecodable"]["/pb"]["reason"]
    assert first["undecodable"]["/custom"]["messages"] == 10 and "my_pkg/msg/Custom" in first["undecodable"]["/custom"]["reason"]
    topics = first["stats"]["topics"]
    assert topics["/status"]["converter"] == "json_perception" and topics["/status"]["records"] == 10  # 1 s apart
    assert topics["/loose"]["records"] == 10 and topics["/pb"]["malformed"] == 10
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert any("/pb: 10 message(s) could not be decoded" in w and "protobuf" in w for w in warnings)
    assert any("/custom: 10 message(s) could not be decoded" in w for w in warnings)
    assert second["stats"]["topics"]["/odom"]["messages"] == 20


def test_a_topic_whose_metadata_names_another_type_is_listed_with_what_was_read_and_warned(
        run_cli: RunCli, tmp_path: Path) -> None:
    folder = write_ros2_bag(tmp_path / "bag", [
        *(Msg("/odom", "nav_msgs/msg/Odometry", (100 + i) * S, odometry((100 + i) * S, i / 10, 0.0)) for i in range(20)),
        *(Msg("/joint_states", "sensor_msgs/msg/JointState", (100 + i) * S, joint_state((100 + i) * S, i / 10))
          for i in range(30))])
    metadata = folder / "metadata.yaml"
    metadata.write_text(metadata.read_text().replace("type: sensor_msgs/msg/JointState",
                                                     "type: geometry_msgs/msg/PoseStamped"))
    with sqlite3.connect(next(folder.glob("*.db3"))) as oracle:  # the storage holds the 30 messages
        assert oracle.execute("SELECT count(*) FROM messages JOIN topics ON topics.id = topic_id "
                              "WHERE topics.name = '/joint_states'").fetchone() == (30,)
    code, out, err = run_cli("--json", "replay", str(folder), "--dry-run", "--no-progress")
    assert code == 0
    (result,) = json.loads(out)["recordings"]
    assert "/joint_states" in result["selected_topics"]
    assert result["stats"]["topics"]["/joint_states"]["messages"] == 0
    assert result["count_mismatch"] == {"/joint_states": {"listed": 30, "read": 0}}
    assert "warning: " in err and "/joint_states: the recording lists 30 message(s)" in err
    code, out, _ = run_cli("replay", str(folder), "--dry-run", "--no-progress")
    assert _table_row(out, "/joint_states")[3] == "0" and "count mismatch: /joint_states" in out


def test_under_json_a_bad_episode_split_is_a_json_error(run_cli: RunCli, tmp_path: Path) -> None:
    good = _odometry_recording(tmp_path / "good.mcap")
    code, out, err = run_cli("--json", "replay", str(good), "--episode-split", "gap:abc")
    assert code == 2 and out == ""
    error = json.loads(err)["error"]
    assert error["field"] == "episode_split" and error["code"] == "validation_error"


def test_under_json_a_store_that_stays_locked_is_a_storage_error(
        run_cli: RunCli, tmp_path: Path, robotmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, _ = run_cli("replay", str(_odometry_recording(tmp_path / "first.mcap", 10)), "--no-progress")
    assert code == 0  # the store exists
    monkeypatch.setenv("ROBOTMEM_BUSY_TIMEOUT_MS", "100")
    holder = apsw.Connection(str(robotmem_home / "memory.db"))
    holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        code, _, err = run_cli("--json", "replay", str(_odometry_recording(tmp_path / "second.mcap", 30)),
                               "--no-progress")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    errors = [json.loads(line)["error"] for line in err.splitlines() if line.startswith("{")]
    assert [e["code"] for e in errors] == ["storage_error"] and "second.mcap" in errors[0]["message"]


def test_a_bag_folder_a_store_holds_from_before_is_not_stored_again_and_other_files_change_nothing(
        run_cli: RunCli, datasets: Path, robotmem_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "arm"
    shutil.copytree(datasets / "arm_push_ros2", folder)
    earlier = hashlib.sha256()  # the digest replay gave a bag folder before: every file's name and bytes
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        earlier.update(file.relative_to(folder).as_posix().encode("utf-8") + b"\0" + file.read_bytes())
    prefix = session_id_prefix(earlier.hexdigest(), "default")
    with Memory(robotmem_home / "memory.db") as mem:  # the store as a replay before this change left it
        before = Pipeline(mem, BridgeConfig(), collection="default", robot_id=None, episode_policy=TopicEpisodes(),
                          source=str(folder.resolve()), session_id_for=lambda t: f"{prefix}_{t}")
        with open_reader(folder) as reader:
            for msg in reader.iter_messages():
                before.feed(msg)
        stored = before.close()
    assert stored.episodes_ended == 3
    code, out, _ = run_cli("replay", str(folder), *SPLIT, "--no-progress")
    assert code == 0 and "episodes: 0 new, 3 already stored" in out and "records written: 0" in out

    fresh = tmp_path / "fresh"
    code, out, _ = run_cli("--home", str(fresh), "replay", str(folder), *SPLIT, "--no-progress")
    assert code == 0 and "episodes: 3 new" in out
    (folder / "NOTES.txt").write_text("operator notes")
    metadata = folder / "metadata.yaml"
    metadata.write_text(yaml.safe_dump(yaml.safe_load(metadata.read_text())))
    code, out, _ = run_cli("--home", str(fresh), "replay", str(folder), *SPLIT, "--no-progress")
    assert code == 0 and "episodes: 0 new, 3 already stored" in out and "records written: 0" in out


def test_a_bag_folder_is_hashed_once_and_the_legacy_digest_only_when_it_can_matter(
        run_cli: RunCli, datasets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashing reads the whole recording (tens of seconds for a multi-GB bag): the claim and the
    session prefix share one content digest, and the pre-upgrade digest is computed only when the
    collection holds replayed episodes of another prefix, which it could be."""
    folder = tmp_path / "arm"
    shutil.copytree(datasets / "arm_push_ros2", folder)
    storage = {p for p in folder.iterdir() if p.suffix == ".db3"}
    assert storage
    hashed: list[Path] = []
    digest_of = discovery._digest

    def counting_digest(recording: Path, files: list[Path]) -> str:
        hashed.extend(files)
        return digest_of(recording, files)

    monkeypatch.setattr(discovery, "_digest", counting_digest)
    code, out, err = run_cli("replay", str(folder), *SPLIT, "--no-progress")  # an empty store
    assert code == 0 and "episodes: 3 new" in out, err
    assert sorted(hashed) == sorted(storage)  # every storage file read once, metadata.yaml never
    hashed.clear()
    code, out, _ = run_cli("replay", str(folder), *SPLIT, "--no-progress")  # its own episodes stored
    assert code == 0 and "episodes: 0 new, 3 already stored" in out
    assert sorted(hashed) == sorted(storage)

    other = tmp_path / "other"  # the same bag with one byte more: another recording, same collection
    shutil.copytree(folder, other)
    with open(min(p for p in other.iterdir() if p.suffix == ".db3"), "ab") as handle:
        handle.write(b"\0")
    hashed.clear()
    code, out, _ = run_cli("replay", str(other), *SPLIT, "--no-progress")
    assert code == 0
    other_storage = sorted(p for p in other.iterdir() if p.suffix == ".db3")
    # the collection holds replayed episodes of another prefix: the legacy digest (metadata.yaml too) is looked at
    assert sorted(hashed) == sorted(other_storage + other_storage + [other / "metadata.yaml"])


def test_a_topic_name_holding_an_escape_sequence_is_shown_escaped_and_kept_whole_in_json(
        run_cli: RunCli, tmp_path: Path) -> None:
    """The names come from the recording: as robotmem's other commands, replay's text output writes
    their control characters as escapes a terminal shows rather than obeys; --json keeps them."""
    topic = "/odom\x1b]0;pwned\x07\x9b31m"
    recording = write_mcap(tmp_path / "odd.mcap", [
        Msg(topic, "nav_msgs/msg/Odometry", (100 + i) * S, odometry((100 + i) * S, i / 10, 0.0)) for i in range(30)])
    code, out, err = run_cli("replay", str(recording), "--no-progress", "--dry-run")
    assert code == 0, err
    assert "/odom\\x1b]0;pwned\\x07\\x9b31m" in out
    assert not any(c in out + err for c in "\x1b\x07\x9b")
    code, out, err = run_cli("--json", "replay", str(recording), "--no-progress", "--dry-run")
    assert code == 0, err
    assert "\\u001b" in out and "\\u009b" in out and not any(c in out for c in "\x1b\x07\x9b")
    (result,) = json.loads(out)["recordings"]
    assert result["selected_topics"] == [topic]

    undecodable = tmp_path / "undecodable.mcap"  # the warning on stderr names the topic and the schema
    with open(undecodable, "wb") as handle:
        writer = McapWriter(handle)
        writer.start(profile="", library="robotmem-tests")
        channel = writer.register_channel(topic, "protobuf", writer.register_schema("foo\x1b[2J.Bar", "protobuf", b""))
        for i in range(3):
            writer.add_message(channel, (100 + i) * S, b"\x08\x01", (100 + i) * S)
        writer.finish()
    code, out, err = run_cli("replay", str(undecodable), "--no-progress", "--dry-run", "--topics", topic)
    assert code == 0, err
    (warning,) = [line for line in err.splitlines() if "could not be decoded" in line]
    assert "/odom\\x1b]0;pwned\\x07\\x9b31m: 3 message(s)" in warning
    assert not any(c in out + err for c in "\x1b\x07\x9b")
