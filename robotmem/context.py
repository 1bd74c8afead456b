"""Context objects: the structured JSON that travels with every memory.

A context is a JSON object. Four conventional sections carry meaning for recall and
consolidation: ``params`` (the parameters an action used), ``spatial`` (where),
``robot`` (which robot) and ``task`` (what, and whether it succeeded). Any other keys
are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from decimal import Decimal
from typing import Any

from . import validation
from .errors import ValidationError
from .models import CONTEXT_MAX_BYTES, CONTEXT_MAX_DEPTH, CONTEXT_SECTIONS

__all__ = ["canonical_json", "content_hash", "content_hash_json", "content_hashes", "contexts_before_outcome",
           "current_hash_of", "earlier_hashes", "holds_hash", "lift_sections",
           "load_stored_json", "nfkc_fold", "normalize_text", "parse_context", "parse_context_json",
           "without_lone_surrogates"]


def parse_context(value: Any, field: str = "context") -> dict[str, Any]:
    """Validate a context (dict or JSON string) and return a plain JSON-safe dict."""
    return parse_context_json(value, field)[0]


def parse_context_json(value: Any, field: str = "context") -> tuple[dict[str, Any], str]:
    """``parse_context`` and the context's canonical JSON, serialised once for the size check, the
    content hash and the stored row (bulk writes pay for every serialisation)."""
    obj = validation.json_object(value, field, max_depth=CONTEXT_MAX_DEPTH) or {}
    text = canonical_json(obj)
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > CONTEXT_MAX_BYTES:
        raise ValidationError(
            f"{field} is {size} bytes as JSON; the limit is {CONTEXT_MAX_BYTES} "
            "(put bulk data in a perception's data payload)", field=field,
        )
    for section in CONTEXT_SECTIONS:
        if section in obj and not isinstance(obj[section], dict):
            raise ValidationError(
                f"{field}.{section} must be a JSON object, got {type(obj[section]).__name__}",
                field=f"{field}.{section}",
            )
    return obj, text


# One encoder for every call: json.dumps with options builds a new one each time, a sixth of the
# 6 us a bulk insert's context took to encode.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _stored_int(digits: str) -> int | float:
    """An integer of stored JSON: beyond 64 bits it can only have been a float (robotmem refuses such
    integers at write), which PostgreSQL's jsonb wrote out in full (1e300 as 301 digits)."""
    value = int(digits)
    return value if _INT64_MIN <= value <= _INT64_MAX else float(digits)


# One decoder for every call: json.loads with parse_int builds a new one each time. The hook costs
# about 0.1 us an integer (a typical context: 3.7 us to parse instead of 3.4); a regex looking for
# a long digit run first cost 1.7 us a context.
_STORED = json.JSONDecoder(parse_int=_stored_int)


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (valid in a Python str, not in UTF-8) as U+FFFD, for text
    that must be written as UTF-8 whatever it holds (a stored value an older version let through,
    the tokenizer's input). UTF-16 keeps a pair as the character it is and decodes a lone half as
    U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def load_stored_json(text: str | bytes) -> Any:
    """JSON read back from a store (a context, a session's context, a group value): its numbers as
    they were written. PostgreSQL's jsonb keeps numbers as decimals and writes a float of 1e16 or
    more as its digits (``1e300`` -> ``1000...0``); an integer beyond 64 bits is read as the float
    it was."""
    return _STORED.decode(text if isinstance(text, str) else text.decode("utf-8", "surrogatepass"))


def normalize_text(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for duplicate detection: NFKC (full-width
    and font forms of letters and digits, compatibility spaces, ligatures) and casefolding, except
    for the characters whose NFKC form writes a number differently (``_keeps_form``)."""
    if not text.isascii():
        text = _fold_compatibility(text)
    return " ".join(text.casefold().split())


def nfkc_fold(text: str) -> str:
    """``normalize_text`` as it was before superscripts and the like kept their form: NFKC of the
    whole text (``10⁶`` is ``106``). Stored hashes of earlier versions were taken of it
    (``earlier_hashes``); near-duplicate guards compare numbers after it (consolidation/similarity.py)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_KEEPS_FORM: dict[str, bool] = {}


def _keeps_form(char: str) -> bool:
    """NFKC would change what the text says: a superscript or subscript (``10⁶`` is not ``106``,
    ``xⁿ`` not ``xn``), a fraction (``1½`` is not ``11⁄2``), a circled, parenthesised or dotted
    number (``①②`` is not ``12``). Decided per character on first sight (all of Unicode at import
    took 0.4 s)."""
    kept = _KEEPS_FORM.get(char)
    if kept is None:
        tag = unicodedata.decomposition(char)
        kept = tag.startswith(("<super>", "<sub>")) or (
            tag.startswith(("<fraction>", "<circle>", "<compat>"))
            and any("0" <= c <= "9" for c in unicodedata.normalize("NFKC", char)))
        _KEEPS_FORM[char] = kept
    return kept


def _fold_compatibility(text: str) -> str:
    kept = [c for c in set(text) if not c.isascii() and _keeps_form(c)]
    if not kept:
        return unicodedata.normalize("NFKC", text)
    parts = re.split("([" + "".join(re.escape(c) for c in kept) + "])", text)
    return "".join(part if i % 2 else unicodedata.normalize("NFKC", part) for i, part in enumerate(parts))


def _hash_form(value: Any, *, signed_zero: bool = False) -> Any:
    """``value`` with every float that PostgreSQL's jsonb reads back as an integer written as that
    integer: an integral float of 1e16 or more within 64 bits (Python writes it ``1e+16``, jsonb keeps
    the shortest decimal and writes it in full, ``10000000000000000``, which load_stored_json reads
    as an int). Smaller floats keep
    their ``.0`` through jsonb; beyond 64 bits load_stored_json reads the float back. And ``-0.0``
    as ``0.0``: jsonb reads it back as ``0.0`` (SQLite keeps ``-0.0``), and it is equal to it as a
    number (``signed_zero``: keep it, as versions before this rule did)."""
    if isinstance(value, float):
        if abs(value) >= 1e16 and value == value and abs(value) != float("inf"):
            # The integer of the shortest decimal Python writes (2.0**62 is 4.611686018427388e+18,
            # read back as 4611686018427388000), as load_stored_json reads it: within 64 bits.
            digits = int(Decimal(repr(value)))
            return digits if _INT64_MIN <= digits <= _INT64_MAX else value
        return 0.0 if value == 0.0 and not signed_zero else value
    if isinstance(value, dict):
        return {k: _hash_form(v, signed_zero=signed_zero) for k, v in value.items()}
    if isinstance(value, list):
        return [_hash_form(v, signed_zero=signed_zero) for v in value]
    return value


def _context_forms(context: dict[str, Any], text_json: str) -> tuple[str, ...]:
    """The canonical JSONs the hash of this context has been taken of, distinct, today's first
    (``_hash_form``), then that of the version before ``-0.0`` counted as ``0.0``, then the context
    as written (before integral floats counted as integers). A float of 1e16 or more is always
    written with an exponent ("1e+16") and a negative zero as "-0.0": without either there is
    nothing to rewrite (a string holding them only costs the walk)."""
    big, zero = "e+" in text_json, "-0.0" in text_json
    if not big and not zero:
        return (text_json,)
    forms = [canonical_json(_hash_form(context))]
    if big and zero:
        forms.append(canonical_json(_hash_form(context, signed_zero=True)))
    forms.append(text_json)
    return tuple(dict.fromkeys(forms))


def content_hash(text: str, context: dict[str, Any], context_json: str | None = None) -> str:
    """The duplicate key of a fact: its normalised text and context. A float of 1e16 or more counts
    as the integer of its shortest decimal when that fits 64 bits, and ``-0.0`` as ``0.0``
    (``_hash_form``), so the hash of a context read back from PostgreSQL is the hash of the context
    as it was given. ``context_json``: the context's canonical JSON when the caller has it already."""
    text_json = canonical_json(context) if context_json is None else context_json
    return content_hash_json(text, _context_forms(context, text_json)[0])


def content_hashes(text: str, context: dict[str, Any], context_json: str | None = None) -> tuple[str, ...]:
    """``content_hash`` first, then the hashes earlier versions gave this text and context (of the
    context as they wrote it: ``_context_forms``), distinct: the hashes every duplicate check looks
    up. Each belongs to this text and context alone, so a lookup by any of them finds no other
    fact. (The text's earlier fold is not among them: ``10⁶`` hashed as ``106``; migrations rewrote
    stored hashes of it, store/rehash.py.)"""
    text_json = canonical_json(context) if context_json is None else context_json
    folded = normalize_text(text)
    return tuple(_digest(folded, form) for form in _context_forms(context, text_json))


def earlier_hashes(text: str, context: dict[str, Any]) -> tuple[str, ...]:
    """``content_hashes`` and the hashes versions before this one gave the text when its NFKC fold
    differs (``nfkc_fold``): every hash a memory of this text and context can have been stored or
    exported with. Only for checking a memory's own hash: ``106`` has the earlier hash of ``10⁶``."""
    hashes = content_hashes(text, context)
    old = nfkc_fold(text)
    if old == normalize_text(text):
        return hashes
    return hashes + tuple(_digest(old, form) for form in _context_forms(context, canonical_json(context)))


def holds_hash(digest: Any, text: str, context: dict[str, Any]) -> bool:
    """``digest`` is the hash of this text and context, in today's form or an earlier version's
    (``earlier_hashes``)."""
    return digest in earlier_hashes(text, context)


def current_hash_of(content: str, context: dict[str, Any], in_session: bool, digest: Any) -> str | None:
    """Today's hash of the text and context ``digest`` was taken of, or None when it is the hash of
    none of the contexts the memory can have been learned with: its ``context`` or, in a session
    (``in_session``), that context before end_session wrote ``episode.outcome`` into it
    (``contexts_before_outcome``; end_session keeps the hash)."""
    for candidate in [context, *(contexts_before_outcome(context) if in_session else [])]:
        if digest in earlier_hashes(content, candidate):
            return content_hash(content, candidate)
    return None


def contexts_before_outcome(context: dict[str, Any]) -> list[dict[str, Any]]:
    """The contexts a memory could have been learned with, when ``context`` holds the
    ``episode.outcome`` end_session writes into its session's memories (consolidation/writes.py
    ``attach_outcome``, which keeps their hash): the ``episode`` without its outcome, and, when
    nothing else was in it, no ``episode`` at all (a caller's empty ``episode`` and none both end
    as ``{"episode": {"outcome": s}}``). Empty when ``context`` holds no outcome."""
    episode = context.get("episode")
    if not isinstance(episode, dict) or "outcome" not in episode:
        return []
    others = {k: v for k, v in context.items() if k != "episode"}
    rest = {k: v for k, v in episode.items() if k != "outcome"}
    return [{**others, "episode": rest}] if rest else [{**others, "episode": rest}, others]


def content_hash_json(text: str, context_json: str) -> str:
    """The hash of ``text`` and a context's canonical JSON exactly as given (``content_hash`` first
    rewrites floats that jsonb cannot keep)."""
    return _digest(normalize_text(text), context_json)


def _digest(folded: str, context_json: str) -> str:
    return hashlib.sha256((folded + "\x00" + context_json).encode("utf-8")).hexdigest()


def lift_sections(context: dict[str, Any]) -> dict[str, Any]:
    """The four conventional sections as top-level keys (empty dicts when absent)."""
    return {section: context.get(section) or {} for section in CONTEXT_SECTIONS}
