"""A note robotmem refuses rejects that note only: the recording and the folder replay on."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from robotmem import Memory

RunCli = Callable[..., tuple[int, str, str]]
S = 1_000_000_000
T0 = 1_735_689_600 * S
ODOM = "nav_msgs/msg/Odometry"
STRING = "std_msgs/msg/String"


def _drive(make_datasets: ModuleType, t0: int, seconds: int, notes: list[str]) -> list[tuple[int, str, str, dict]]:
    messages = [(t0 + i * S // 10, "/odom", ODOM, make_datasets.odometry(t0 + i * S // 10, 0.05 * i, 0.0, 0.0, 0.5, 0.0))
                for i in range(seconds * 10)]
    messages += [(t0 + S + i, "/robotmem/learn", STRING, make_datasets.string(note)) for i, note in enumerate(notes)]
    return sorted(messages, key=lambda m: m[0])


def test_a_note_robotmem_refuses_is_counted_and_the_folder_replays_on(
        run_cli: RunCli, tmp_path: Path, make_datasets: ModuleType, robotmem_home: Path) -> None:
    folder = tmp_path / "recordings"
    folder.mkdir()
    bad_context = json.dumps({"insight": "the door was open", "context": {"spatial": "not an object"}})
    make_datasets.write_mcap(folder / "a_notes.mcap",
                             _drive(make_datasets, T0, 3, ["y" * 400, bad_context, "the hallway was clear"]))
    make_datasets.write_mcap(folder / "b_drive.mcap", _drive(make_datasets, T0 + 100 * S, 3, ["dock reached"]))

    code, out, err = run_cli("--json", "replay", str(folder))

    assert code == 0, err  # rejected notes are reported, not a failed run (see docs/replay.md)
    first, second = json.loads(out)["recordings"]
    notes = first["stats"]["topics"]["/robotmem/learn"]
    assert (notes["messages"], notes["rejected"], notes["records"]) == (3, 2, 1)
    assert "300" in notes["rejected_reason"]
    assert second["stats"]["topics"]["/robotmem/learn"]["records"] == 1
    assert "a_notes.mcap: /robotmem/learn: 2 record(s) refused by robotmem" in err
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        assert mem.list_sessions(status="open") == []
        assert len(mem.list_sessions(status="ended")) == 2


def test_the_summary_table_shows_rejected_notes(run_cli: RunCli, tmp_path: Path, make_datasets: ModuleType) -> None:
    path = tmp_path / "notes.mcap"
    make_datasets.write_mcap(path, _drive(make_datasets, T0, 2, ["y" * 400]))
    code, out, _ = run_cli("replay", str(path))
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.split() and line.split()[0] == "/robotmem/learn"]
    assert "1 rejected" in row
