"""The packages stay type-clean, and the core never imports the bridges."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_finds_no_type_errors_in_the_packages(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "robotmem", "bridges", "--cache-dir", str(tmp_path / "mypy")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _python_blocks(markdown: Path, heading: str) -> str:
    """The first ```python block under ``heading`` in a doc."""
    section = markdown.read_text(encoding="utf-8").split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python example under {heading} in {markdown.name}"
    return match.group(1)


def test_user_code_type_checks_against_the_installed_packages(tmp_path: Path):
    """PEP 561: without py.typed (shipped as package data) mypy --strict refused every user
    script with import-untyped. The packages are laid out as a wheel lays them out (setuptools'
    build_py, which copies the package data the wheel holds) and put on the path mypy treats as
    installed packages; the scripts are the documented examples."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("robotmem", "bridges"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    installed = tmp_path / "site"
    built = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py",
                            "--build-lib", str(installed)], cwd=source, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (installed / "robotmem" / "py.typed").is_file() and (installed / "bridges" / "py.typed").is_file()

    user = tmp_path / "user"
    user.mkdir()
    (user / "quick_start.py").write_text(_python_blocks(ROOT / "README.md", "## Quick start (Python)"))
    (user / "replay_api.py").write_text(_python_blocks(ROOT / "docs" / "replay.md", "## Python"))
    env = {**os.environ, "PYTHONPATH": str(installed)}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy"), "quick_start.py",
         "replay_api.py"], cwd=user, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_robotmem_never_imports_bridges():
    offenders = []
    for path in (ROOT / "robotmem").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            if any(name == "bridges" or name.startswith("bridges.") for name in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_bridges_use_only_the_public_robotmem_api():
    """bridges/ may import robotmem and robotmem.errors/config/view, never the store or search internals;
    and robotmem.cli.output, whose rules the bridges' own commands (``robotmem replay``) print by."""
    allowed = {"robotmem", "robotmem.errors", "robotmem.config", "robotmem.view", "robotmem.cli.output"}
    offenders = []
    for path in (ROOT / "bridges").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("robotmem"):
                if node.module not in allowed:
                    offenders.append(f"{path.relative_to(ROOT)}: {node.module}")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names
                              if a.name.startswith("robotmem.") and a.name not in allowed]
    assert offenders == []
