"""Commands that say what they do: demo reruns, reindex, progress bars, the bridge hint, help texts."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_second_demo_adds_nothing(capsys, robotmem_home: Path):
    assert run(capsys, "demo")[0] == 0
    with Memory(embedder=None) as mem:
        first = mem.stats()
    code, out, _ = run(capsys, "demo")
    with Memory(embedder=None) as mem:
        again = mem.stats()
    assert code == 0 and "already in" in out and "grip_force=9N held the wet glass bottle" in out
    assert (again["facts"], again["perceptions"], again["sessions"]) == (first["facts"], first["perceptions"], 1)


def test_demo_with_json_prints_only_json_first_time_and_again(capsys, robotmem_home: Path):
    code, out, err = run(capsys, "--json", "demo")
    # The first run may build the embedding model, whose progress lines go to stderr; no narration does.
    assert code == 0 and json.loads(out)["session"]["memories"] == 3
    assert "learn #" not in err and "recall" not in err
    code, out, err = run(capsys, "--json", "demo")
    assert code == 0 and json.loads(out)["recall"]["results"] and err == ""


def test_reindex_embeds_what_is_missing_and_all_with_all(capsys, robotmem_home: Path):
    run(capsys, "learn", "the gripper slipped on the wet glass bottle")
    run(capsys, "learn", "the charger LED blinks red")
    code, out, _ = run(capsys, "reindex")
    assert code == 0 and out.strip() == "embedded 0 of 0 memories with all-MiniLM-L6-v2/fp32"
    code, out, _ = run(capsys, "--json", "reindex", "--all")
    assert json.loads(out) == {"model_id": "all-MiniLM-L6-v2/fp32", "reembedded": 2, "total": 2,
                               "kept_other_models": {}, "vector_indexes": []}
    assert "--all" in _help_of("reindex") and "--replace-other-models" in _help_of("reindex")


def _help_of(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command].format_help()


def _run_on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """Run the CLI with stderr on a pseudo-terminal; returns what it drew there."""
    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a pty starts 0 columns wide
    proc = subprocess.Popen([sys.executable, "-m", "robotmem", *argv], stdout=subprocess.DEVNULL, stderr=child_fd,
                            env=env)
    os.close(child_fd)
    drawn = b""
    while True:
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    proc.wait(timeout=300)
    os.close(main_fd)
    assert proc.returncode == 0, drawn
    return drawn.decode(errors="replace")


def test_progress_bars_only_on_a_terminal_and_never_with_no_progress(capsys, robotmem_home: Path):
    run(capsys, "learn", "the gripper slipped on the wet glass bottle")
    env = dict(os.environ)
    assert "100%" in _run_on_a_terminal(["reindex", "--all"], env)
    assert "100%" not in _run_on_a_terminal(["reindex", "--all", "--no-progress"], env)
    piped = subprocess.run([sys.executable, "-m", "robotmem", "reindex", "--all"], capture_output=True, text=True,
                           timeout=300, env=env)
    assert piped.returncode == 0 and piped.stderr == ""
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.end_session(sid)
    assert "100%" in _run_on_a_terminal(["consolidate"], env)
    assert "100%" not in _run_on_a_terminal(["consolidate", "--no-progress"], env)


def test_bridge_without_the_ros_extra_says_what_to_install(robotmem_home: Path):
    script = ("import sys; sys.modules['roslibpy'] = None  # as if the [ros] extra were not installed\n"
              "from robotmem.cli.main import main; sys.exit(main(['bridge']))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "invalid choice" not in proc.stderr
    assert "bridge needs roslibpy" in proc.stderr and "pip install 'robotmem[ros]'" in proc.stderr


def _options(parser: argparse.ArgumentParser, path: str = "robotmem") -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _options(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((f"{path} {'/'.join(action.option_strings) or action.dest}", action))
    return found


def _commands(parser: argparse.ArgumentParser, path: str = "robotmem") -> list[tuple[str, str | None]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                found.append((f"{path} {name}", helps.get(name)))
                found += _commands(child, f"{path} {name}")
    return found


def test_every_option_has_help_in_lower_case_and_every_command_a_sentence():
    parser = build_parser()
    options = _options(parser)
    assert len(options) > 60
    assert [name for name, action in options if not action.help] == []
    capitalised = [name for name, action in options if action.help and action.help[0].isupper() and action.help[1:2].islower()]
    assert capitalised == []  # option help reads like argparse's own: "show this help message and exit"
    commands = _commands(parser)
    assert [name for name, help in commands if not help or not help[0].isupper() or not help.endswith(".")] == []


def test_the_command_line_imports_no_store_model_or_server_to_parse(tmp_path: Path):
    script = ("import sys\nfrom robotmem.cli.main import build_parser\nbuild_parser().format_help()\n"
              "heavy = ['numpy', 'onnxruntime', 'apsw', 'mcp', 'robotmem.service', 'bridges.pipeline', 'roslibpy']\n"
              "print([m for m in heavy if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_an_embedded_store_loads_no_postgresql_driver(tmp_path: Path):
    """psycopg took 110 ms of every command's start on an embedded store (docs/benchmarks.md)."""
    script = ("import sys\nfrom robotmem.cli.main import main\n"
              f"main(['--db', {str(tmp_path / 'm.db')!r}, 'learn', 'the gripper slipped on wet glass'])\n"
              f"main(['--db', {str(tmp_path / 'm.db')!r}, 'recall', 'gripper slipped'])\n"
              f"main(['--db', {str(tmp_path / 'm.db')!r}, 'stats'])\n"
              "print([m for m in sys.modules if m.startswith(('psycopg', 'robotmem.store.postgres', "
              "'robotmem.search.postgres'))], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_a_built_in_command_skips_looking_for_plugins_but_help_lists_them():
    script = ("import sys\nfrom robotmem.cli.main import build_parser\n"
              "build_parser(['--db', 'x.db', 'stats', '--json'])\n"
              "build_parser(['--url', 'postgresql://robotmem@db.lab/robotmem', 'stats'])\n"
              "print('importlib.metadata' in sys.modules)\n"
              "print('replay' in build_parser(['--help']).format_help())")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_stats_warns_when_the_store_holds_vectors_recall_does_not_compare(capsys, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "search"))
    from given_vectors import GivenVectors

    db = tmp_path / "fleet.db"
    assert run(capsys, "--db", str(db), "learn", "the charger LED blinks red")[0] == 0
    code, out, _ = run(capsys, "--db", str(db), "stats")
    assert code == 0 and "warning" not in out  # one model: nothing to say
    with Memory(db, embedder=GivenVectors()) as other_server:  # a server configured with another model
        other_server.learn("the dock door sticks")
    code, out, _ = run(capsys, "--db", str(db), "stats")
    assert code == 0
    assert (f"warning: recall with all-MiniLM-L6-v2/fp32 does not compare the vectors of {GivenVectors.model_id} "
            "(those memories are found by full text only)") in out
