"""``robotmem.cli.main``: how the command line ends when its reader closes stdout early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import EXIT_STDOUT_CLOSED, main

# Far more output than a pipe holds (64 KiB by default on Linux), so the command is still
# writing when the reader goes away, whatever the buffering.
RECORDS = 3000


@pytest.fixture
def long_episode(robotmem_home: Path) -> str:
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.save_perceptions([{"description": f"joint state sample {i} of the arm while it pushed the block "
                                              f"across the table towards the goal", "perception_type": "proprioceptive",
                               "session_id": sid, "embed": False} for i in range(RECORDS)])
    return str(sid)


def _first_line_then_close(*argv: str) -> tuple[bytes, int, str]:
    """``robotmem ARGV | head -1``: read one line, close the pipe, collect the exit and stderr."""
    # Python's default buffering, as the installed `robotmem` script has it: unbuffered
    # (PYTHONUNBUFFERED), one large write the reader cuts short returns a partial count, not an error.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "-m", "robotmem.cli.main", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return first, proc.wait(), err


@pytest.mark.parametrize("argv", [("session", "show", "{sid}"), ("--json", "session", "show", "{sid}"),
                                  ("export", "/dev/stdout"), ("export", "-")],
                         ids=["show", "json-show", "export", "export-dash"])
def test_a_reader_closing_stdout_early_ends_quietly(long_episode: str, argv: tuple[str, ...]):
    first, code, err = _first_line_then_close(*(word.format(sid=long_episode) for word in argv))
    assert first.strip()
    assert (code, err) == (EXIT_STDOUT_CLOSED, "")


@pytest.mark.parametrize("argv", [[], ["memory"], ["session"]])
def test_a_missing_command_is_a_usage_error_on_stderr(capsys, argv: list[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "usage: robotmem" in captured.err  # stdout stays for results (`| jq`)


@pytest.mark.parametrize("argv", [["recall", "cup", "--n", "3"], ["stats", "--co", "lab"]], ids=["n", "co"])
def test_a_prefix_of_an_option_is_a_usage_error_naming_it(capsys, robotmem_home: Path, argv: list[str]) -> None:
    # `--n 3` was taken for `--near 3` and refused as "spatial_sort.target must be [x, y] ...".
    with pytest.raises(SystemExit) as exited:
        main(argv)
    captured = capsys.readouterr()
    assert exited.value.code == 2
    assert captured.out == "" and f"unrecognized arguments: {argv[-2]} {argv[-1]}" in captured.err
