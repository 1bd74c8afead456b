"""Boundary checks. Each raises ValidationError naming the offending field."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import os
import re
from pathlib import Path
from datetime import datetime, timezone
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .errors import RobotMemError, ValidationError, brief
from .models import (
    COLLECTION_MAX_CHARS,
    DESCRIPTION_MAX_CHARS,
    DESCRIPTION_MIN_CHARS,
    EPOCH_MAX,
    EPOCH_MIN,
    INSIGHT_MAX_CHARS,
    JSON_MAX_DEPTH,
    JSON_TEXT_MAX_CHARS,
    PERCEPTION_TYPES,
    REASON_MAX_CHARS,
    RECALL_MAX_N,
)

if TYPE_CHECKING:
    import numpy as np

_COLLECTION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*")
_SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


#: The longest name of one folder or file (bytes) that Linux file systems take (ext4, xfs, btrfs, tmpfs):
#: longer ones fail in open() with "File name too long", wherever the path is first used.
_NAME_MAX = 255


def file_path(value: Any, field: str = "path", *, utf8: bool = False,
              error: type[RobotMemError] = ValidationError) -> Path:
    """A file path the operating system can take, as a Path (``~`` expanded).

    Refused, naming ``field``, before open() or SQLite fails on it with a bare ValueError or
    UnicodeEncodeError: what is not text, the empty name, a NUL character, a lone surrogate
    that stands for no byte (os.fsencode cannot encode it), ``~name`` of no user, a folder or
    file name longer than file systems take. ``utf8``: also one that stands for
    a byte that is not UTF-8 (a command line's ``\\udcff``): SQLite, which gets the memory
    store's file, takes strict UTF-8 names only."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or text == "":
        raise error(f"{field} must be a file path, got {brief(value)}", field=field)
    if "\0" in text:
        raise error(f"{field} {brief(text)} holds a NUL character, which no file name can", field=field)
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        raw = None
    if raw is None or (utf8 and not _encodable(text)):
        # Shown as the bytes it stands for (\xff), or the surrogate that stands for none (\ud83d).
        shown = (text.encode("ascii", "backslashreplace") if raw is None else raw).decode("ascii", "backslashreplace")
        raise error(f"{field} {shown} is not valid UTF-8; robotmem's files need UTF-8 path names", field=field)
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~name of no user, or ~ without a home directory
        raise error(f"{field} {brief(text)}: {text.split('/')[0]} names no home directory", field=field) from None
    long = max((part for part in path.parts), key=lambda part: len(os.fsencode(part)), default="")
    if len(os.fsencode(long)) > _NAME_MAX:
        raise error(f"{field} {brief(text)} holds a name of {len(os.fsencode(long))} bytes; file systems take "
                    f"at most {_NAME_MAX}", field=field)
    return path


def optional_callable(value: Any, field: str, what: str) -> Any:
    """``value`` if it is None or callable; ``what`` says what it is called with (for the message)."""
    if value is not None and not callable(value):
        raise ValidationError(f"{field} must be None or a callable {what}, got {type(value).__name__}", field=field)
    return value


def clock_reading(value: Any, field: str = "clock") -> float:
    """What a caller's clock returned: finite epoch seconds. Checked at each reading, before
    it reaches a row: "now" failed float() deep inside a call, NaN a NOT NULL constraint."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(f"{field} must return epoch seconds as a number, got {type(value).__name__}",
                              field=field)
    seconds = value if isinstance(value, int) else float(value)  # an int is compared exactly: 10**400 overflows float
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValidationError(f"{field} must return a finite time, got {seconds}", field=field)
    # Its reading becomes created_at and occurred_at: the range a given occurred_at is held to.
    return epoch_seconds(seconds, field)


def unicode_text(value: str, field: str) -> str:
    """``value`` unchanged if it is valid Unicode. A lone surrogate is what bytes that are not
    UTF-8 become on a command line (os.fsdecode's surrogateescape), or what a JSON ``\\ud800``
    gives; the store keeps UTF-8, so it is refused here, once for every edge, before
    hashing or SQL can fail on it."""
    if not value.isascii() and not _encodable(value):
        raise ValidationError(f"{field} is not valid Unicode text (bytes that are not UTF-8, or a lone surrogate)",
                              field=field)
    return value


def text(value: Any, field: str, *, min_len: int = 1, max_len: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}", field=field)
    stripped = unicode_text(value, field).strip()
    if "\x00" in stripped:
        # PostgreSQL's text cannot hold NUL: refused on both stores, so a SQLite store holds
        # nothing a fleet store (or `migrate` to one) would refuse
        raise ValidationError(f"{field} holds a NUL character (\\x00), which text may not", field=field)
    if len(stripped) < min_len:
        what = "must not be empty" if min_len == 1 else f"must be at least {min_len} characters"
        raise ValidationError(f"{field} {what}", field=field)
    if len(stripped) > max_len:
        raise ValidationError(
            f"{field} is {len(stripped)} characters; the limit is {max_len}", field=field
        )
    return stripped


def insight(value: Any, field: str = "insight") -> str:
    return text(value, field, max_len=INSIGHT_MAX_CHARS)


def description(value: Any, field: str = "description") -> str:
    return text(value, field, min_len=DESCRIPTION_MIN_CHARS, max_len=DESCRIPTION_MAX_CHARS)


def reason(value: Any) -> str:
    return text(value, "reason", max_len=REASON_MAX_CHARS)


def integer(value: Any, field: str, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer, got {type(value).__name__}", field=field)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValidationError(f"{field} must be {bound}, got {value}", field=field)
    return value


def port(value: Any, field: str = "port") -> int:
    """A TCP port to listen on (0: any free one)."""
    return integer(value, field, low=0, high=65535)


def memory_id(value: Any, field: str = "memory_id") -> int:
    return integer(value, field, low=1)


def recall_n(value: Any) -> int:
    return integer(value, "n", low=1, high=RECALL_MAX_N)


def unit_interval(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{field} must be a number, got {type(value).__name__}", field=field)
    # Compared before float(): an int beyond float's range (10**400) overflowed there. NaN fails it.
    if not 0 <= value <= 1:
        raise ValidationError(f"{field} must be between 0 and 1, got {brief(value)}", field=field)
    # + 0.0: -0.0 is 0.0. PostgreSQL kept the sign of an outcome of -0.0 and SQLite does not, so
    # a session moved from one to the other arrived with another outcome_score.
    return float(value) + 0.0


def optional_score(value: Any, field: str = "outcome_score") -> float | None:
    return None if value is None else unit_interval(value, field)


def perception_type(value: Any, field: str = "perception_type") -> str:
    if value not in PERCEPTION_TYPES:
        raise ValidationError(
            f"{field} must be one of {', '.join(PERCEPTION_TYPES)}; got {brief(value)}",
            field=field,
        )
    return str(value)


def collection(value: Any, default: str, field: str = "collection") -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not _COLLECTION_RE.fullmatch(value) or len(value) > COLLECTION_MAX_CHARS:
        raise ValidationError(
            f"{field} must be 1-64 characters of letters, digits, '_', '-', '.', ':' "
            f"starting with a letter or digit; got {brief(value)}",
            field=field,
        )
    return value


def session_id(value: Any, field: str = "session_id") -> str:
    if not isinstance(value, str) or not _SESSION_RE.fullmatch(value):
        raise ValidationError(
            f"{field} must be a session id such as 'ses_1a2b3c4d5e6f'; got {brief(value)}", field=field
        )
    return value


def json_object(value: Any, field: str, *, allow_none: bool = True,
                max_depth: int | None = None) -> dict[str, Any] | None:
    """A JSON object given as a dict or as JSON text (clients send both); ``""`` and ``null`` mean absent.

    ``max_depth``: plain JSON no deeper than this only (``check_json_tree``)."""
    parsed = isinstance(value, str)
    if parsed:
        value = None if value.strip() == "" else parse_json(value, field, max_depth=max_depth)
    elif isinstance(value, dict):
        check_json_tree(value, field, max_depth=max_depth)
    if value is None:
        if allow_none:
            return None
        raise ValidationError(f"{field} is required", field=field)
    if not isinstance(value, dict):
        raise ValidationError(f"{field} must be a JSON object, got {type(value).__name__}", field=field)
    if parsed and max_depth is not None:
        check_json_tree(value, field, max_depth=max_depth)  # parsed text is plain JSON: only the depth can fail
    return value


def json_value(value: Any, field: str) -> Any:
    """A JSON value; a string that opens like an object or array must parse as one (clients double-encode),
    any other string is a plain string value."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        return parse_json(value, field)
    return value


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_NESTING_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_LONG_DIGITS = re.compile(r"\d{19}")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
#: The largest integer SQLite and PostgreSQL store (and take as LIMIT).
INT64_MAX = 2**63 - 1
_INT64 = (-(2**63), INT64_MAX)


def parse_json(text: str, field: str, *, max_depth: int | None = None) -> Any:
    """JSON text given for ``field``, parsed once for every edge (MCP, Python API, command line).

    Every way the text can be unusable is a ValidationError naming the field, never a crash:
    too long, nested deeper than JSON_MAX_DEPTH, or ``max_depth`` when the caller's limit is
    lower (checked before parsing, with check_json_tree's message), malformed, NaN or
    Infinity, a lone surrogate (SQLite stores UTF-8), an integer outside 64 bits.
    """
    if len(text) > JSON_TEXT_MAX_CHARS:
        raise ValidationError(f"{field} is {len(text)} characters of JSON; the limit is {JSON_TEXT_MAX_CHARS}",
                              field=field)
    outside_strings = _JSON_STRING.sub('""', text)
    steps = map(_NESTING_STEP.__getitem__, _NOT_BRACKET.sub("", outside_strings))
    brackets = max(itertools.accumulate(steps, initial=0))
    # A container ``n`` brackets in lies n - 1 levels deep: deeper than max_depth past max_depth + 1
    # (the tree walk finds the rest, a scalar one level further down).
    if brackets > JSON_MAX_DEPTH or (max_depth is not None and brackets > max_depth + 1):
        raise too_deep(field, JSON_MAX_DEPTH if max_depth is None else min(max_depth, JSON_MAX_DEPTH))
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ValidationError(f"{field} is not valid JSON: {detail}", field=field) from exc
    if _LONG_DIGITS.search(outside_strings) or _may_hold_surrogates(text):
        check_json_tree(value, field)
    return value


def check_json_tree(value: Any, field: str, *, max_depth: int | None = None) -> None:
    """Refuse a parsed JSON value SQLite cannot store: too deep, lone surrogates, integers beyond 64 bits.

    The error names the offending place (``context.a``, ``data[3]``). The walk stops at
    JSON_MAX_DEPTH, so depth itself cannot crash it; the place is spelled out only on refusal
    (bulk writes check every context).

    ``max_depth`` (contexts): also refuse what only a Python caller can hand over (keys that
    are not strings or hold NUL, NaN or infinity, values of other types) and any value deeper than
    ``max_depth``, in the same walk. The storable checks still win where both fail, as when
    they ran as a walk of their own before these.
    """
    refused = _refusal(value, 0, max_depth)
    if refused is not None and refused[1] not in _STORABLE_PROBLEMS:
        storable = _refusal(value, 0, None)
        # Too deep for storage is too deep for max_depth as well: that lower limit is the one to state.
        if storable is not None and not (storable[1] is _TOO_DEEP and refused[1] is _NESTED):
            refused = storable
    if refused is None:
        return
    segments, message = refused
    if message is _TOO_DEEP:
        raise too_deep(field, JSON_MAX_DEPTH)
    if message is _NESTED and max_depth is not None:
        raise too_deep(field, max_depth)
    path = field + "".join(reversed(segments))
    raise ValidationError(f"{path} {message}", field=path)


def too_deep(field: str, limit: int) -> ValidationError:
    """The one message for JSON deeper than its limit, however it was found (text or tree)."""
    return ValidationError(f"{field} is nested more than {limit} levels deep", field=field)


_TOO_DEEP = "is nested more than JSON_MAX_DEPTH levels deep"
_SURROGATE_KEY = "has a key with a lone surrogate; text must be valid Unicode"
_SURROGATE = "holds a lone surrogate; text must be valid Unicode"
_BEYOND_INT64 = "is an integer outside the 64-bit range"
_NESTED = "is nested too deeply"
_KEY_NOT_TEXT = "keys must be strings"
_NOT_FINITE = "must be a finite number"
_NUL_KEY = "has a key holding a NUL character (\\x00), which no dot path can name"
# PostgreSQL's jsonb cannot hold one either (SQLite would store what a fleet store refuses)
_NUL_VALUE = "holds a NUL character (\\x00), which a context's text may not"
_STORABLE_PROBLEMS = frozenset((_TOO_DEEP, _SURROGATE_KEY, _SURROGATE, _BEYOND_INT64))
_Refusal = tuple[list[str], str]


def _refusal(item: Any, depth: int, limit: int | None) -> _Refusal | None:
    """(path segments innermost first, message) of the first value SQLite cannot store, else None;
    with a ``limit``, also of the first value that is not plain JSON or lies deeper than ``limit``."""
    if limit is not None and depth > limit:
        return [], _NESTED
    kind = type(item)
    if kind is bool or item is None:
        return None
    if kind is float:
        return None if limit is None or math.isfinite(item) else ([], _NOT_FINITE)
    if isinstance(item, str):
        if limit is not None and "\x00" in item:
            return [], _NUL_VALUE
        return None if item.isascii() or _encodable(item) else ([], _SURROGATE)
    if isinstance(item, int):
        return None if _INT64[0] <= item <= _INT64[1] else ([], _BEYOND_INT64)
    if isinstance(item, (dict, list, tuple)):
        if depth >= JSON_MAX_DEPTH:
            return [], _TOO_DEEP
        return _dict_refusal(item, depth, limit) if isinstance(item, dict) else _list_refusal(item, depth, limit)
    if limit is None:
        return None
    if isinstance(item, float):
        return None if math.isfinite(item) else ([], _NOT_FINITE)
    return [], f"holds a {kind.__name__}, which is not JSON"


def _dict_refusal(item: dict[Any, Any], depth: int, limit: int | None) -> _Refusal | None:
    # Scalars within the limit that plainly pass need no call (most leaves).
    shallow = limit is None or depth < limit
    for key, child in item.items():
        if not isinstance(key, str):
            if limit is not None:
                return [], _KEY_NOT_TEXT
        elif not key.isascii() and not _encodable(key):
            return [], _SURROGATE_KEY
        elif limit is not None and "\x00" in key:
            # A context key is a dot path's segment: SQLite's JSON paths cannot name a key holding
            # NUL and PostgreSQL's jsonb cannot store one, so it would be stored (SQLite) but never
            # found again, or fail as a storage error (PostgreSQL).
            return [], _NUL_KEY
        kind = type(child)
        if shallow and (kind is bool or child is None or (kind is str and child.isascii() and "\x00" not in child)
                        or (kind is int and _INT64[0] <= child <= _INT64[1])
                        or (kind is float and (limit is None or math.isfinite(child)))):
            continue
        refused = _refusal(child, depth + 1, limit)
        if refused is not None:
            refused[0].append(f".{key}")
            return refused
    return None


def _list_refusal(item: list[Any] | tuple[Any, ...], depth: int, limit: int | None) -> _Refusal | None:
    for index, child in enumerate(item):
        refused = _refusal(child, depth + 1, limit)
        if refused is not None:
            refused[0].append(f"[{index}]")
            return refused
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _may_hold_surrogates(text: str) -> bool:
    return not _encodable(text) or _ESCAPED_SURROGATE.search(text) is not None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: The seconds' fraction of an ISO 8601 time (``08:00:00.123456789``, ``080000,5``): what comes
#: before it, and its digits.
_ISO_FRACTION = re.compile(r"(.*?[0-9]{2}:?[0-9]{2}:?[0-9]{2})[.,]([0-9]+)")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def timestamp(value: Any, field: str) -> float | None:
    """Epoch seconds (int/float) or ISO 8601 text (naive means UTC), within EPOCH_MIN..EPOCH_MAX."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(f"{field} must be epoch seconds or ISO 8601 text", field=field)
    if isinstance(value, (int, float)):
        return epoch_seconds(value, field)
    if isinstance(value, str):
        raw = value.strip()
        try:
            number = float(raw)
        except ValueError:
            pass
        else:
            return epoch_seconds(number, field)
        # fromisoformat keeps microseconds: a ROS stamp's nanoseconds (.123456789) were cut to
        # .123456, so since/until fell up to 1 us early. The fraction is read here, exactly.
        fraction = _ISO_FRACTION.match(raw)
        whole = raw if fraction is None else fraction.group(1) + raw[fraction.end():]
        try:
            parsed = datetime.fromisoformat(whole.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValidationError(
                f"{field} must be epoch seconds or ISO 8601 (2026-12-01T08:00:00Z); got {brief(value)}",
                field=field,
            ) from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        since_epoch = parsed - _EPOCH  # days, seconds and microseconds: exact integers
        exact = Fraction(since_epoch.days * 86400 + since_epoch.seconds) + Fraction(since_epoch.microseconds, 10 ** 6)
        if fraction is not None:
            exact += Fraction(int(fraction.group(2)), 10 ** len(fraction.group(2)))
        # The float nearest the exact time (a Fraction's float is rounded once, correctly).
        return epoch_seconds(float(exact), field)
    raise ValidationError(f"{field} must be epoch seconds or ISO 8601 text", field=field)


def epoch_seconds(value: float, field: str) -> float:
    """A finite time from 1970 to the end of 9999 UTC: a stored time outside it (1e300, -1e20) could
    not be shown (time.gmtime overflows), and no robot's record lies there."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(f"{field} must be a finite time", field=field)
    if not EPOCH_MIN <= value <= EPOCH_MAX:  # compared exactly: an int beyond float's range does not overflow
        raise ValidationError(f"{field} must lie between {EPOCH_MIN:.0f} (1970-01-01) and {EPOCH_MAX:.0f} "
                              f"(9999-12-31T23:59:59Z) epoch seconds, got {brief(value)}", field=field)
    return float(value)


def query_vector(value: Any, dim: int, field: str = "query_vector") -> "np.ndarray":
    """A caller's query embedding: ``dim`` finite numbers, not all zero; returned unit-length float32."""
    import numpy as np

    if isinstance(value, (str, bytes, dict)):
        raise ValidationError(f"{field} must be a list of {dim} numbers", field=field)
    try:
        vector = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field} must be a list of {dim} numbers", field=field) from exc
    if vector.ndim != 1 or vector.shape[0] != dim:
        raise ValidationError(f"{field} must have {dim} numbers (the model's dimension), got shape "
                              f"{list(vector.shape)}", field=field)
    if not np.all(np.isfinite(vector)):
        raise ValidationError(f"{field} must hold finite numbers only", field=field)
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise ValidationError(f"{field} must not be all zeros", field=field)
    return np.ascontiguousarray(vector / norm, dtype=np.float32)


#: A row whose length is within this of 1 is kept as the embedder gave it (the packaged model's
#: float32 rows are unit length to rounding; dividing them again would change their last bits).
_UNIT_TOLERANCE = 1e-4


#: The longest embedder model_id: it names a model and its numerics ("all-MiniLM-L6-v2/fp32").
EMBEDDER_MODEL_ID_MAX_CHARS = 200
#: The widest embedder vector: pgvector's limit for a vector column.
EMBEDDER_MAX_DIM = 16_000


def embedder_identity(model_id: Any, dim: Any) -> tuple[str, int]:
    """A caller's embedder's ``model_id`` and ``dim``, checked where the embedder is given.

    The model_id is stored beside every vector, written into PostgreSQL's vector query as a
    literal and passed on a rebuild process's command line: a NUL there was stored by SQLite,
    refused by PostgreSQL on learn and broke its recall's SQL; a lone surrogate or an int was a
    raw UnicodeEncodeError / AttributeError on both. So it is printable text (no NUL, control
    character or surrogate) of a sane length, and dim a positive int, on both stores alike.
    """
    if not isinstance(model_id, str):
        raise ValidationError(f"embedder.model_id must be a string, got {type(model_id).__name__}",
                              field="embedder.model_id")
    if not model_id.strip() or not model_id.isprintable() or len(model_id) > EMBEDDER_MODEL_ID_MAX_CHARS:
        raise ValidationError(
            f"embedder.model_id must be 1-{EMBEDDER_MODEL_ID_MAX_CHARS} printable characters (no NUL, control "
            f"character or lone surrogate), such as 'all-MiniLM-L6-v2/fp32'; got {brief(model_id)}",
            field="embedder.model_id")
    if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
        dim = int(dim)  # numpy's integers too: a shape's length is often one
    return model_id, integer(dim, "embedder.dim", low=1, high=EMBEDDER_MAX_DIM)


def embedder_vectors(value: Any, count: int, dim: int, model_id: str) -> "np.ndarray":
    """An embedder's output for ``count`` texts: shape (count, dim), finite, no all-zero row;
    returned float32 with unit-length rows.

    The embedder is the caller's code, and its vectors go straight into the store and into every
    later recall's cosine: one NaN row made sqlite-vec return NULL similarities and one short row
    a dimension mismatch, on every recall of the collection from then on. So a bad output is
    refused here, where vectors enter (learn, save_perception(s), update, reindex, recall's
    query), before anything is written; the error names the embedder's model_id and what is wrong.
    Rows of another length are scaled to unit length: the in-process index ranks by dot product
    and sqlite-vec by cosine, which agree only on unit vectors.
    """
    import numpy as np

    field = "embedder"
    who = f"embedder {brief(model_id)}"
    try:
        matrix = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{who} returned {type(value).__name__}, not an array of numbers", field=field) from exc
    if matrix.shape != (count, dim):
        raise ValidationError(f"{who} returned shape {list(matrix.shape)} for {count} text(s); expected "
                              f"[{count}, {dim}] (its dim is {dim})", field=field)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValidationError(f"{who} returned a vector with NaN or infinite values (row {row})", field=field)
    norms = np.linalg.norm(matrix, axis=1)
    if not norms.all():
        row = int(np.flatnonzero(norms == 0.0)[0])
        raise ValidationError(f"{who} returned an all-zero vector (row {row}), which has no direction to compare",
                              field=field)
    if np.all(np.abs(norms - 1.0) <= _UNIT_TOLERANCE):
        return np.ascontiguousarray(value if isinstance(value, np.ndarray) else matrix, dtype=np.float32)
    return np.ascontiguousarray(matrix / norms[:, None], dtype=np.float32)
