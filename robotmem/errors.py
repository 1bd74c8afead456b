"""The exceptions robotmem raises.

Every error has one root, so a caller can catch everything robotmem raises with
one ``except RobotMemError``::

    RobotMemError
    ├── ValidationError      bad input; ``field`` names the offending parameter
    ├── NotFoundError        an id that does not exist (or no longer accepts the call)
    ├── ConflictError        a valid request that contradicts the stored state
    ├── StorageError         the database failed underneath us (disk full, lost connection, ...)
    ├── EmbeddingUnavailableError  the embedding model is not installed or cannot be built
    └── ConfigError          a configuration value or file is unusable

Errors are raised inside the package and translated only at the edges (CLI, MCP),
where ``to_dict()`` gives the wire shape ``{"code", "field", "message"}``.
"""

from __future__ import annotations

from typing import Any

# The message helpers (MESSAGE_MAX_CHARS, brief) are importable but not listed: __all__
# is the error classes.
__all__ = [
    "ConfigError",
    "ConflictError",
    "EmbeddingUnavailableError",
    "NotFoundError",
    "ReadOnlyStoreError",
    "RobotMemError",
    "StorageError",
    "ValidationError",
]

#: Messages (and the field names in them) are cut to this many characters: a rejected
#: 10 MB value must not come back as a 10 MB error or land whole in the log.
MESSAGE_MAX_CHARS = 500
_FIELD_MAX_CHARS = 200
_VALUE_MAX_CHARS = 60


def brief(value: Any) -> str:
    """``repr(value)`` for a message, cut to a few dozen characters with the full length noted."""
    shown = repr(value)
    if len(shown) <= _VALUE_MAX_CHARS:
        return shown
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(shown)} characters as text"
    return f"{shown[:_VALUE_MAX_CHARS]}... ({size})"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters, cut)"


class RobotMemError(Exception):
    """Root of every error robotmem raises."""

    code = "internal_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        message = _cut(message, MESSAGE_MAX_CHARS)
        super().__init__(message)
        self.message = message
        self.field = None if field is None else _cut(field, _FIELD_MAX_CHARS)

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "field": self.field, "message": self.message}


class ValidationError(RobotMemError):
    """A parameter failed validation; ``field`` names it (dot path for nested values)."""

    code = "validation_error"


class NotFoundError(RobotMemError):
    """A memory or session id that does not exist."""

    code = "not_found"


class ConflictError(RobotMemError):
    """A valid request that the stored state forbids (for example: writing into an ended session)."""

    code = "conflict"


class StorageError(RobotMemError):
    """The database failed. The message is safe to show; the cause is chained.

    ``advice`` says what happened and what to do without naming paths or SQL (disk full,
    read-only file, I/O error, ...), so servers can pass it on to remote clients.

    ``transient`` tells a caller that retries (the live bridge's outbox) whether the same call
    may succeed later unchanged. Each backend sets it where it translates its own error, by one
    rule: the connection, a lock or another writer, the server's or the disk's resources, an
    operator stopping the server are transient; a statement the database refuses for what it
    holds (a value past a limit, a constraint, an SQL error) is not: it fails again the same way.
    """

    code = "storage_error"

    def __init__(self, message: str, *, field: str | None = None, advice: str | None = None,
                 transient: bool = True) -> None:
        super().__init__(message, field=field)
        self.advice = advice
        self.transient = transient


class ReadOnlyStoreError(StorageError):
    """A write to a store that can only be read (read-only media or file permissions). Reads
    still work; the code stays ``storage_error``, so remote clients see what they always saw."""


class ConfigError(RobotMemError):
    """A configuration value, environment variable or config file is unusable."""

    code = "config_error"


class EmbeddingUnavailableError(RobotMemError):
    """The embedding model is missing or cannot be built; recall falls back to BM25."""

    code = "embedding_unavailable"
