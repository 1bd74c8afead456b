"""Opening the store a command names (--home / --db / --url / --collection, the environment, defaults).

Every command, ``serve`` and ``ui`` included, builds its Config here.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from ..config import Config
    from ..service import Memory

__all__ = ["load_config", "open_existing", "open_memory", "require_existing"]


#: Config settings the common options set: (option, argparse dest), so an error names what the user typed.
_OPTION_OF_SETTING = {"home": ("--home", "home"), "db_path": ("--db", "db"), "url": ("--url", "store_url")}


def load_config(args: argparse.Namespace) -> Config:
    from ..config import Config

    try:
        return Config.load(home=getattr(args, "home", None), db_path=getattr(args, "db", None),
                           url=getattr(args, "store_url", None), collection=getattr(args, "collection", None))
    except ConfigError as exc:
        option, dest = _OPTION_OF_SETTING.get(exc.field or "", (None, ""))
        if option is None or getattr(args, dest, None) is None:
            raise  # not from an option given on this command line (the environment, config.json)
        raise ConfigError(exc.message, field=option) from exc


def open_memory(args: argparse.Namespace, *, embedder: Any = "auto", config: Config | None = None) -> Memory:
    """The store named on the command line, created when it does not exist yet (writes);
    ``config``: the command's, when it has loaded it already (load_config otherwise)."""
    from ..service import Memory

    config = load_config(args) if config is None else config
    return Memory(config.store_location, collection=config.collection, embedder=embedder, config=config)


def require_existing(args: argparse.Namespace, config: Config) -> None:
    """Refuse a SQLite store that does not exist (opening it would create an empty file)."""
    if config.url is None and not config.database.is_file():
        where = "--db" if getattr(args, "db", None) else "--home"
        raise NotFoundError(
            f"no memory store at {config.database}; `robotmem demo` writes a demo episode there, "
            f"or point {where} at an existing store", field=where)


def open_existing(args: argparse.Namespace, *, embedder: Any = None, config: Config | None = None) -> Memory:
    """The store named on the command line; a missing one is an error, never an empty new file.
    ``config`` as for open_memory."""
    config = load_config(args) if config is None else config
    require_existing(args, config)
    return open_memory(args, embedder=embedder, config=config)
