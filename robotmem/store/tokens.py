"""Turn text into the token stream the FTS5 index stores and the query searches.

FTS5's unicode61 tokenizer splits ``12.5N`` into ``12`` and ``5n``, ``grip_force``
into ``grip`` and ``force``, and treats a run of Chinese characters as one token, so
people's queries for measurements, parameter names and CJK words miss. We tokenize
in Python instead, identically at write and at query time, and store the tokens
separated by spaces; FTS5 (configured to keep ``.`` and ``_`` inside tokens) then
only splits on our spaces.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

__all__ = ["FTS_TOKENIZE", "fts_match_expression", "index_tokens", "query_tokens"]

#: FTS5 tokenizer spec: every character our tokens may contain is a token character,
#: so FTS5 splits only on the spaces we put between tokens.
FTS_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '._%°+-/'"

# A number with an optional decimal part and an optional unit glued to it: 12.5N, 0.05m, 30%.
_NUMBER = r"[-+]?\d+(?:[.,]\d+)*(?:[a-z%°µ]+[a-z0-9/]*)?"
# A word of letters/digits possibly joined by underscores (snake_case) or dots (module.path).
_WORD = r"[^\W_](?:[\w]|[._](?=[^\W_]))*"
_TOKEN_RE = re.compile(rf"{_NUMBER}|{_WORD}", re.UNICODE)
_PLAIN_NUMBER_RE = re.compile(r"^[-+]?\d+(?:\.\d+)*$")
_NUMBER_UNIT_RE = re.compile(r"^([-+]?\d+(?:[.,]\d+)*)([a-z%°µ].*)$")


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


def _expand(token: str) -> list[str]:
    """A compound token and its parts, so `grip_force` matches `grip force` and vice versa."""
    parts = [token]
    if _PLAIN_NUMBER_RE.match(token):
        return parts  # 12.5 stays one token: its digits are not words
    number = _NUMBER_UNIT_RE.match(token)
    if number:
        parts += [number.group(1), number.group(2)]
    elif "_" in token or "." in token:
        parts += [p for p in re.split(r"[._]", token) if p]
    return parts


def token_parts(token: str) -> list[str]:
    """The parts of a compound token (``grip_force`` -> grip, force; ``12.5n`` -> 12.5, n), else []."""
    return _expand(token)[1:]


def _raw_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(_fold(text)):
        for piece in _split_cjk(match.group(0)):
            tokens.append(piece.replace(",", "."))
    return tokens


def index_tokens(text: str) -> str:
    """The space-separated token stream stored in the FTS index."""
    out: list[str] = []
    for token in _raw_tokens(text):
        out.extend(_expand(token))
    return " ".join(out)


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
