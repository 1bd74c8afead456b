"""`robotmem replay --map` stores the occupancy map once; `--plot DIR` draws one PNG per replayed episode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from matplotlib.image import imread

from robotmem import Memory
from robotmem.view import latest_map

RunCli = Callable[..., tuple[int, str, str]]


def test_plot_draws_every_replayed_episode(run_cli: RunCli, datasets: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plots"
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--episode-split", "topic:/robotmem/episode",
                           "--plot", str(folder))
    assert code == 0, err
    with Memory(embedder=None) as mem:
        sessions = sorted(s["session_id"] for s in mem.list_sessions())
    assert sorted(p.stem for p in folder.glob("*.png")) == sessions and len(sessions) == 2
    assert all(imread(p).shape[0] > 400 for p in folder.glob("*.png"))


def test_map_is_stored_once_beside_the_replayed_run(run_cli: RunCli, shared_datasets: Path) -> None:
    tb3 = shared_datasets / "turtlebot3_nav_ros1_bag"
    for _ in range(2):
        code, _, err = run_cli("replay", str(tb3 / "rosbag_demo.bag"), "--robot-id", "tb3", "--map", str(tb3 / "map.yaml"))
        assert code == 0, err
    with Memory(embedder=None) as mem:
        stored = latest_map(mem)
        maps = mem.recall("", n=10, min_confidence=0.0, context_filter={"map.sha256": {"$exists": True}})["results"]
    assert stored is not None and (stored["width"], stored["height"], stored["resolution"]) == (124, 115, 0.05)
    assert len(maps) == 1 and maps[0]["context"]["robot"]["id"] == "tb3"


def test_a_broken_map_is_an_error_naming_it(run_cli: RunCli, datasets: Path, tmp_path: Path) -> None:
    (tmp_path / "map.yaml").write_text("image: nothing.pgm\nresolution: 0.05\norigin: [0, 0, 0]\n")
    code, _, err = run_cli("replay", str(datasets / "nav_demo.mcap"), "--map", str(tmp_path / "map.yaml"))
    assert code != 0 and "map.image" in err and "Traceback" not in err
