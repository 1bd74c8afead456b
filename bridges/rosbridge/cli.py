"""``robotmem bridge``: run the live bridge until SIGINT/SIGTERM, then flush and summarise.

Registered through the ``robotmem.commands`` entry point (``robotmem/`` never imports
``bridges/``); ``python -m bridges.rosbridge`` runs the same command standalone.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from bridges import BRIDGE_CONFIG_NAME
from robotmem.config import Config
from robotmem.errors import ConfigError, RobotMemError

if TYPE_CHECKING:  # roslibpy and the pipeline load when the command runs (and may be missing)
    from robotmem import Memory

    from .bridge import BridgeOptions

__all__ = ["add_arguments", "register", "run"]

LOG = logging.getLogger("bridges.rosbridge")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bridge", help="Ingest a live robot through rosbridge (websocket) and answer ROS-side recalls.",
        description="Connect to a rosbridge v2 server, turn its topics into episodes, trajectories and "
                    "perceptions, and answer recall requests from ROS nodes. Stops cleanly on SIGINT/SIGTERM.")
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="ws://127.0.0.1:9090", help="rosbridge websocket (default %(default)s)")
    parser.add_argument("--config", type=Path, default=None,
                        help=f"bridge config: topic rules, chunking, episodes (default: HOME/{BRIDGE_CONFIG_NAME} "
                             "when present, as for replay)")
    # SUPPRESS: the robotmem root parser has --collection too; an absent option here must not
    # overwrite the value given there (argparse copies sub-parser defaults over it).
    parser.add_argument("--collection", default=argparse.SUPPRESS,
                        help="collection to write into (default: configured)")
    parser.add_argument("--robot-id", default=None, help="robot.id stored with every record")
    parser.add_argument("--status-interval", type=float, default=5.0, metavar="SECONDS",
                        help="seconds between status lines (default %(default)s)")
    parser.add_argument("--queue-size", type=int, default=20_000,
                        help="messages buffered before drops are counted (default %(default)s)")
    parser.add_argument("--queue-mb", type=float, default=256.0, metavar="MB",
                        help="megabytes of messages buffered before drops are counted (default %(default)g; "
                             "the bound that matters for camera frames and point clouds)")
    parser.add_argument("--held-mb", type=float, default=64.0, metavar="MB",
                        help="megabytes of records held for a busy or unreachable store before the oldest "
                             "are given up (counted; default %(default)g)")
    parser.add_argument("--reconnect-max", type=float, default=2.0, metavar="SECONDS",
                        help="longest wait between reconnect attempts (default %(default)s; the first comes "
                             "within 0.3 s of losing the server)")
    parser.add_argument("--no-recall", action="store_true", help="do not answer /robotmem/recall/request")
    parser.add_argument("--dry-run", action="store_true", help="convert and count, write nothing")


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("roslibpy") is None:
        print("error: bridge needs roslibpy: pip install 'robotmem[ros]'", file=sys.stderr)
        return 1
    from bridges.pipeline.config import default_bridge_config_path, load_bridge_config

    from .bridge import RosBridge

    _configure_logging()
    try:
        options = _options(args)
        home = Config.load(home=getattr(args, "home", None)).home
        config = load_bridge_config(args.config or default_bridge_config_path(home))
        memory = _open_memory(args, options.collection)
    except RobotMemError as exc:
        return _fail(args, exc)
    if options.dry_run:
        # Answering a recall marks what it returns as accessed (a write); without a store
        # there are no control sessions to follow.
        options = dataclasses.replace(options, recall=False, follow_control_sessions=memory is not None)
    stop = threading.Event()
    _install_signal_handlers(stop)
    bridge = RosBridge(memory, config, options, status_sink=_print_err)
    try:
        bridge.start()
        _print_err(f"bridge: connecting to {options.url}, writing to collection {options.collection!r} "
                   f"(Ctrl-C or SIGTERM stops and flushes)")
        stop.wait()
        _print_err("bridge: stopping, flushing what was received ...")
    finally:
        snapshot = bridge.stop()
        if memory is not None:
            memory.close()
    if getattr(args, "json", False):
        print(json.dumps(snapshot.as_dict(), indent=2))
    _print_err(bridge.summary())
    return 0


def _options(args: argparse.Namespace) -> BridgeOptions:
    from bridges.pipeline.outbox import RetryPolicy

    from .bridge import BridgeOptions
    from .connection import validate_url

    validate_url(args.url)
    if args.queue_size < 1:
        raise ConfigError("--queue-size must be at least 1", field="queue_size")
    for name in ("queue_mb", "held_mb"):
        if not 1 <= getattr(args, name) * 2**20 < float("inf"):
            raise ConfigError(f"--{name.replace('_', '-')} must be a number of megabytes, at least 1 byte",
                              field=name)
    if not args.status_interval > 0:
        raise ConfigError("--status-interval must be positive", field="status_interval")
    if not args.reconnect_max > 0:
        raise ConfigError("--reconnect-max must be positive", field="reconnect_max")
    collection = getattr(args, "collection", None) or Config.load(home=getattr(args, "home", None)).collection
    return BridgeOptions(url=args.url, collection=collection, robot_id=args.robot_id,
                         queue_capacity=args.queue_size, queue_max_bytes=int(args.queue_mb * 2**20),
                         write_retry=RetryPolicy(max_pending_bytes=int(args.held_mb * 2**20)),
                         status_interval_s=args.status_interval,
                         reconnect_max_s=args.reconnect_max, recall=not args.no_recall, dry_run=args.dry_run)


def _open_memory(args: argparse.Namespace, collection: str) -> Memory | None:
    """The store; a dry run only reads an existing one (which sessions exist) and never creates it."""
    from robotmem import Memory

    config = Config.load(home=getattr(args, "home", None), db_path=getattr(args, "db", None),
                         url=getattr(args, "store_url", None))
    if args.dry_run:
        if config.url is None and not config.database.exists():
            return None
        return Memory(config.store_location, collection=collection, embedder=None, config=config)
    return Memory(config.store_location, collection=collection, config=config)


def _install_signal_handlers(stop: threading.Event) -> None:
    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)


def _configure_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _print_err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _fail(args: argparse.Namespace, exc: RobotMemError) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": exc.to_dict()}))
    _print_err(f"robotmem bridge: {exc.message}")
    return 2
