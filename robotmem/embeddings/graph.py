"""Assemble the ONNX graph of a BERT sentence encoder from its weights (numpy arrays under BERT's names).

The graph is the whole sentence-transformers pipeline of all-MiniLM-L6-v2 (and of
multilingual-e5-small, robotmem.embeddings.multilingual): token + position embeddings,
LayerNorm, N encoder layers (self-attention with the padding mask, exact erf GELU),
masked mean pooling and L2 normalisation.

Each layer is four of onnxruntime's fused contrib operators and three MatMuls:
``Attention`` (the query/key/value projections, attention over the unmasked keys and the
head merge), ``SkipLayerNormalization`` (bias, residual and LayerNorm) twice and
``BiasGelu``. Its optimiser did not fuse the plain-operator form of the same layer, whose
~34 operators each made both threads meet: one sentence took 5.6 ms against 4.3 ms fused
with MiniLM and 11.1 against 9.4 ms with e5, same vectors (cosine 1.0000; docs/benchmarks.md).

Inputs:  ``input_ids`` and ``attention_mask``, int64 ``[batch, seq]``.
Output:  ``sentence_embedding``, float32 ``[batch, hidden]``, unit rows.

Only the weights are read (numpy, no torch); the graph is written by hand with
``onnx.helper`` so we control every op and can keep it optimiser-friendly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .signature import ATTENTION_MASK, INPUT_IDS, INPUT_NAMES, OUTPUT_NAME

__all__ = ["OPSET", "BertShape", "QuantizedWords", "build_encoder_graph", "load_bert_shape"]

#: Opset 17 has LayerNormalization and is supported by every onnxruntime >= 1.14.
OPSET = 17
#: Guards of sentence-transformers: mean pooling clamps the count, F.normalize the norm.
_POOL_EPS = 1e-9
_NORM_EPS = 1e-12
CONTRIB_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class QuantizedWords:
    """A word table kept 4-bit in the graph (``com.microsoft.GatherBlockQuantized``): ``packed``
    uint8 [vocab, hidden / 2], two consecutive values per byte offset by 8, ``scales`` float32
    [vocab, hidden / block]."""

    packed: np.ndarray
    scales: np.ndarray
    block: int = 32


@dataclass(frozen=True)
class BertShape:
    """The hyper-parameters the graph needs (from the model's ``config.json``)."""

    hidden: int
    heads: int
    layers: int
    intermediate: int
    layer_norm_eps: float


def load_bert_shape(config_path: Path) -> BertShape:
    cfg = json.loads(config_path.read_text(encoding="utf-8"))
    if cfg.get("hidden_act", "gelu") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{config_path}: only BERT with gelu and absolute positions is supported")
    return BertShape(
        hidden=int(cfg["hidden_size"]),
        heads=int(cfg["num_attention_heads"]),
        layers=int(cfg["num_hidden_layers"]),
        intermediate=int(cfg["intermediate_size"]),
        layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
    )


class _GraphBuilder:
    """Collects nodes and initialisers; each helper returns the name of its output."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, key: str, *, transpose: bool = False) -> str:
        value = np.asarray(self.weights[key], dtype=np.float32)
        # torch Linear stores [out, in]; MatMul wants [in, out].
        return self.const(key, value.T if transpose else value)

    def op(self, op_type: str, inputs: list[str], hint: str, **attrs: Any) -> str:
        out = self.fresh(hint)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        scale, bias = self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")
        return self.op("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=eps)


def _words(g: _GraphBuilder, quantized: QuantizedWords | None) -> str:
    if quantized is None:
        return g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), INPUT_IDS], "embeddings.words")
    packed = g.const("embeddings.word_embeddings.q4", quantized.packed)
    scales = g.const("embeddings.word_embeddings.q4_scales", quantized.scales)
    return g.op("GatherBlockQuantized", [packed, INPUT_IDS, scales], "embeddings.words", domain=CONTRIB_DOMAIN,
                bits=4, block_size=quantized.block, gather_axis=0, quantize_axis=1)


def _embeddings(g: _GraphBuilder, shape: BertShape, quantized: QuantizedWords | None) -> str:
    # token_type_ids are always 0 for single sentences: fold row 0 into the position table.
    positions = g.weights["embeddings.position_embeddings.weight"].astype(np.float32)
    token_type0 = g.weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32)
    table = g.const("embeddings.position_plus_type0", positions + token_type0)
    words = _words(g, quantized)
    # Slice the table by Shape(input_ids)[1:2]: the usual Shape->Gather->Range position-id
    # pattern is rejected by onnxruntime's optimiser ("Slice: Starts must be a 1-D array").
    seq_len = g.op("Shape", [INPUT_IDS], "embeddings.seq_len", start=1, end=2)
    zero = g.const("const.zero_1d", np.array([0], dtype=np.int64))
    axis0 = g.const("const.axis0_1d", np.array([0], dtype=np.int64))
    pos = g.op("Slice", [table, zero, seq_len, axis0], "embeddings.positions")
    summed = g.op("Add", [words, pos], "embeddings.sum")
    return g.layer_norm(summed, "embeddings.LayerNorm", shape.layer_norm_eps)


def _key_mask(g: _GraphBuilder) -> str:
    """[batch, seq] int32, 1 for real tokens: the Attention operator's raw mask (padded keys get -1e4)."""
    return g.op("Cast", [ATTENTION_MASK], "mask.int32", to=TensorProto.INT32)


def _self_attention(g: _GraphBuilder, x: str, mask: str, shape: BertShape, prefix: str) -> str:
    """Query, key and value projections, scaled dot-product attention over the unmasked keys and
    the head merge in one operator; the output projection's bias, the residual and the LayerNorm
    in another."""
    w = g.weights
    qkv_weight = np.concatenate([np.asarray(w[f"{prefix}.self.{n}.weight"], np.float32).T
                                 for n in ("query", "key", "value")], axis=1)
    qkv_bias = np.concatenate([np.asarray(w[f"{prefix}.self.{n}.bias"], np.float32) for n in ("query", "key", "value")])
    context = g.op("Attention", [x, g.const(f"{prefix}.qkv.weight", qkv_weight), g.const(f"{prefix}.qkv.bias", qkv_bias),
                                 mask], f"{prefix}.self", domain=CONTRIB_DOMAIN, num_heads=shape.heads)
    projected = g.op("MatMul", [context, g.weight(f"{prefix}.output.dense.weight", transpose=True)], f"{prefix}.output")
    return _add_and_norm(g, projected, x, f"{prefix}.output", shape)


def _feed_forward(g: _GraphBuilder, x: str, shape: BertShape, prefix: str) -> str:
    """Exact (erf) GELU of the intermediate projection plus its bias, then the output projection."""
    inner = g.op("MatMul", [x, g.weight(f"{prefix}.intermediate.dense.weight", transpose=True)], f"{prefix}.intermediate")
    hidden = g.op("BiasGelu", [inner, g.weight(f"{prefix}.intermediate.dense.bias")], f"{prefix}.gelu",
                  domain=CONTRIB_DOMAIN)
    projected = g.op("MatMul", [hidden, g.weight(f"{prefix}.output.dense.weight", transpose=True)], f"{prefix}.output")
    return _add_and_norm(g, projected, x, f"{prefix}.output", shape)


def _add_and_norm(g: _GraphBuilder, projected: str, residual: str, prefix: str, shape: BertShape) -> str:
    """LayerNorm(projected + bias + residual), BERT's post-norm, as one operator."""
    return g.op("SkipLayerNormalization", [projected, residual, g.weight(f"{prefix}.LayerNorm.weight"),
                                           g.weight(f"{prefix}.LayerNorm.bias"), g.weight(f"{prefix}.dense.bias")],
                f"{prefix}.add_norm", domain=CONTRIB_DOMAIN, epsilon=shape.layer_norm_eps)


def _mean_pool_and_normalise(g: _GraphBuilder, x: str) -> str:
    mask = g.op("Cast", [ATTENTION_MASK], "pool.mask", to=TensorProto.FLOAT)
    mask3 = g.op("Unsqueeze", [mask, g.const("const.axes_2", np.array([2], dtype=np.int64))], "pool.mask3")
    axis1 = g.const("const.axis_1", np.array([1], dtype=np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "pool.masked"), axis1], "pool.sum", keepdims=0)
    count = g.op("ReduceSum", [mask3, axis1], "pool.count", keepdims=0)
    count = g.op("Max", [count, g.const("const.pool_eps", np.array(_POOL_EPS, np.float32))], "pool.count_clamped")
    mean = g.op("Div", [summed, count], "pool.mean")
    # Opset 17: ReduceSum takes axes as an input, ReduceL2 still as an attribute.
    norm = g.op("ReduceL2", [mean], "norm.l2", axes=[-1], keepdims=1)
    norm = g.op("Max", [norm, g.const("const.norm_eps", np.array(_NORM_EPS, np.float32))], "norm.clamped")
    out = g.op("Div", [mean, norm], "norm.out")
    g.nodes.append(helper.make_node("Identity", [out], [OUTPUT_NAME], name=OUTPUT_NAME))
    return OUTPUT_NAME


def build_encoder_graph(
    weights: Mapping[str, np.ndarray], shape: BertShape, quantized_words: QuantizedWords | None = None,
) -> onnx.ModelProto:
    """Return a shape-checked ONNX model computing unit-length sentence embeddings; ``quantized_words``:
    the word table, kept 4-bit, instead of ``embeddings.word_embeddings.weight``."""
    g = _GraphBuilder(weights)
    x = _embeddings(g, shape, quantized_words)
    mask = _key_mask(g)
    for i in range(shape.layers):
        prefix = f"encoder.layer.{i}"
        x = _self_attention(g, x, mask, shape, f"{prefix}.attention")
        x = _feed_forward(g, x, shape, prefix)
    _mean_pool_and_normalise(g, x)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in INPUT_NAMES]
    output = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", shape.hidden])
    graph = helper.make_graph(g.nodes, "bert_sentence_encoder", inputs, [output], g.initializers)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="robotmem")
    model.ir_version = 8  # readable by onnxruntime >= 1.10, whatever onnx version wrote it
    onnx.checker.check_model(model, full_check=False)
    # strict shape inference catches wrong input orders and rank mistakes at build time.
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)
