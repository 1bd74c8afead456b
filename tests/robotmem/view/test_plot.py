"""`session show --plot`: a PNG with the path in the outcome's colour and the payload plots."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from robotmem import Memory
from robotmem.view.plot import OUTCOME_COLOURS

REPO = Path(__file__).resolve().parents[3]


def _has_colour(png: np.ndarray, hex_colour: str) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return int((np.abs(png[..., :3] - rgb).max(axis=-1) < 0.02).sum())


def test_session_show_plot_draws_the_episode(run_replay, tmp_path: Path) -> None:
    run_replay(REPO / "datasets" / "nav_demo.mcap", "--episode-split", "topic:/robotmem/episode")
    with Memory(embedder=None) as mem:
        session = next(s for s in mem.list_sessions() if s["outcome_score"] == 0.9)
    target = tmp_path / "episode.png"
    proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "session", "show", session["session_id"],
                           "--plot", str(target)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    png = imread(target)
    assert png.shape[0] > png.shape[1] > 400  # a map panel above joint and laser panels
    assert _has_colour(png, OUTCOME_COLOURS["ok"]) > 200  # outcome 0.9: the path is drawn green
    assert _has_colour(png, OUTCOME_COLOURS["fail"]) == 0


def test_without_matplotlib_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from robotmem.view.plot import render_episode\n"
            "from robotmem.errors import ConfigError\n"
            "try:\n    render_episode({}, 'x.png')\nexcept ConfigError as e:\n    print(e.message)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert 'pip install "robotmem[plot]"' in proc.stdout, proc.stderr


def test_the_python_snippet_in_ui_md_runs_as_written(run_replay, tmp_path: Path) -> None:
    run_replay(REPO / "datasets" / "nav_demo.mcap", "--episode-split", "topic:/robotmem/episode")
    (snippet,) = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "ui.md").read_text(encoding="utf-8"), re.DOTALL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    runs = [subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, cwd=tmp_path, env=env)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    first, again = (r.stdout.splitlines() for r in runs)
    assert re.fullmatch(r"\{'memory_id': \d+, 'status': 'created'\}", first[0])
    assert again[0] == first[0].replace("created", "exists")  # the map is stored once
    with Memory(embedder=None) as mem:
        sessions = [s["session_id"] for s in mem.list_sessions()]
    assert sorted(first[1:]) == sorted(f"{sid}.png" for sid in sessions) and len(sessions) == 2
    assert all(imread(tmp_path / name).shape[0] > 400 for name in first[1:])
