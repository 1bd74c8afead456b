"""Offline replay: recordings -> the shared pipeline -> robotmem, as fast as the data allows.

Idempotent: replaying a recording again stores nothing new, whatever options it was first
replayed with. The rule (session ids ``rpl_<hash16>_<start_ns>``, episodes stored under
other options, notes outside episodes, episodes a crashed run left open) is stated once, in
docs/replay.md, "Idempotency"; ``stored_until_ns`` and the pipeline's session checks apply it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridges.pipeline import (
    BridgeConfig,
    Pipeline,
    PipelineStats,
    TopicRule,
    parse_episode_split,
)
from bridges.pipeline.episodes import EpisodePolicy
from robotmem.errors import ConflictError, RobotMemError

from .discovery import content_digest, find_recordings, legacy_digest, session_id_prefix
from .readers import DEFAULT_ROS_DISTRO, RecordingDamaged, RecordingError, TopicInfo, open_reader

if TYPE_CHECKING:
    from robotmem import Memory

__all__ = ["RecordingResult", "ReplayInterrupted", "ReplayOptions", "recording_prefix", "replay_paths", "replay_recording",
           "select_topics", "stored_session_ids", "stored_until_ns"]

#: a topic asked for with --topics that no rule covers is stored as JSON at this rate
REQUESTED_TOPIC_SAMPLE_S = 1.0
#: how often (messages) the progress callback runs
PROGRESS_EVERY = 2000

Progress = Callable[[int, "int | None"], None]

#: the ids replay gives the episodes it stores: session_id_prefix's ``rpl_<hash16>``, then ``_<start_ns>``
_REPLAY_SESSION_ID = re.compile(r"rpl_[0-9a-f]{16}_\d+")


@dataclass(frozen=True)
class ReplayOptions:
    #: only these topics (None: every topic a rule covers)
    topics: tuple[str, ...] | None = None
    collection: str = "default"
    robot_id: str | None = None
    #: "file" | "gap:SECONDS" | "topic:/name"
    episode_split: str = "file"
    dry_run: bool = False
    #: standard message definitions for types a ROS 2 recording does not define
    ros_distro: str = DEFAULT_ROS_DISTRO


@dataclass
class RecordingResult:
    path: Path
    session_prefix: str
    stats: PipelineStats
    seconds: float
    #: every topic in the file
    file_topics: dict[str, TopicInfo]
    #: the topics that were read
    selected: list[str]
    #: topics asked for with --topics that the file does not have
    missing: list[str] = field(default_factory=list)
    #: dry run: what would have been written
    plan: list[dict[str, Any]] = field(default_factory=list)
    #: where the message definitions came from -> the types (readers.py)
    type_sources: dict[str, list[str]] = field(default_factory=dict)
    #: False: the replay was interrupted (Ctrl-C) before the end of the recording
    complete: bool = True
    #: topic -> {"messages": N, "reason": why the first could not be decoded} (counted as malformed too)
    undecodable: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: topic -> {"listed": what the recording's index says it holds, "read": what was read} where
    #: they differ after a complete replay (a metadata.yaml naming another type than the storage)
    count_mismatch: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "complete": self.complete,
            "undecodable": self.undecodable,
            "count_mismatch": self.count_mismatch,
            "type_sources": self.type_sources,
            "session_prefix": self.session_prefix,
            "seconds": round(self.seconds, 3),
            "selected_topics": self.selected,
            "ignored_topics": {t: i.count for t, i in sorted(self.file_topics.items()) if t not in self.selected},
            "missing_topics": self.missing,
            "stats": self.stats.as_dict(),
            **({"plan": self.plan} if self.plan else {}),
        }


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C during a replay: what was replayed up to then (the last one incomplete)."""

    def __init__(self, results: list[RecordingResult]) -> None:
        super().__init__("replay interrupted")
        self.results = results


def select_topics(
    config: BridgeConfig, file_topics: dict[str, TopicInfo], requested: tuple[str, ...] | None, policy: EpisodePolicy
) -> tuple[BridgeConfig, list[str], list[str]]:
    """(config with any extra rules, topics to read, requested topics the file lacks)."""
    extra: list[TopicRule] = []
    marker = policy.marker_topic
    if marker is not None and marker in file_topics and not any(
        r.converter == "episode" for r in config.rules_for(marker, file_topics[marker].msgtype)
    ):
        extra.append(TopicRule(marker, None, "episode"))
    if requested is None:
        wanted = list(file_topics)
        missing: list[str] = []
    else:
        wanted = [t for t in requested if t in file_topics]
        missing = [t for t in requested if t not in file_topics]
        for topic in wanted:
            if not config.rules_for(topic, file_topics[topic].msgtype):
                extra.append(TopicRule(topic, None, "json_perception", sample_every_s=REQUESTED_TOPIC_SAMPLE_S))
        if marker is not None and marker in file_topics and marker not in wanted:
            wanted.append(marker)
    if extra:
        config = dataclasses.replace(config, topics=tuple(extra) + config.topics)
    selected = sorted(t for t in wanted if config.rules_for(t, file_topics[t].msgtype))
    return config, selected, missing


def stored_session_ids(memory: Memory | None, collection: str) -> list[str]:
    """Every session id of ``collection`` (read once per run: the store has no prefix lookup)."""
    if memory is None:
        return []
    return [s["session_id"] for s in memory.list_sessions(collection=collection, limit=sys.maxsize)]


def stored_until_ns(memory: Memory | None, prefix: str, session_ids: Sequence[str]) -> int | None:
    """The latest message time the recording's stored episodes (ids ``<prefix>_<start_ns>``)
    cover, from their records' ``episode.t_end_ns`` and their starts; None when none is stored."""
    if memory is None:
        return None
    reach: int | None = None
    for session_id in session_ids:
        start = session_id.removeprefix(prefix + "_")
        if start == session_id or not start.isdigit():
            continue
        timeline = memory.session_timeline(session_id)
        contexts = [timeline["session"].get("context") or {}] + [m.get("context") or {} for m in timeline["memories"]]
        times = [int(start)] + [value for context in contexts for key in ("t_start_ns", "t_end_ns")
                                if isinstance(episode := context.get("episode"), dict)
                                and isinstance(value := episode.get(key), int)]
        reach = max(times) if reach is None else max(reach, *times)
    return reach


def recording_prefix(path: Path, collection: str, stored_sessions: Sequence[str], digest: str | None = None) -> str:
    """The recording's session id prefix (docs/replay.md, "Idempotency"): from its content digest
    (``digest``, when the caller has it: hashing a multi-GB bag takes seconds), or, for a bag folder
    a store already holds under the digest replay used before (which hashed metadata.yaml too),
    that one, so upgrading does not store its episodes again."""
    prefix = session_id_prefix(content_digest(path) if digest is None else digest, collection)
    if not path.is_dir() or any(s.startswith(prefix + "_") for s in stored_sessions):
        return prefix
    # The legacy digest reads every storage file again: only worth it when the collection holds
    # some replayed episode (``rpl_<hash16>_<start_ns>``) that is not this one's.
    if not any(_REPLAY_SESSION_ID.fullmatch(s) for s in stored_sessions):
        return prefix
    legacy = legacy_digest(path)
    if legacy is not None:
        earlier = session_id_prefix(legacy, collection)
        if any(s.startswith(earlier + "_") for s in stored_sessions):
            return earlier
    return prefix


def replay_recording(
    memory: Memory | None, path: Path, config: BridgeConfig, options: ReplayOptions, progress: Progress | None = None,
    stored_sessions: Sequence[str] | None = None,
) -> RecordingResult:
    """Replay one recording (a .bag, a .mcap or a ROS 2 bag folder) into ``memory``.

    ``stored_sessions``: the collection's session ids before the run (``stored_session_ids``;
    listed here when not given)."""
    started = time.perf_counter()
    # The claim is named by the recording's digest (the episode ids may keep an older one: recording_prefix).
    digest = content_digest(path)
    claim = session_id_prefix(digest, options.collection)
    with contextlib.ExitStack() as claimed:
        if memory is not None and not options.dry_run:  # a dry run writes nothing: nothing to keep out of
            try:
                # Held until this recording is done, or this process ends (docs/replay.md, Idempotency).
                claimed.enter_context(memory.exclusive(claim))
            except ConflictError as exc:
                raise ConflictError(
                    f"another replay of this recording into collection {options.collection!r} is running "
                    f"({exc.message}); not replayed a second time meanwhile: run the command again once it "
                    "has finished", field="path") from exc
        return _replay_claimed(memory, path, digest, config, options, progress, stored_sessions, started)


def _replay_claimed(
    memory: Memory | None, path: Path, digest: str, config: BridgeConfig, options: ReplayOptions,
    progress: Progress | None, stored_sessions: Sequence[str] | None, started: float,
) -> RecordingResult:
    """replay_recording's work, once no other process replays the recording into the collection."""
    policy = parse_episode_split(options.episode_split)
    if stored_sessions is None:
        stored_sessions = stored_session_ids(memory, options.collection)
    prefix = recording_prefix(path, options.collection, stored_sessions, digest)
    stored_until = stored_until_ns(memory, prefix, stored_sessions)
    # The pipeline decides which stamps to believe (pipeline/stamps.py), one rule for the replay
    # and the live bridge, and counts the stamps it replaces.
    with open_reader(path, options.ros_distro) as reader:
        file_topics = reader.topics()
        run_config, selected, missing = select_topics(config, file_topics, options.topics, policy)
        pipeline = Pipeline(
            memory, run_config, collection=options.collection, robot_id=options.robot_id, episode_policy=policy,
            source=str(path.resolve()), dry_run=options.dry_run, session_id_for=lambda start_ns: f"{prefix}_{start_ns}",
            note_key_for=lambda t_ns: f"{prefix}_note_{t_ns}",
            background_writes=True, stored_until_ns=stored_until,
        )
        counts = [file_topics[t].count for t in selected]
        total = None if any(c is None for c in counts) else sum(c or 0 for c in counts)
        done = 0
        feed = pipeline.feed

        def result(stats: PipelineStats, complete: bool) -> RecordingResult:
            undecodable: dict[str, dict[str, Any]] = {}
            for topic, count in reader.undecodable.items():  # read from the file, but not decodable
                stats.topic(topic).messages += count
                stats.topic(topic).malformed += count
                undecodable[topic] = {"messages": count, "reason": reader.undecodable_reason.get(topic, "")}
            mismatch: dict[str, dict[str, int]] = {}
            for topic in selected:  # every selected topic has a row, the ones nothing was read from too
                row = stats.topic(topic)
                row.msgtype = row.msgtype or file_topics[topic].msgtype
                rules = run_config.rules_for(topic, file_topics[topic].msgtype)
                row.converter = row.converter or (rules[0].converter if rules else "")
                listed = file_topics[topic].count
                if complete and listed is not None and listed != row.messages:
                    mismatch[topic] = {"listed": listed, "read": row.messages}
            return RecordingResult(path, prefix, stats, time.perf_counter() - started, file_topics, selected,
                                   missing, pipeline.plan, reader.type_sources, complete, undecodable, mismatch)

        try:
            for message in reader.iter_messages(topics=selected):
                feed(message)
                done += 1
                if progress is not None and done % PROGRESS_EVERY == 0:
                    progress(done, total)
            stats = pipeline.close()
        except RecordingDamaged as exc:
            # Replaying it again would stop at the same byte, so an episode left open would stay
            # open for ever: what was read before the damage is stored and its episode ended.
            stats = pipeline.close()
            raise RecordingDamaged(f"{exc}; {_kept(stats, options.dry_run)}", exc.messages, exc.log_ns) from exc
        except KeyboardInterrupt as exc:
            pipeline.abandon()  # the open episode stays open: the next run rewrites it whole
            raise ReplayInterrupted([result(pipeline.stats, complete=False)]) from exc
        except BaseException:
            pipeline.abandon()  # the writer's thread stops; the open episode is rewritten next time
            raise
        finished = result(stats, complete=True)
    if progress is not None:
        progress(done, total if total is not None else done)
    return finished


def _kept(stats: PipelineStats, dry_run: bool) -> str:
    """What a damaged recording's replay kept of the part before the damage (its error line says it)."""
    if not stats.episodes_ended and not stats.episodes_skipped:
        return "nothing before the damage was stored"
    verb = "would be" if dry_run else "were"
    stored = (f"{stats.records_written} records of the messages before the damage {verb} stored and "
              f"{stats.episodes_ended} episode(s) ended" if stats.episodes_ended else "")
    skipped = f"{stats.episodes_skipped} episode(s) before the damage already stored" if stats.episodes_skipped else ""
    return "; ".join(part for part in (stored, skipped) if part)


def replay_paths(
    memory: Memory | None,
    paths: list[Path],
    config: BridgeConfig,
    options: ReplayOptions,
    progress_for: Callable[[Path], Progress | None] | None = None,
    on_error: Callable[[Path, Exception], None] | None = None,
    before_index: Callable[[dict[str, Any]], None] | None = None,
) -> list[RecordingResult]:
    """Replay every recording the paths name (files, bag folders, folders of recordings).

    A recording that cannot be read (RecordingError) or whose replay the store fails
    (a robotmem StorageError, for example) raises, or, with ``on_error``, is reported there
    and skipped so the others are still replayed (a nightly job). A record or note robotmem
    refuses is not a failure of the recording: it is counted as ``rejected`` (writer.py).
    At the end, as an import ends, the vector indexes the replay left missing or stale are
    written (``Memory.write_stale_vector_indexes``; ``before_index`` is told of each before it is).
    """
    results: list[RecordingResult] = []
    recordings = find_recordings(paths)
    # Before this run: episodes it writes itself are found by their ids (a recording twice in the folder).
    stored = stored_session_ids(memory, options.collection)
    for recording in recordings:
        progress = progress_for(recording) if progress_for is not None else None
        try:
            results.append(replay_recording(memory, recording, config, options, progress, stored))
        except ReplayInterrupted as interrupted:
            interrupted.results = results + interrupted.results
            raise
        except KeyboardInterrupt as exc:  # between recordings, or while hashing one
            raise ReplayInterrupted(results) from exc
        except (RecordingError, RobotMemError) as exc:
            if on_error is None:
                raise
            on_error(recording, exc)
    if memory is not None and not options.dry_run:
        try:
            # As an import ends: without it the next process's first recall on a collection that
            # grew past the index threshold loaded an exact float32 mirror of it (1.5 KB a vector).
            memory.write_stale_vector_indexes(before_index)
        except KeyboardInterrupt as exc:  # every recording is stored: the next run only writes the index
            raise ReplayInterrupted(results) from exc
    return results
