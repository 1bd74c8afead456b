"""Imports inside robotmem/ point down the layer order documented in README's Layout only."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "robotmem"

#: README's Layout, top to bottom; a module may import its own layer or a lower number.
LAYERS: dict[str, int] = {
    "errors": 1, "models": 1, "validation": 1, "context": 1, "payload": 1,
    "config": 2,
    "store": 3,
    "embeddings": 4, "search": 4,
    "consolidation": 5,
    "service": 6, "transfer": 6, "import_checks": 6, "import_index": 6, "whole_file": 6, "": 6,  # "" is the package itself (robotmem/__init__.py: the public API)
    "view": 7,
    "mcp": 8, "cli": 8, "web": 8, "__main__": 8,
}

def _module_of(path: Path, root: Path = ROOT) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute names of the robotmem modules ``path`` imports (anywhere in the file, lazily or not)."""
    package = _module_of(path, root) if path.name == "__init__.py" else _module_of(path, root)[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "robotmem"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "robotmem":
                continue
            # ``from . import validation`` may name modules; ``from .x import name`` names x's contents.
            found |= ({_submodule_or_package(root, target, alias.name) for alias in node.names}
                      if node.module is None else {target})
    return found


def _submodule_or_package(root: Path, package: str, name: str) -> str:
    folder = root.joinpath(*package.split("."))
    is_module = (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()
    return f"{package}.{name}" if is_module else package


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "")


def _upward_imports() -> tuple[set[tuple[str, str]], list[str]]:
    upward: set[tuple[str, str]] = set()
    unplaced: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = ".".join(_module_of(path))
        if _layer(here) is None:
            unplaced.append(here)
            continue
        for target in _imported(path):
            there = _layer(target)
            if there is None:
                unplaced.append(target)
            elif there > _layer(here):  # type: ignore[operator]
                upward.add((str(path.relative_to(ROOT)), target))
    return upward, unplaced


def test_every_module_has_a_documented_layer():
    _, unplaced = _upward_imports()
    assert unplaced == [], "place these in README's Layout and in LAYERS here"


def test_imports_point_down_the_layers_only():
    upward, _ = _upward_imports()
    assert upward == set(), "these imports run up the layers (README: Layout)"


def test_the_check_resolves_relative_imports(tmp_path: Path):
    """The resolver is not blind: a store module importing search is seen as importing layer 4."""
    probe = tmp_path / "robotmem" / "store" / "probe.py"
    probe.parent.mkdir(parents=True)
    (probe.parent / "rows.py").write_text("", encoding="utf-8")
    probe.write_text("from ..search import sql\nfrom . import rows\nimport robotmem.cli.main\nfrom .. import Memory\n"
                     "def f():\n    from ..service import Memory\n", encoding="utf-8")
    found = _imported(probe, tmp_path)
    assert found == {"robotmem", "robotmem.search", "robotmem.store.rows", "robotmem.cli.main", "robotmem.service"}
    assert [_layer(m) for m in sorted(found)] == [6, 8, 4, 6, 3]
