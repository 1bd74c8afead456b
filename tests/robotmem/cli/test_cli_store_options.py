"""Where commands read and write: common options anywhere, no empty stores made by reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robotmem.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv", [("stats",), ("recall", "bottle"), ("session", "list"), ("session", "show", "s1"),
                                  ("memory", "get", "1"), ("export", "out.jsonl"), ("forget", "1", "--reason", "x"),
                                  ("reindex",), ("consolidate",)])
def test_commands_on_a_missing_store_say_so_and_create_nothing(capsys, robotmem_home: Path, argv: tuple[str, ...]):
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert "no memory store at" in err and "robotmem demo" in err
    assert list(robotmem_home.iterdir()) == []  # no memory.db, no model built


def test_a_mistyped_db_is_named_and_not_created(capsys, tmp_path: Path, robotmem_home: Path):
    typo = tmp_path / "typo.db"
    code, _, err = run(capsys, "stats", "--db", str(typo))
    assert code == 1 and "(--db)" in err and str(typo) in err
    assert not typo.exists()


def test_common_options_work_before_and_after_the_verb(capsys, tmp_path: Path, robotmem_home: Path):
    db = tmp_path / "lab.db"
    assert run(capsys, "learn", "the lab door sticks", "--db", str(db), "--collection", "lab")[0] == 0
    code, out, _ = run(capsys, "stats", "--db", str(db), "--json", "--collection", "lab")
    assert code == 0 and json.loads(out)["facts"] == 1
    code, out, _ = run(capsys, "--db", str(db), "--collection", "lab", "--json", "recall", "door")
    assert code == 0 and json.loads(out)["results"][0]["collection"] == "lab"
    code, out, _ = run(capsys, "session", "list", "--home", str(robotmem_home), "--db", str(db))
    assert code == 0 and out.strip() == "no episodes"
    assert not (robotmem_home / "memory.db").exists()  # every command above used --db


def test_an_option_after_the_verb_wins_over_the_environment_but_not_over_absence(
    capsys, tmp_path: Path, robotmem_home: Path
):
    other = tmp_path / "other-home"
    assert run(capsys, "learn", "only in the other home", "--home", str(other))[0] == 0
    assert (other / "memory.db").is_file() and not (robotmem_home / "memory.db").exists()
    code, out, _ = run(capsys, "--home", str(other), "stats", "--json")  # root value kept by the verb
    assert code == 0 and json.loads(out)["facts"] == 1
