"""Printing results: JSON for machines (--json), short lines for people."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

__all__ = ["emit", "progress_printer"]


def emit(value: Any, as_json: bool, out: TextIO | None = None) -> None:
    out = out if out is not None else sys.stdout
    if as_json:
        out.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")
        return
    if isinstance(value, dict) and "results" in value:
        out.write(f"mode: {value.get('mode')}  results: {value.get('count')}\n")
        for hit in value["results"]:
            extra = f"  d={hit['distance']:.3f}" if hit.get("distance") is not None else ""
            kind = hit["perception_type"] or hit["type"]
            out.write(f"#{hit['id']:<6} {hit['score']:.3f}{extra}  [{kind}]  {hit['content']}\n")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            rendered = json.dumps(item, ensure_ascii=False, default=str) if isinstance(item, (dict, list)) else item
            out.write(f"{key}: {rendered}\n")
        return
    if isinstance(value, list):
        for item in value:
            out.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")
        return
    out.write(f"{value}\n")


def progress_printer(label: str, out: TextIO | None = None) -> Any:
    """A one-line progress bar on stderr: ``label [#####.....] 50% 500/1000``."""
    out = out if out is not None else sys.stderr

    def show(done: int, total: int) -> None:
        width = 30
        fraction = done / total if total else 1.0
        bar = "#" * int(fraction * width)
        out.write(f"\r{label} [{bar:<{width}}] {fraction:4.0%} {done}/{total}")
        if done >= total:
            out.write("\n")
        out.flush()

    return show
