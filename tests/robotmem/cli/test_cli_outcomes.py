"""`robotmem outcomes`: the outcome statistics from the command line."""

import json
from pathlib import Path

from robotmem import Memory
from robotmem.cli.main import main


def _seed(home: Path) -> None:
    with Memory(home / "memory.db", embedder=None) as mem:
        for factor, ok, x in [(0.5, True, 0.0), (0.5, False, 0.1), (1.0, True, 0.2), (1.0, True, 5.0)]:
            mem.learn(f"push trial at x={x}", context={"params": {"push_factor": factor}, "task": {"success": ok},
                                                       "spatial": {"p": [x, 0.0]}})


def test_outcomes_as_json_and_as_a_table(capsys, robotmem_home: Path) -> None:
    _seed(robotmem_home)
    assert main(["--json", "outcomes", "params.push_factor", "--near", "spatial.p", "0", "0",
                 "--max-distance", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [(g["value"], g["count"], g["successes"]) for g in result["groups"]] == [(0.5, 2, 1), (1.0, 1, 1)]
    assert main(["outcomes", "params.push_factor", "--edges", "0", "0.75", "1.5"]) == 0
    table = capsys.readouterr().out
    assert "4 memories matched" in table
    assert "[0, 0.75)" in table and "[0.75, 1.5)" in table and "[0.342, 1.000]" in table


def test_outcomes_bad_input_names_the_field(capsys, robotmem_home: Path) -> None:
    assert main(["learn", "the block slid 0.2 m"]) == 0
    assert main(["outcomes", "params.push_factor", "-k", "3"]) == 1
    assert "(k)" in capsys.readouterr().err


def test_outcomes_near_with_frame_leaves_other_frames_out(capsys, robotmem_home: Path) -> None:
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        for frame, ok in [("map", True), ("odom", False), ("odom", False)]:
            mem.learn(f"dock attempt in {frame} {ok}", context={"params": {"speed": 0.2}, "task": {"success": ok},
                                                                "spatial": {"p": [0.0, 0.0], "frame": frame}})
    assert main(["--json", "outcomes", "params.speed", "--near", "spatial.p", "0", "0", "--max-distance", "1",
                 "--frame", "map"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert (group["count"], group["successes"]) == (1, 1)
