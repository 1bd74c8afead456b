"""Notes outside episodes are stored once: replaying the same file again does not reinforce them."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_paths
from robotmem import Memory

S = 1_000_000_000
T0 = 1_735_689_600 * S
STRING = "std_msgs/msg/String"
ODOM = "nav_msgs/msg/Odometry"
NOTE = "the charging dock is behind the sofa"


def _recording(make_datasets: ModuleType, path: Path) -> None:
    """A note before the first episode, then one episode of driving between markers."""
    messages = [(T0, "/robotmem/learn", STRING, make_datasets.string(NOTE)),
                (T0 + S, "/robotmem/episode", STRING, make_datasets.string("start"))]
    messages += [(T0 + 2 * S + i * S // 10, "/odom", ODOM,
                  make_datasets.odometry(T0 + 2 * S + i * S // 10, 0.05 * i, 0.0, 0.0, 0.5, 0.0)) for i in range(30)]
    messages.append((T0 + 6 * S, "/robotmem/episode", STRING, make_datasets.string("end 1.0")))
    make_datasets.write_mcap(path, messages)


def _the_note(mem: Memory) -> dict:
    (found,) = mem.recall("", n=5, min_confidence=0, context_filter={"source.topic": "/robotmem/learn"})["results"]
    return mem.get(found["id"])


def test_three_replays_leave_a_note_outside_episodes_as_the_first_stored_it(
        tmp_path: Path, make_datasets: ModuleType) -> None:
    path = tmp_path / "dock_note.mcap"
    _recording(make_datasets, path)
    options = ReplayOptions(episode_split="topic:/robotmem/episode")
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        (first,) = replay_paths(mem, [path], BridgeConfig(), options)
        assert first.stats.topics["/robotmem/learn"].records == 1
        stored = _the_note(mem)
        assert stored["context"]["source"]["t_ns"] == T0
        before = (stored["confidence"], stored["evidence_count"], mem.stats())

        for _ in range(2):
            (again,) = replay_paths(mem, [path], BridgeConfig(), options)
            notes = again.stats.topics["/robotmem/learn"]
            assert (notes.records, notes.already_stored) == (0, 1)
            assert again.stats.records_written == 0

        after = _the_note(mem)
        assert (after["id"], after["confidence"], after["evidence_count"], mem.stats()) == (stored["id"], *before)


def test_a_dry_run_after_a_replay_says_the_note_is_already_stored(tmp_path: Path, make_datasets: ModuleType) -> None:
    path = tmp_path / "dock_note.mcap"
    _recording(make_datasets, path)
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        replay_paths(mem, [path], BridgeConfig(), ReplayOptions(episode_split="topic:/robotmem/episode"))
        (dry,) = replay_paths(mem, [path], BridgeConfig(),
                              ReplayOptions(episode_split="topic:/robotmem/episode", dry_run=True))
    assert [step["action"] for step in dry.plan if "insight" in step] == ["skip_note"]


def test_a_note_a_replay_with_other_options_stored_in_its_episode_is_not_stored_again(
        tmp_path: Path, make_datasets: ModuleType) -> None:
    path = tmp_path / "dock_note.mcap"
    _recording(make_datasets, path)
    with Memory(tmp_path / "memory.db", embedder=None) as mem:
        (whole,) = replay_paths(mem, [path], BridgeConfig(), ReplayOptions())  # one episode: the note is in it
        assert whole.stats.topics["/robotmem/learn"].records == 1
        before = mem.stats()
        # With markers the note is outside every episode, and the episode is another cut of stored data.
        (again,) = replay_paths(mem, [path], BridgeConfig(), ReplayOptions(episode_split="topic:/robotmem/episode"))
        notes = again.stats.topics["/robotmem/learn"]
        assert (notes.records, notes.already_stored) == (0, 1)
        assert (again.stats.records_written, again.stats.episodes_stored_by_other_options) == (0, 1)
        assert mem.stats() == before
