"""Shared fixtures: every test gets its own ROBOTMEM_HOME; the built ONNX model is shared."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def _shared_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the ONNX model at most once per test run (also for server subprocesses)."""
    cache = os.environ.get("ROBOTMEM_TEST_MODELS_DIR")
    path = Path(cache) if cache else tmp_path_factory.mktemp("models")
    old = os.environ.get("ROBOTMEM_MODELS_DIR")
    os.environ["ROBOTMEM_MODELS_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ROBOTMEM_MODELS_DIR", None)
    else:
        os.environ["ROBOTMEM_MODELS_DIR"] = old


@pytest.fixture(autouse=True)
def robotmem_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the data directory at a temporary folder for every test."""
    home = tmp_path / "robotmem-home"
    home.mkdir()
    monkeypatch.setenv("ROBOTMEM_HOME", str(home))
    for var in ("ROBOTMEM_DB_PATH", "ROBOTMEM_TOKEN", "ROBOTMEM_COLLECTION", "ROBOTMEM_EMBEDDINGS"):
        monkeypatch.delenv(var, raising=False)
    return home


def _shared(name: str, what: str) -> Path:
    """../shared/NAME; a user's own clone skips without it, CI (which has it) fails."""
    path = SHARED / name
    if not path.is_dir():
        message = f"{what} not found at {path} (they live beside the checkout in ../shared)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have them")
        pytest.skip(message)
    return path


@pytest.fixture
def shared_datasets() -> Path:
    return _shared("datasets", "real recordings")


@pytest.fixture
def shared_reference() -> Path:
    return _shared("reference", "reference embeddings")
