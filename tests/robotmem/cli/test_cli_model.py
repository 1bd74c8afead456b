"""``robotmem model build|status`` through a real argparse root parser, as the CLI wires it."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from robotmem.cli.model import register


def _run(argv: list[str]) -> int:
    root = argparse.ArgumentParser(prog="robotmem")
    root.add_argument("--home", default=None)
    root.add_argument("--json", action="store_true")
    register(root.add_subparsers(dest="command", required=True))
    args = root.parse_args(argv)
    return int(args.func(args))


def test_model_build_prints_the_model_id_path_and_time(
    _shared_model_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["model", "build"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("all-MiniLM-L6-v2/fp32 ")
    path = Path(line.split(": ", 1)[1].rsplit(" (", 1)[0])
    assert path.is_file() and path.parent == _shared_model_cache


def test_model_build_all_with_json_reports_both_precisions(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--json", "model", "build", "--precision", "all"]) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["model_id"] for r in reports] == ["all-MiniLM-L6-v2/fp32", "all-MiniLM-L6-v2/int8"]
    assert all(Path(r["path"]).is_file() and r["status"] in ("built", "cached") for r in reports)


def test_model_build_with_force_rebuilds_into_a_given_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROBOTMEM_MODELS_DIR", str(tmp_path / "models"))
    assert _run(["--json", "model", "build"]) == 0
    assert _run(["--json", "model", "build", "--force"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first["status"], second["status"]) == ("built", "built")
    assert first["path"] == second["path"] and Path(first["path"]).is_file()


def test_model_status_lists_installed_weights_and_built_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["model", "build"]) == 0
    capsys.readouterr()
    assert _run(["--json", "model", "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["installed"] is True
    assert status["weights"].endswith("model.safetensors")
    assert Path(status["built"]["fp32"]).is_file()


def test_model_build_with_a_bad_precision_setting_fails_with_exit_code_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROBOTMEM_EMBEDDING_PRECISION", "fp16")
    assert _run(["model", "build"]) == 2
    assert "fp16" in capsys.readouterr().err


def test_model_status_names_the_configured_model_and_whether_the_multilingual_one_is_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ROBOTMEM_EMBEDDING_MODEL", "multilingual-e5-small")
    monkeypatch.setenv("ROBOTMEM_MODELS_DIR", str(tmp_path / "models"))  # not the session's shared cache
    assert _run(["--json", "model", "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["model"] == "multilingual-e5-small"
    assert status["multilingual-e5-small"] == "installed, not built (robotmem model build)"
    # With e5 configured, `model build` builds e5 (not MiniLM) into the cache and test-runs it.
    assert _run(["--json", "model", "build"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["model_id"] == "multilingual-e5-small/q4" and built["status"] == "built"
    assert _run(["--json", "model", "build"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "cached"
    assert _run(["--json", "model", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["multilingual-e5-small"] == f"installed, built: {built['path']}"
    from robotmem.embeddings import multilingual

    monkeypatch.setattr(multilingual, "multilingual_available", lambda: False)
    assert _run(["--json", "model", "status"]) == 1
    assert "robotmem[multilingual]" in json.loads(capsys.readouterr().out)["multilingual-e5-small"]


def test_model_status_reports_a_damaged_file_and_model_build_repairs_it(
    _shared_model_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["model", "build"]) == 0
    built = Path(capsys.readouterr().out.strip().split(": ", 1)[1].rsplit(" (", 1)[0])
    models = tmp_path / "models"
    models.mkdir()
    for name in (built.name, built.name + ".sha256"):
        shutil.copyfile(built.with_name(name), models / name)
    damaged = models / built.name
    with damaged.open("r+b") as handle:  # a bad sector's worth of garbage; the file still loads
        handle.seek(60_000_000)
        handle.write(np.full(1024, 0.5, np.float32).tobytes())
    monkeypatch.setenv("ROBOTMEM_MODELS_DIR", str(models))

    assert _run(["model", "status"]) == 1
    assert "built fp32: " + str(damaged) + " DAMAGED" in capsys.readouterr().out
    assert _run(["--json", "model", "status"]) == 1
    assert json.loads(capsys.readouterr().out)["integrity"]["fp32"] == "damaged"

    assert _run(["--json", "model", "build"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "repaired"
    assert _run(["--json", "model", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["integrity"]["fp32"] == "verified"
    assert _run(["--json", "model", "build"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "cached"


def test_model_build_verifies_a_file_an_older_robotmem_built_without_a_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROBOTMEM_MODELS_DIR", str(tmp_path / "models"))
    assert _run(["--json", "model", "build"]) == 0
    path = Path(json.loads(capsys.readouterr().out)["path"])
    path.with_name(path.name + ".sha256").unlink()
    assert _run(["model", "status"]) == 0
    assert "no digest yet" in capsys.readouterr().out
    assert _run(["--json", "model", "build"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "verified"
