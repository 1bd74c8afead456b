"""Where commands read and write: common options anywhere, no empty stores made by reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robotmem import Memory
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


#: Nothing listens on port 1: a command that used this URL would fail with a storage error.
DEAD_FLEET_URL = "postgresql://fleet:secret@127.0.0.1:1/fleet"


def test_db_wins_over_robotmem_url_for_a_write(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOTMEM_URL", DEAD_FLEET_URL)
    db = tmp_path / "x.db"
    code, _, err = run(capsys, "--db", str(db), "--json", "learn", "explicit file memory")
    assert code == 0, err
    code, out, _ = run(capsys, "--db", str(db), "--json", "stats")
    assert code == 0 and json.loads(out)["facts"] == 1 and json.loads(out)["path"] == str(db)


def test_db_wins_over_robotmem_url_as_the_source_of_migrate(capsys, tmp_path: Path, postgres_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from robotmem import Memory

    with Memory(url=postgres_url, embedder=None) as fleet:
        for i in range(3):
            fleet.learn(f"fleet fact {i}")
    small = tmp_path / "small.db"
    with Memory(small, embedder=None) as mem:
        mem.learn("the only memory of the small store")
    monkeypatch.setenv("ROBOTMEM_URL", postgres_url)
    target = tmp_path / "copy.db"
    code, out, err = run(capsys, "--db", str(small), "--json", "migrate", "--to", str(target), "--no-progress")
    assert code == 0, err
    assert json.loads(out)["total"] == 1 and json.loads(out)["source"] == str(small)
    with Memory(target, embedder=None) as copy:
        assert copy.stats()["facts"] == 1 and copy.get(1)["content"] == "the only memory of the small store"


def test_migrate_into_a_file_writes_the_vector_snapshot_of_a_large_collection(
        capsys, tmp_path: Path, robotmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy into an embedded store ends as an import into it does: it left a large collection without
    its vector snapshot, so the next process's first recall loaded an exact mirror of the collection."""
    from robotmem.search import ann_index

    monkeypatch.setattr(ann_index, "MIN_ROWS", 60)  # 20,000 otherwise
    source = tmp_path / "robot.db"
    with Memory(source) as mem:
        mem.save_perceptions([{"description": f"bin {i} holds {i % 9 + 1} brackets"} for i in range(80)])
    target = tmp_path / "copy.db"
    code, out, err = run(capsys, "--db", str(source), "--json", "migrate", "--to", str(target), "--no-progress")
    assert code == 0, err
    assert [(w["collection"], w["rows"]) for w in json.loads(out)["vector_indexes"]] == [("default", 80)]
    with Memory(target) as copy:
        assert [(s["built"], s["stale"]) for s in copy.stats()["vector_indexes"]] == [(True, False)]


def test_serve_builds_its_config_as_every_command_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import robotmem.mcp.transports as transports

    seen = []
    monkeypatch.setattr(transports, "configure_logging", lambda: None)  # keeps pytest's log capture
    monkeypatch.setattr(transports, "run_stdio", seen.append)
    monkeypatch.setenv("ROBOTMEM_URL", DEAD_FLEET_URL)
    db = tmp_path / "x.db"
    assert main(["--db", str(db), "--collection", "lab", "serve"]) == 0
    assert main(["serve"]) == 0
    assert [(c.store_location, c.collection) for c in seen] == [(db, "lab"), (DEAD_FLEET_URL, "default")]


def test_ui_opens_the_store_of_db_and_url(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import robotmem.web.serve as web

    seen = []
    monkeypatch.setattr(web, "run_ui", lambda mem, **kwargs: seen.append((mem.location, mem.collection)))
    db = tmp_path / "x.db"
    Memory(db, embedder=None).close()  # the viewer opens an existing store only
    monkeypatch.setenv("ROBOTMEM_URL", DEAD_FLEET_URL)
    assert run(capsys, "--db", str(db), "--collection", "lab", "ui")[0] == 0
    assert seen == [(str(db), "lab")]
    monkeypatch.delenv("ROBOTMEM_URL")
    code, _, err = run(capsys, "--url", DEAD_FLEET_URL, "ui")  # --url was not read by ui at all
    assert code == 1 and "cannot connect to PostgreSQL at postgresql://fleet:***@127.0.0.1:1/fleet" in err


def test_a_url_that_cannot_be_parsed_is_an_error_naming_the_option(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "postgresql://u:SuperPW9@[::1/db"  # was a traceback: ValueError "Invalid IPv6 URL"
    code, out, err = run(capsys, "--url", bad, "stats")
    assert (code, out) == (1, "") and err.startswith("error (--url): url postgresql://u:***@[::1/db is not a valid")
    monkeypatch.setenv("ROBOTMEM_URL", bad)
    code, _, err = run(capsys, "--json", "stats")
    error = json.loads(err)["error"]
    assert code == 1 and error["field"] == "url" and "SuperPW9" not in err


def test_migrate_from_a_missing_file_says_so_and_creates_nothing_at_either_end(
        capsys, tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    typo = tmp_path / "typo-memroy.db"
    for target in (postgres_url, str(tmp_path / "copy.db")):
        code, out, err = run(capsys, "--db", str(typo), "migrate", "--to", target, "--no-progress")
        assert code == 1 and out == "" and "no memory store at" in err and str(typo) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["robotmem-home"]  # no typo file, no copy.db
    with psycopg.connect(postgres_url) as conn:  # no tables set up in the target either
        assert conn.execute("SELECT to_regclass('memories')").fetchone()[0] is None


def test_migrate_from_a_database_without_robotmem_tables_creates_none_there(
        capsys, tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    code, out, err = run(capsys, "--url", postgres_url, "migrate", "--to", str(tmp_path / "copy.db"), "--no-progress")
    assert code == 1 and out == "" and "no memory store at" in err and "no robotmem tables" in err
    with psycopg.connect(postgres_url) as conn:  # the mistyped source did not get robotmem's tables
        assert conn.execute("SELECT to_regclass('robotmem_schema')").fetchone()[0] is None
    empty = tmp_path / "empty.db"
    empty.touch()
    code, _, err = run(capsys, "--db", str(empty), "migrate", "--to", str(tmp_path / "copy2.db"), "--no-progress")
    assert code == 1 and "no robotmem tables" in err
    import apsw

    assert apsw.Connection(str(empty)).execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_migrate_to_a_url_that_cannot_be_parsed_is_refused_before_anything_opens(capsys, tmp_path: Path) -> None:
    from robotmem import Memory

    source = tmp_path / "robot.db"
    with Memory(source, embedder=None) as mem:
        mem.learn("the dock door sticks")
    code, _, err = run(capsys, "--db", str(source), "migrate", "--to", "postgresql://u:Super%zzPW9@db.lab/fleet")
    assert code == 1 and err.startswith("error (to): to postgresql://u:***@db.lab/fleet is not a valid PostgreSQL URL")
    assert "PW9" not in err
