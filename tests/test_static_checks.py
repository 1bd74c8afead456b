"""The packages stay type-clean, and the core never imports the bridges."""

import ast
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
    """bridges/ may import robotmem and robotmem.errors/config, never the store or search internals."""
    allowed = {"robotmem", "robotmem.errors", "robotmem.config", "robotmem.view"}
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
