"""An episode as one PNG: its map (paths over the occupancy map) and its payload plots.

matplotlib is an optional extra (``pip install "robotmem[plot]"``); without it the
caller gets a ConfigError that says so, never an ImportError traceback.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["OUTCOME_COLOURS", "outcome_colour", "plot_episode", "render_episode"]

OUTCOME_COLOURS = {"ok": "#2e7d32", "fail": "#c62828", "unknown": "#1565c0"}


def outcome_colour(row: dict[str, Any]) -> str:
    """The same rule as the web view: success or score >= 0.5 green, failure red, else blue."""
    success, score = row.get("success"), row.get("outcome_score")
    if success is True or (success is None and score is not None and score >= 0.5):
        return OUTCOME_COLOURS["ok"]
    if success is False or (score is not None and score < 0.5):
        return OUTCOME_COLOURS["fail"]
    return OUTCOME_COLOURS["unknown"]


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display on robots and CI
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError('plots need matplotlib: pip install "robotmem[plot]"') from exc
    return plt


def _draw_map(ax: Any, detail: dict[str, Any], occupancy: dict[str, Any] | None) -> None:
    if occupancy and occupancy.get("pixels_base64"):
        pixels = np.frombuffer(base64.b64decode(occupancy["pixels_base64"]), dtype=np.uint8)
        pixels = pixels.reshape(occupancy["height"], occupancy["width"])
        x0, y0 = occupancy["origin"][:2]
        res = occupancy["resolution"]
        ax.imshow(pixels, cmap="gray", vmin=0, vmax=255, origin="upper",
                  extent=(x0, x0 + occupancy["width"] * res, y0, y0 + occupancy["height"] * res))
    colour = outcome_colour(detail["episode"])
    for path in detail["paths"]:
        for segment in path["segments"]:
            xs, ys = [p[0] for p in segment], [p[1] for p in segment]
            ax.plot(xs, ys, color=colour, linewidth=1.8)
    segments = [s for p in detail["paths"] for s in p["segments"] if s]
    if segments:
        ax.plot(*segments[0][0], marker="o", color="black", markerfacecolor="white")
        ax.plot(*segments[-1][-1], marker="s", color="black")
    frames = sorted({p["frame"] or "no frame" for p in detail["paths"]})
    ax.set_title(f"path ({', '.join(frames) or 'no pose data'})")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def _draw_series(ax: Any, title: str, series: list[tuple[str, list[float], list[float]]], unit: str) -> None:
    t0 = min(t[0] for _, t, _ in series)
    for name, t, v in series:
        ax.plot([x - t0 for x in t], v, label=name, linewidth=1.2)
    ax.set_title(title)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(unit)
    if len(series) <= 8:
        ax.legend(fontsize="small")


def _series_panels(detail: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[float], list[float]]], str]]:
    data = detail["series"]
    panels = []
    if data["joints"]:
        panels.append(("joint positions", [(j["name"], j["t"], j["v"]) for j in data["joints"]], "rad"))
    if data["forces"]:
        panels.append(("forces", [(f["name"], f["t"], f["v"]) for f in data["forces"]], ""))
    if data["scans"]:
        panels.append(("laser scan", [(s["name"], s["t"], s["v"]) for s in data["scans"]], "m"))
    return panels


def render_episode(detail: dict[str, Any], path: str | Path, occupancy: dict[str, Any] | None = None) -> Path:
    """Write ``episode_detail(...)`` as a PNG; returns the path written."""
    plt = _pyplot()
    panels = _series_panels(detail)
    figure, axes = plt.subplots(1 + len(panels), 1, figsize=(8, 4 + 3 * len(panels)), squeeze=False)
    row = detail["episode"]
    figure.suptitle(f"{row.get('robot') or ''} {row.get('task') or ''} {row['session_id']}".strip(), fontsize=10)
    _draw_map(axes[0][0], detail, occupancy)
    for ax, (title, series, unit) in zip((a[0] for a in axes[1:]), panels):
        _draw_series(ax, title, series, unit)
    figure.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def plot_episode(mem: Any, session_id: str, path: str | Path) -> Path:
    """Draw one stored episode to ``path`` (the stored occupancy map under it where frames agree)."""
    from .episodes import episode_detail
    from .occupancy import latest_map

    detail = episode_detail(mem, session_id)
    occupancy = latest_map(mem, collection=detail["episode"].get("collection"))
    frames = {p["frame"] for p in detail["paths"]}
    if occupancy is not None and not frames <= {occupancy["frame"], ""}:
        occupancy = None  # a map in another frame would put the path in the wrong place
    return render_episode(detail, path, occupancy)
