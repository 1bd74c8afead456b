"""Turn text into the token stream the FTS5 index stores and the query searches.

FTS5's unicode61 tokenizer splits ``12.5N`` into ``12`` and ``5n``, ``grip_force``
into ``grip`` and ``force``, and treats a run of Chinese characters as one token, so
people's queries for measurements, parameter names and CJK words miss. We tokenize
in Python instead, identically at write and at query time, and store the tokens
separated by spaces; FTS5 (configured to keep ``.`` and ``_`` inside tokens) then
only splits on our spaces.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

__all__ = ["FTS_TOKENIZE", "TOKEN_MAX_BYTES", "fts_match_expression", "identifier_key_words", "index_tokens",
           "is_bare_number", "memory_search_text", "query_tokens", "token_parts"]

#: FTS5 tokenizer spec: every character our tokens may contain is a token character,
#: so FTS5 splits only on the spaces we put between tokens.
FTS_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '._%°+-/'"

# A number with an optional decimal part and an optional unit glued to it: 12.5N, 0.05m, 30%.
_NUMBER = r"[-+]?\d+(?:[.,]\d+)*(?:[a-z%°µ]+[a-z0-9/]*)?"
# A word of letters/digits possibly joined by underscores (snake_case) or dots (module.path). A dot
# must be followed by a letter or digit; ``_`` is a word character anyway. Written as runs of \w
# rather than one character per repetition: same matches, about a third less time per text.
_WORD = r"[^\W_]\w*(?:\.[^\W_]\w*)*"
_TOKEN_RE = re.compile(rf"{_NUMBER}|{_WORD}", re.UNICODE)
_PLAIN_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)*")
_NUMBER_UNIT_RE = re.compile(r"([-+]?\d+(?:[.,]\d+)*)([a-z%°µ].*)")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0x20000 <= code <= 0x2FA1F
    )


def _fold(text: str) -> str:
    """Lower case, compatibility forms, no diacritics on alphabetic scripts (café -> cafe).

    Marks are only stripped below U+3000: in kana the voicing mark changes the word.
    """
    if text.isascii():
        return text.lower()
    out: list[str] = []
    for char in unicodedata.normalize("NFKC", text.casefold()):
        if ord(char) < 0x3000:
            out.extend(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        else:
            out.append(char)
    return "".join(out)


def _split_cjk(token: str) -> list[str]:
    """CJK has no spaces: index single characters and overlapping pairs of a CJK run."""
    if token.isascii():
        return [token]
    out: list[str] = []
    run: list[str] = []
    rest: list[str] = []

    def close_run() -> None:
        out.extend(run)
        out.extend(a + b for a, b in itertools.pairwise(run))
        run.clear()

    for char in token:
        if _is_cjk(char):
            if rest:
                out.append("".join(rest))
                rest.clear()
            run.append(char)
        else:
            if run:
                close_run()
            rest.append(char)
    if run:
        close_run()
    if rest:
        out.append("".join(rest))
    return out


def is_bare_number(token: str) -> bool:
    """A number without a unit or letters: ``12.5``, ``-60``, ``3.2.1`` (not ``12.5n``, ``rg2``)."""
    return _PLAIN_NUMBER_RE.fullmatch(token) is not None


def _expand(token: str) -> list[str]:
    """A compound token and its parts, so `grip_force` matches `grip force` and vice versa."""
    parts = [token]
    if token.isalpha():
        return parts  # a plain word: most tokens, and nothing below applies to it
    if is_bare_number(token):
        return parts  # 12.5 stays one token: its digits are not words
    number = _NUMBER_UNIT_RE.fullmatch(token)
    if number:
        parts += [number.group(1), number.group(2)]
    elif "_" in token or "." in token:
        parts += [p for p in re.split(r"[._]", token) if p]
    return parts


def token_parts(token: str) -> list[str]:
    """The parts of a compound token (``grip_force`` -> grip, force; ``12.5n`` -> 12.5, n), else []."""
    return _expand(token)[1:]


#: A token is cut to at most this many UTF-8 bytes, at a character boundary. PostgreSQL refuses a
#: lexeme of more (tsvector and tsquery alike: "word is too long"); SQLite has no limit. Cutting here,
#: where both backends' index text and queries are made, keeps their answers alike: a 1,100-letter
#: word or a base64 blob in a log line is stored on both and found on both by the same word.
TOKEN_MAX_BYTES = 2046


def _capped(token: str) -> str:
    # 4 bytes per character at most: shorter tokens need no encoding to know they fit.
    if len(token) * 4 <= TOKEN_MAX_BYTES or len(token.encode()) <= TOKEN_MAX_BYTES:
        return token
    return token.encode()[:TOKEN_MAX_BYTES].decode("utf-8", "ignore")


def _raw_tokens(text: str) -> list[str]:
    folded = _fold(text)
    # The pattern has no groups, so findall gives whole matches; ASCII text has no CJK to split.
    if folded.isascii():
        found: list[str] = _TOKEN_RE.findall(folded)
        if "," in folded:
            found = [t.replace(",", ".") for t in found]
        # Folding may lengthen text (a ligature "ﬃ" becomes "ffi"); one byte per character here.
        return [_capped(t) for t in found] if len(folded) > TOKEN_MAX_BYTES else found
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(folded):
        for piece in _split_cjk(match.group(0)):
            tokens.append(_capped(piece.replace(",", ".")))
    return tokens


def index_tokens(text: str) -> str:
    """The space-separated token stream stored in the FTS index."""
    return " ".join(_index_token_list(text))


def _index_token_list(text: str) -> list[str]:
    out: list[str] = []
    for token in _raw_tokens(text):
        # Most tokens are their own only part: words, integers, words with digits (gripper2).
        # _expand splits only at '.', '_' or after a leading number, which these lack.
        if token.isalpha() or (token.isalnum() and (token.isdecimal() or not token[0].isdecimal())):
            out.append(token)
        else:
            out.extend(_expand(token))
    return out


@functools.lru_cache(maxsize=4096)
def _leaf_tokens(leaf: str) -> tuple[str, ...]:
    """A context identifier's tokens; the same few (robot ids, part numbers) recur in every batch."""
    return tuple(index_tokens(leaf).split())


#: Context strings up to this length that contain a digit are indexed as identifiers.
IDENTIFIER_MAX_CHARS = 64
#: At most this many context identifiers per memory are indexed (bounds the write cost).
IDENTIFIER_MAX_LEAVES = 32
_DIGIT_RE = re.compile(r"\d")


def _identifier_leaves(context: dict[str, Any]) -> list[str]:
    """Short strings with a digit anywhere in a context (part numbers, serials, versions, model names),
    depth first, at most IDENTIFIER_MAX_LEAVES.

    A context holding more: the first of them with every object's keys sorted. The keys' order is
    not the context's: PostgreSQL's jsonb reads them back shortest first, so a memory exported from
    there and imported (which recomputes this) was found by other part numbers than before the move."""
    found: list[str] = []
    if not _collect_identifiers(context.values(), found):
        found.clear()
        _collect_identifiers(_sorted_keys(context).values(), found)
    return found


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def _collect_identifiers(values: Iterable[Any], found: list[str]) -> bool:
    """Append the identifiers among ``values`` and below; False once ``found`` is full.

    Plain recursion with the common scalars passed over first: it runs for every memory a
    bulk insert writes (contexts are at most models.CONTEXT_MAX_DEPTH levels deep)."""
    for value in values:
        kind = type(value)
        if kind in _NOT_TEXT:
            continue
        if isinstance(value, str):
            if _is_identifier(value):
                found.append(value)
                if len(found) >= IDENTIFIER_MAX_LEAVES:
                    return False
        elif isinstance(value, (dict, list)):
            if not _collect_identifiers(value.values() if isinstance(value, dict) else value, found):
                return False
    return True


_NOT_TEXT = frozenset((int, float, bool, type(None)))


def _is_identifier(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= IDENTIFIER_MAX_CHARS and _DIGIT_RE.search(value) is not None


def identifier_key_words(context: dict[str, Any] | None) -> set[str]:
    """The index tokens (and their parts) of the keys that hold a context's identifiers:
    ``{"software": {"firmware": "9.4.3"}}`` -> {"firmware"}. Relevance counts them beside an
    exact value: the full-text index holds "9.4.3" (memory_search_text), not that it is a firmware."""
    words: set[str] = set()
    stack: list[tuple[str, Any]] = list(context.items()) if context else []
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.items())
        elif isinstance(value, list):
            stack.extend((key, item) for item in value)
        elif _is_identifier(value):
            for token in _leaf_tokens(key):
                words.add(token)
                words.update(token_parts(token))
    return words


def memory_search_text(content: str, context: dict[str, Any] | None) -> str:
    """What the full-text index holds for a memory: its content's tokens, then the context's identifiers.

    A part number, serial or firmware version often lives only in the context
    (``{"part": "RG2-FT-0417"}``); without it in the index an exact-identifier query
    cannot find the memory. Only strings with a digit are added: plain words in a context
    are categories ("arm", "pick_beaker") that filters select exactly, and indexing them
    would let one word of a query match every memory of the category. A leaf whose tokens
    the content already has adds nothing, so term frequencies stay the content's.
    """
    tokens = _index_token_list(content)
    text = " ".join(tokens)
    leaves = _identifier_leaves(context) if context else []
    if not leaves:
        return text
    have = set(tokens)
    extra: list[str] = []
    for leaf in leaves:
        leaf_tokens = _leaf_tokens(leaf)
        if not have.issuperset(leaf_tokens):
            extra.extend(leaf_tokens)
            have.update(leaf_tokens)
    return " ".join([text, *extra]) if extra else text


def query_tokens(text: str) -> list[str]:
    """Distinct tokens of a query, in order; compound tokens are kept whole (they are indexed whole)."""
    seen: dict[str, None] = {}
    for token in _raw_tokens(text):
        seen.setdefault(token, None)
    return list(seen)


def match_term(token: str) -> str:
    """One token as FTS5 syntax: quoted; a compound also matches its parts as a phrase.

    ``grip_force`` matches "grip_force" and the prose "grip force"; ``12.5N`` matches
    "12.5 N". Quoting means punctuation in a query can never raise an FTS5 syntax error.
    """
    quoted = '"' + token.replace('"', '""') + '"'
    parts = token_parts(token)
    if not parts:
        return quoted
    return "(" + quoted + ' OR "' + " ".join(parts).replace('"', '""') + '")'


def fts_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression (any token may match; BM25 ranks) or None when nothing is searchable."""
    tokens = query_tokens(text)
    if not tokens:
        return None
    return " OR ".join(match_term(token) for token in tokens)
