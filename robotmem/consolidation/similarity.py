"""When are two texts saying the same thing? The text half of the merge rule.

Two facts are *near-duplicates* when their embedding cosine reaches
``merge_cosine`` OR the Jaccard similarity of their word sets reaches
``merge_text_similarity`` -- and, in both cases, their *guards* agree:

* the numbers in the texts (a multiset, ``5`` equal to ``5.0``), because a merge keeps
  one text and must never lose a number ("lidar sees an obstacle at 1.5 m" vs "at 2.5 m":
  cosine 0.97);
* the negation words ("use a slow approach for the mug" vs "do not use ...": cosine 0.98);
* outcome and contrast words (succeeded/failed, left/right, open/closed, ...), which
  sentence embeddings also place close together ("grip force 5N succeeded on the mug" vs
  "... failed on the mug": 0.95).

The guards are deliberately coarse: they may keep two true duplicates apart (a missed
merge costs one extra row), never the reverse (a wrong merge loses knowledge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..context import normalize_text

__all__ = ["CONTRAST_WORDS", "NEGATIONS", "TextSignature", "jaccard", "signature"]

_WORD_RE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+(?:[.,]\d+)*", re.UNICODE)
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)?")

#: Words that flip a statement. "n't" forms are matched as whole words after folding.
NEGATIONS = frozenset({
    "not", "no", "never", "none", "nor", "neither", "without", "cannot", "can't", "don't", "doesn't",
    "didn't", "won't", "isn't", "aren't", "wasn't", "weren't", "shouldn't", "mustn't", "avoid", "unable",
})

#: Outcome and direction/state words whose swap keeps the embedding close but the meaning opposite.
#: Two texts must contain exactly the same set of these (and of NEGATIONS) to merge.
CONTRAST_WORDS = frozenset({
    # outcome
    "success", "successful", "successfully", "succeed", "succeeded", "succeeds", "works", "worked",
    "fail", "failed", "fails", "failure", "failing", "broke", "broken", "dropped", "slipped", "slips",
    # direction and position
    "left", "right", "up", "down", "above", "below", "front", "back", "behind", "inside", "outside",
    "north", "south", "east", "west", "forward", "backward", "clockwise", "counterclockwise",
    # state and degree
    "open", "opened", "closed", "close", "on", "off", "high", "low", "higher", "lower", "fast", "slow",
    "faster", "slower", "more", "less", "increase", "decrease", "min", "max", "minimum", "maximum",
    "before", "after", "early", "late", "hot", "cold", "wet", "dry", "full", "empty", "heavy", "light",
    "too", "enough",
})


@dataclass(frozen=True)
class TextSignature:
    """What the text rule compares, computed once per memory."""

    words: frozenset[str]
    numbers: tuple[float, ...]
    markers: frozenset[str]

    @property
    def guard(self) -> tuple[tuple[float, ...], frozenset[str]]:
        """Texts can only merge when these agree exactly."""
        return self.numbers, self.markers


def _number(token: str) -> float:
    return float(token.replace(",", "."))


@lru_cache(maxsize=65_536)
def signature(text: str) -> TextSignature:
    """Cached: the same earlier facts are compared at every end_session."""
    folded = normalize_text(text).replace("\u2019", "'")
    words = frozenset(_WORD_RE.findall(folded))
    numbers = tuple(sorted(_number(t) for t in _NUMBER_RE.findall(folded)))
    markers = frozenset(w for w in words if w in NEGATIONS or w in CONTRAST_WORDS or w.endswith("n't"))
    return TextSignature(words=words, numbers=numbers, markers=markers)


def jaccard(a: TextSignature, b: TextSignature) -> float:
    if not a.words and not b.words:
        return 1.0
    union = len(a.words | b.words)
    return len(a.words & b.words) / union
