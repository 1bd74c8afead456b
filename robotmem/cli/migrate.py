"""``robotmem migrate --to DEST``: copy the store named by --db / --url into another (see docs/fleet.md)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["cmd_migrate", "register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="Copy every memory, session and vector into another store (SQLite file or PostgreSQL URL).",
        description="Copy the store named by --db / --url (or $ROBOTMEM_URL) into DEST: a SQLite file or a "
                    "postgresql:// URL. Streams in batches with a progress bar; vectors are copied, not recomputed; "
                    "ids are kept, so running it again after a stop continues where it stopped.",
    )
    parser.add_argument("--to", dest="migrate_to", required=True, metavar="DEST",
                        help="target: a SQLite file path or postgresql://user@host/db")
    parser.add_argument("--batch", dest="migrate_batch", type=int, default=500, help="memories per transaction")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> Any:
    from ..config import check_postgres_url, is_postgres_url
    from ..errors import NotFoundError, ValidationError
    from ..store.backend import open_store
    from ..store.copy import copy_store
    from .output import progress_bar
    from .store import load_config, require_existing

    if args.migrate_batch < 1:
        raise ValidationError("--batch must be at least 1", field="batch")
    config = load_config(args)
    # Both ends are checked before either is opened: opening a missing source file would create
    # it, and the target would get robotmem's tables for a copy of nothing.
    require_existing(args, config)
    if is_postgres_url(args.migrate_to):  # named as --to, and before the source is opened
        check_postgres_url(args.migrate_to, field="to", error=ValidationError)
    source = open_store(config.store_location)
    try:
        if source.schema_version() == 0:
            # A database without robotmem's tables (a mistyped URL, an empty file) is not a source:
            # migrating it would create them there for a copy of nothing.
            where = "--url" if config.url is not None else "--db"
            raise NotFoundError(f"no memory store at {config.store_label}: it holds no robotmem tables", field=where)
        source.migrate()
        target = open_store(args.migrate_to)
        try:
            target.migrate()
            copied = copy_store(source, target, batch=args.migrate_batch,
                                progress=progress_bar("migrate", not args.no_progress))
        finally:
            target.close()
    finally:
        source.close()
    if not is_postgres_url(args.migrate_to):  # PostgreSQL's indexes are built by copy_store already
        copied["vector_indexes"] = _write_snapshots(args.migrate_to, config)
    return copied


def _write_snapshots(path: str, config: Any) -> list[dict[str, Any]]:
    """A copy into an embedded store ends as an import into it does: the vector snapshots of its
    large collections are written (the active model's), or the next process's first recall loaded
    an exact float32 mirror of each (1.5 KB a vector)."""
    from ..service import Memory

    with Memory(path, config=config) as memory:
        return memory.write_stale_vector_indexes()
