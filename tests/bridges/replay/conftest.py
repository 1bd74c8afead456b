"""Fixtures for the replay tests: the project's sample recordings and an in-process CLI."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from robotmem import Memory
from robotmem.cli.main import main as cli_main

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def datasets() -> Path:
    return REPO / "datasets"


@pytest.fixture(scope="session")
def make_datasets() -> ModuleType:
    """scripts/make_datasets.py as a module (the generator of datasets/)."""
    spec = importlib.util.spec_from_file_location("make_datasets", REPO / "scripts" / "make_datasets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_datasets"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    """A real store with the real ONNX embedding model."""
    with Memory(tmp_path / "replay.db") as mem:
        yield mem


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], robotmem_home: Path) -> Callable[..., tuple[int, str, str]]:
    """``robotmem ARGS`` in this process against the test's ROBOTMEM_HOME: (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli_main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
