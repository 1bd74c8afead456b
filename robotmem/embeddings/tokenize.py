"""WordPiece tokenisation with the model's own ``tokenizer.json`` (``tokenizers`` package).

The shipped ``tokenizer.json`` truncates and pads to 128 tokens; the reference
(sentence-transformers) uses ``max_seq_length`` 256. We truncate at 256 and pad
ourselves, to the longest item of each batch.

Texts are encoded one at a time on purpose: ``encode_batch`` uses a Rayon thread
pool, and once that pool has run, every later ``fork()`` (subprocesses of a
server, test runners) prints a warning and disables it. Tokenising a sentence
costs microseconds next to the encoder, so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ..context import without_lone_surrogates

__all__ = ["MAX_SEQ_LENGTH", "TokenBatch", "WordPiece"]

MAX_SEQ_LENGTH = 256
_PAD_ID = 0


def _encodable(text: str) -> str:
    """The Rust tokenizer only accepts valid Unicode; the vector is derived data, so one replaced
    code point is better than refusing to embed (or store) the memory."""
    return without_lone_surrogates(text)


@dataclass(frozen=True)
class TokenBatch:
    input_ids: np.ndarray  # int64 [batch, seq]
    attention_mask: np.ndarray  # int64 [batch, seq]


class WordPiece:
    """Thread-safe after construction: encoding only reads the tokenizer."""

    def __init__(self, tokenizer_json: Path, max_length: int = MAX_SEQ_LENGTH) -> None:
        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [self._tokenizer.encode(_encodable(text)).ids for text in texts]

    @staticmethod
    def pad(ids: Sequence[Sequence[int]]) -> TokenBatch:
        """Right-pad to the longest sequence of the batch; the mask marks real tokens."""
        longest = max(len(row) for row in ids)
        input_ids = np.full((len(ids), longest), _PAD_ID, dtype=np.int64)
        mask = np.zeros((len(ids), longest), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return TokenBatch(input_ids, mask)
