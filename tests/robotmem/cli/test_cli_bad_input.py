"""Bad input on the command line: one line naming the field, a non-zero exit, no traceback, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str, field: str) -> None:
    assert err.startswith(f"error ({field}): ") and err.count("\n") == 1, err


# os.fsdecode turns argv bytes that are not UTF-8 into lone surrogates: b"\xff" arrives as "\udcff".
BAD = os.fsdecode(b"\xff\xfe bad bytes")


@pytest.mark.parametrize("argv, field", [
    (("learn", BAD), "insight"),
    (("recall", BAD), "query"),
    (("outcomes", "params.f", "--query", BAD), "query"),
])
def test_undecodable_free_text_is_a_one_line_error(capsys, robotmem_home: Path, argv: tuple[str, ...], field: str):
    Memory(robotmem_home / "memory.db", embedder=None).close()
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    _one_error_line(err, field)


def test_undecodable_update_and_reason_keep_the_memory(capsys, robotmem_home: Path):
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        memory_id = str(mem.learn("the gripper slipped on the wet bottle")["memory_id"])
    code, _, err = run(capsys, "update", memory_id, BAD)
    assert code == 1
    _one_error_line(err, "new_content")
    code, _, err = run(capsys, "forget", memory_id, "--reason", BAD)
    assert code == 1
    _one_error_line(err, "reason")
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        kept = mem.get(int(memory_id))
    assert (kept["content"], kept["status"]) == ("the gripper slipped on the wet bottle", "active")


def test_undecodable_bytes_in_a_real_argv_are_named(robotmem_home: Path):
    proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "learn", b"\xff\xfe bad bytes"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error (insight): ") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("option", ["--db", "--home"])
def test_a_store_path_that_is_not_utf8_names_the_option_and_creates_nothing(capsys, tmp_path: Path, option: str):
    code, out, err = run(capsys, option, str(tmp_path / "bad" / os.fsdecode(b"\xff.db")), "learn", "hello there")
    assert code == 1 and out == ""
    _one_error_line(err, option)
    assert "\\xff" in err and not (tmp_path / "bad").exists()


def test_importing_a_binary_file_names_the_file_and_line(capsys, tmp_path: Path, robotmem_home: Path):
    dump = tmp_path / "bin.jsonl"
    dump.write_bytes(b"\xff\xfe\n")
    code, out, err = run(capsys, "import", str(dump))
    assert code == 1 and out == ""
    _one_error_line(err, "path")
    assert "bin.jsonl" in err and "line 1: not UTF-8" in err


@pytest.mark.parametrize("argv", [("recall", "grip"), ("outcomes", "params.f")])
def test_max_distance_without_near_is_an_error(capsys, robotmem_home: Path, argv: tuple[str, ...]):
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        mem.learn("grip the cup with 5 N", context={"params": {"f": 5}, "spatial": {"p": [0, 0]}})
    code, out, err = run(capsys, *argv, "--max-distance", "0.2")
    assert code == 1 and out == ""
    _one_error_line(err, "--max-distance")


def test_recall_of_an_unknown_session_is_not_found(capsys, robotmem_home: Path):
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        mem.learn("grip the cup with 5 N")
    code, out, err = run(capsys, "recall", "grip", "--session", "ses_doesnotexist")
    assert code == 1 and out == ""
    _one_error_line(err, "session_id")


def test_a_collection_ending_in_a_newline_is_refused_from_the_option_and_the_environment(
        capsys, robotmem_home: Path, monkeypatch: pytest.MonkeyPatch):
    # `$` in the collection pattern matched before a final newline: "lab\n" was a second collection
    Memory(robotmem_home / "memory.db", embedder=None).close()
    code, out, err = run(capsys, "--collection", "lab\n", "learn", "the lab door sticks")
    assert code == 1 and out == ""
    _one_error_line(err, "collection")
    monkeypatch.setenv("ROBOTMEM_COLLECTION", "lab\n")
    code, out, err = run(capsys, "stats")
    assert code == 1 and out == ""
    _one_error_line(err, "collection")


@pytest.mark.parametrize("value, says", [
    ("", "must be a file path"),                       # `--home "$DIR"` with DIR unset: not the current folder
    ("~no-such-user-here/x", "names no home directory"),
    ("/tmp/" + "e" * 260 + "/x", "holds a name of 260 bytes"),
])
@pytest.mark.parametrize("option", ["--db", "--home"])
def test_a_store_path_no_file_system_takes_names_the_option_and_creates_nothing(
        capsys, tmp_path: Path, monkeypatch, option: str, value: str, says: str):
    cwd = tmp_path / "cron"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for command in (("learn", "hello there"), ("stats",), ("export", str(cwd / "b.jsonl"))):
        code, out, err = run(capsys, option, value, *command)
        assert code == 1 and out == "", (command, out)
        _one_error_line(err, option)
        assert says in err and "Traceback" not in err
    assert list(cwd.iterdir()) == []


def test_output_in_a_locale_that_cannot_show_chinese_is_escaped_not_a_traceback(robotmem_home: Path):
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        mem.learn("机器人抓取杯子需要12牛的力")
    env = {**os.environ, "ROBOTMEM_HOME": str(robotmem_home), "PYTHONIOENCODING": "latin-1"}
    as_json = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "--json", "recall", "12", "--min-relevance", "0"],
                             capture_output=True, env=env)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["results"][0]["content"] == "机器人抓取杯子需要12牛的力"  # \u escapes, lossless
    as_text = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "recall", "12", "--min-relevance", "0"],
                             capture_output=True, env=env)
    assert as_text.returncode == 0 and b"Traceback" not in as_text.stderr
    assert b"\\u673a\\u5668\\u4eba" in as_text.stdout  # shown as escapes the terminal can print


def test_a_folder_given_as_the_store_file_says_so(capsys, tmp_path: Path) -> None:
    for command in (("learn", "hello there"), ("stats",)):
        code, out, err = run(capsys, "--db", str(tmp_path), *command)
        assert code == 1 and out == ""
        _one_error_line(err, "--db")
        assert f"{tmp_path} is a folder" in err and str(tmp_path / "memory.db") in err
