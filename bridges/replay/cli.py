"""``robotmem replay PATH... [--topics T...] [--collection NAME] [--robot-id ID]
[--episode-split file|gap:SECONDS|topic:/robotmem/episode] [--dry-run]``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridges import BRIDGE_CONFIG_NAME
# robotmem's CLI output rules (README): a recording's topic and type names and the reasons
# derived from them reach the terminal escaped, and --json losslessly, as every command's output.
from robotmem.cli.output import emit, json_text, shown
from robotmem.config import Config
from robotmem.errors import ConfigError, RobotMemError

from .distros import DEFAULT_ROS_DISTRO, ROS_DISTROS

if TYPE_CHECKING:  # the pipeline and the readers load when the command runs: `robotmem --help` stays quick
    from robotmem import Memory

    from .replay import RecordingResult

__all__ = ["register", "run"]

def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="Replay ROS recordings (.bag, .mcap, ROS 2 bag folders) into memory.",
        description="Read ROS 1 bags, ROS 2 bag folders (sqlite3 or mcap) and plain .mcap files and store "
        "their episodes: trajectories, joint states, thumbnails, scan summaries and learned notes. "
        "Idempotent: replaying a recording again stores nothing new. Put --topics after the paths "
        "(or end the list with --).",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="recordings or folders of recordings")
    parser.add_argument("--topics", nargs="+", action="extend", metavar="T",
                        help="only these topics (a topic no rule covers is stored as JSON, one message per second)")
    parser.add_argument("--collection", dest="replay_collection", metavar="NAME", help="collection to store into")
    parser.add_argument("--robot-id", metavar="ID", help="robot.id recorded with every record")
    parser.add_argument("--episode-split", default="file", metavar="SPLIT",
                        help="file (default) | gap:SECONDS | topic:/robotmem/episode")
    parser.add_argument("--dry-run", action="store_true", help="print what would be stored, write nothing")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help=f"bridge config (default: HOME/{BRIDGE_CONFIG_NAME} when present)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--map", type=Path, metavar="MAP_YAML",
                        help="store this ROS map.yaml (+ image) as an occupancy map the ui and --plot draw paths over")
    parser.add_argument("--plot", type=Path, metavar="DIR",
                        help="draw each replayed episode (path, payload plots) as DIR/SESSION_ID.png (robotmem[plot])")
    parser.add_argument("--ros-distro", default=DEFAULT_ROS_DISTRO, choices=ROS_DISTROS,
                        help="standard message definitions for types a ROS 2 recording does not define "
                             "(default %(default)s)")
    parser.set_defaults(func=run)


def missing_ros_packages() -> list[str]:
    """The reading packages of the ``ros`` extra that are not installed."""
    return [name for name in ("rosbags", "mcap", "mcap_ros2") if importlib.util.find_spec(name) is None]


def run(args: argparse.Namespace) -> int:
    missing = missing_ros_packages()
    if missing:
        print(f"error: replay needs {', '.join(missing)}: pip install 'robotmem[ros]'", file=sys.stderr)
        return 1
    from bridges.pipeline import load_bridge_config, parse_episode_split
    from bridges.pipeline.config import default_bridge_config_path
    from robotmem.view import store_map

    from .readers import RecordingError
    from .replay import ReplayInterrupted, ReplayOptions, replay_paths
    from .report import ProgressBar

    config = Config.load(home=args.home, db_path=args.db, url=getattr(args, "store_url", None))
    collection = args.replay_collection or getattr(args, "collection", None) or config.collection
    try:
        parse_episode_split(args.episode_split)
    except ValueError as exc:
        _say_error(str(exc), as_json=args.json, code="validation_error", field="episode_split")
        return 2
    try:
        bridge_config = load_bridge_config(args.config or default_bridge_config_path(config.home))
    except ConfigError as exc:  # exit 2 like `robotmem bridge` with the same file (docs/bridge.md)
        _say_error(exc.message, as_json=args.json, code=exc.code, field=exc.field, details=exc.to_dict())
        return 2
    options = ReplayOptions(
        topics=tuple(args.topics) if args.topics else None, collection=collection, robot_id=args.robot_id,
        episode_split=args.episode_split, dry_run=args.dry_run, ros_distro=args.ros_distro,
    )
    show_progress = not args.no_progress and not args.json and sys.stderr.isatty()
    failed: list[Path] = []

    def report(path: Path, exc: Exception) -> None:
        failed.append(path)
        text = str(exc)  # a RecordingError names the file already
        _say_error(f"{text if text.startswith(str(path)) else f'{path}: {text}'} (skipped)", as_json=args.json,
                   code=exc.code if isinstance(exc, RobotMemError) else "recording_error")

    memory = _open_memory(config, collection, dry_run=args.dry_run)
    try:
        if args.map and memory is not None and not args.dry_run:
            stored = store_map(memory, args.map, robot_id=args.robot_id, collection=collection)
            _say(f"occupancy map {args.map}: {stored['status']} (memory {stored['memory_id']})")
        results = replay_paths(memory, list(args.paths), bridge_config, options,
                               progress_for=(lambda p: ProgressBar(shown(p.name))) if show_progress else None,
                               on_error=report, before_index=None if args.json else _say_index)
        if args.plot and memory is not None and not args.dry_run:
            _plot_episodes(memory, results, args.plot)
    except RecordingError as exc:  # a path that does not exist or holds no recording
        _say_error(str(exc), as_json=args.json)
        return 1
    except ReplayInterrupted as interrupted:
        _print(interrupted.results, as_json=args.json, dry_run=args.dry_run)
        _say_interrupted(interrupted.results)
        return 130
    finally:
        if memory is not None:
            memory.close()
    _print(results, as_json=args.json, dry_run=args.dry_run)
    _warn_rejected(results)
    _warn_unread(results)
    # Rejected records do not change the exit code: replaying again cannot store them (the
    # recording holds them as they are), so a nightly job would fail forever; the warning and
    # the table name them. A recording that failed as a whole can succeed next time: exit 1.
    return 1 if failed else 0


def _plot_episodes(memory: Memory, results: list[RecordingResult], folder: Path) -> None:
    """One PNG per episode of the replayed recordings (including ones stored by an earlier run)."""
    from robotmem.view import plot_episode

    prefixes = tuple(r.session_prefix for r in results)
    for session in memory.list_sessions():
        if session["session_id"].startswith(prefixes):
            written = plot_episode(memory, session["session_id"], folder / f"{session['session_id']}.png")
            _say(f"wrote {written}")


def _say_index(state: dict[str, Any]) -> None:
    # the build is the replay's last step and takes 19-36 s per million vectors: a pause people should see named
    _say(f"writing the vector snapshot of collection {state['collection']!r} ({state['vectors']:,} vectors; "
         "what `robotmem reindex` does) ...")


def _say_interrupted(results: list[RecordingResult]) -> None:
    written = sum(r.stats.records_written for r in results)
    episodes = sum(r.stats.episodes_ended for r in results)
    full = sum(1 for r in results if r.complete)
    _say(f"interrupted: {full} recording(s) replayed in full, {len(results) - full} in part; "
         f"{written} records and {episodes} complete episode(s) stored. Run the same command again to "
         "continue: stored episodes are skipped, the interrupted one is written again whole.")


def _warn_rejected(results: list[RecordingResult]) -> None:
    for result in results:
        for topic, stats in sorted(result.stats.topics.items()):
            if stats.rejected:
                _say(f"warning: {result.path}: {topic}: {stats.rejected} record(s) refused by robotmem, "
                     f"first because: {stats.rejected_reason}")


def _warn_unread(results: list[RecordingResult]) -> None:
    """Messages of selected topics that never became data: not decodable, or not there to read."""
    for result in results:
        for topic, info in sorted(result.undecodable.items()):
            _say(f"warning: {result.path}: {topic}: {info['messages']} message(s) could not be decoded, "
                 f"first because: {info['reason']}")
        for topic, counts in sorted(result.count_mismatch.items()):
            _say(f"warning: {result.path}: {topic}: the recording lists {counts['listed']} message(s) "
                 f"({result.file_topics[topic].msgtype}), {counts['read']} were read (a type its index names "
                 "that the stored messages do not have?)")


def _open_memory(config: Config, collection: str, *, dry_run: bool) -> Memory | None:
    """A dry run only reads (which episodes exist) and never creates a database."""
    from robotmem import Memory

    if dry_run:
        if config.url is None and not config.database.exists():
            return None
        return Memory(config.store_location, collection=collection, embedder=None, config=config)
    try:
        config.database.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {config.database.parent}: {exc}") from exc
    return Memory(config.store_location, collection=collection, config=config)


def _say(line: str) -> None:
    """A line for people on stderr, escaped as the CLI's text output is (robotmem.cli.output)."""
    print(shown(line), file=sys.stderr)


def _say_error(message: str, *, as_json: bool, code: str = "recording_error", field: str | None = None,
               details: dict[str, Any] | None = None) -> None:
    """An error on stderr (a recording replay could not read or store: ``code`` is then the robotmem
    error's, such as ``storage_error``; a bad option or bridge config): as the other commands' errors
    are under --json (one JSON object per line, ``details`` when given), else as one ``error:`` line."""
    if as_json:
        error = details or {"code": code, "field": field, "message": message}
        print(json_text({"error": error}, sys.stderr, indent=None), file=sys.stderr)
    else:
        _say(f"error ({field}): {message}" if field else f"error: {message}")


def _print(results: list[RecordingResult], *, as_json: bool, dry_run: bool) -> None:
    from .report import plan_lines, summary_table

    def lines(results: list[RecordingResult]) -> Iterator[str]:
        for result in results:
            yield from plan_lines(result) if dry_run else []
            yield from summary_table(result)

    emit({"dry_run": dry_run, "recordings": [r.as_dict() for r in results]} if as_json else results, as_json, lines)
