"""What people read: no raw JSON or Python reprs, the real model in stats, tables and timelines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import main

RAW = re.compile(r"""\{['"]|\[\{|\[\]|\{\}|\bNone\b|\bTrue\b|\bFalse\b|': """)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def episode(capsys, robotmem_home: Path) -> str:
    """An ended episode with a fact, a long note and a perception an hour later (a pause)."""
    with Memory(embedder="auto") as mem:
        sid = mem.start_session(context={"robot": {"id": "arm-2"}, "task": {"name": "pick"}})["session_id"]
        mem.learn("grip_force=9N held the wet glass bottle", context={"params": {"grip_force": {"value": 9}},
                  "task": {"success": True}}, session_id=sid)
        mem.learn("a very long note " + "about the gripper pads " * 12, session_id=sid)
        gap = {"start": 1.0, "end": 4.0, "duration_s": 3.0, "reason": "no messages", "topic": "/wrench"}
        mem.save_perceptions([{"description": "wrist force during the grasp", "perception_type": "tactile",
                               "data": {"t": [0.0, 0.1], "f": [1.0, 9.0]}, "metadata": {"gaps": [gap]},
                               "session_id": sid, "occurred_at": mem.now() + 3600}])
        mem.end_session(sid, outcome_score=0.9)
    capsys.readouterr()
    return sid


def test_stats_names_the_embedding_model_that_recall_uses(capsys, episode: str):
    code, out, _ = run(capsys, "stats", "--json")
    assert code == 0 and json.loads(out)["embedding_model"] == "all-MiniLM-L6-v2/fp32"
    code, out, _ = run(capsys, "stats")
    assert "embedding model: all-MiniLM-L6-v2/fp32" in out


def test_session_list_is_a_table(capsys, episode: str):
    code, out, _ = run(capsys, "session", "list")
    header, row = out.splitlines()
    assert code == 0 and header.split()[:3] == ["id", "robot", "task"]
    assert row.split()[:3] == [episode, "arm-2", "pick"] and "0.90" in row and "2 facts, 1 perceptions" in row


def test_session_show_is_a_timeline_one_line_per_record(capsys, episode: str):
    code, out, _ = run(capsys, "session", "show", episode)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"episode {episode}")
    records = [line for line in lines if re.search(r"#\d+ ", line)]
    assert len(records) == 3 and all(len(line) < 160 for line in lines)
    assert "…" in records[1]  # the long note is cut
    assert any(" start " in line for line in lines) and any(" end " in line and "0.90" in line for line in lines)
    assert any("1.0 h without records" in line for line in lines)  # the hour's pause is visible
    assert any("gap" in line and "/wrench" in line and "no messages" in line for line in lines)
    code, out, _ = run(capsys, "session", "show", episode, "--json")
    assert json.loads(out)["session"]["session_id"] == episode


def test_no_human_output_shows_raw_json_or_python_reprs(capsys, tmp_path: Path, episode: str):
    commands = [
        ("stats",), ("session", "list"), ("session", "show", episode), ("recall", "bottle"),
        ("learn", "the left pad is worn", "--context", '{"robot": {"id": "arm-2"}}'), ("memory", "get", "1"),
        ("memory", "get", "3", "--data"), ("update", "1", "grip_force=9N held the bottle"),
        ("forget", "2", "--reason", "duplicate"), ("export", str(tmp_path / "out.jsonl")),
        ("import", str(tmp_path / "out.jsonl")), ("reindex",), ("consolidate",), ("model", "status"),
        ("session", "start", "--context", '{"task": {"name": "x"}}'),
    ]
    offenders = []
    for argv in commands:
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        offenders += [f"{' '.join(argv)}: {line}" for line in out.splitlines() if RAW.search(line)]
    assert offenders == []


def test_ending_a_session_prints_its_summary_in_lines(capsys, robotmem_home: Path):
    run(capsys, "learn", "the charger of dock 3 is on the left wall")
    code, out, _ = run(capsys, "--json", "session", "start")
    sid = json.loads(out)["session_id"]
    run(capsys, "learn", "dock 3 charger contacts are dirty", "--session", sid)
    code, out, _ = run(capsys, "session", "end", sid, "--score", "0.5")
    assert code == 0 and f"session_id: {sid}" in out and not RAW.search(out)


def test_memory_get_and_session_start_print_times_as_utc(capsys, robotmem_home: Path):
    with Memory(embedder=None, clock=lambda: 1_800_000_000.0) as mem:
        mem.learn("the left pad is worn", context={"task": {"created_at": 5}})
    code, out, _ = run(capsys, "memory", "get", "1")
    lines = out.splitlines()
    assert code == 0
    for key in ("created_at", "occurred_at", "first_seen", "last_seen", "updated_at", "reinforced_at"):
        assert f"{key}: 2027-01-15 08:00:00 UTC" in lines
    assert "context.task.created_at: 5" in lines  # a context's keys are the user's, not robotmem's times
    code, out, _ = run(capsys, "session", "start")
    assert code == 0 and re.search(r"^started_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", out, re.MULTILINE), out


def test_the_data_of_a_memory_without_a_payload_is_null_or_a_sentence(capsys, robotmem_home: Path):
    with Memory(embedder=None) as mem:
        mem.learn("the left pad is worn")
    code, out, _ = run(capsys, "--json", "memory", "get", "1", "--data")
    assert code == 0 and json.loads(out) is None
    code, out, _ = run(capsys, "memory", "get", "1", "--data")
    assert code == 0 and out == "memory 1 has no data payload (only perceptions saved with data have one)\n"


def _strict(text: str):
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_json_output_is_strict_json_when_a_payload_holds_nan_or_inf(capsys, robotmem_home: Path):
    # A laser's inf and a sensor's NaN stay in the payload; --json writes them as summaries do.
    with Memory(embedder=None) as mem:
        mem.save_perception("laser ranges with one miss", "visual",
                            data={"ranges": [1.5, float("inf"), float("nan")], "max": float("-inf")})
    code, out, _ = run(capsys, "--json", "memory", "get", "1", "--data")
    assert code == 0 and _strict(out) == {"ranges": [1.5, {"float": "inf"}, {"float": "nan"}],
                                          "max": {"float": "-inf"}}
    code, out, _ = run(capsys, "--json", "memory", "get", "1")
    assert code == 0 and _strict(out)["payload"]["shape"]["max"] == {"float": "-inf"}


def test_times_stored_before_the_1970_to_9999_rule_are_shown_not_a_crash(capsys, robotmem_home: Path):
    """learn refuses them now (validation.epoch_seconds); an older store may still hold them."""
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        mem.learn("the left pad is worn", session_id=sid)
        mem.save_perception("the pad seen worn", session_id=sid)
        mem.end_session(sid)
        conn = mem._db.connection()
        conn.execute("UPDATE memories SET occurred_at = 1e300 WHERE id = 1")
        conn.execute("UPDATE memories SET occurred_at = -1e20 WHERE id = 2")
    code, out, _ = run(capsys, "memory", "get", "1")
    assert code == 0 and "occurred_at: 1e+300 (epoch seconds, not a date)" in out.splitlines()
    code, out, _ = run(capsys, "memory", "get", "2")
    assert code == 0 and "occurred_at: -1e+20 (epoch seconds, not a date)" in out.splitlines()
    code, out, _ = run(capsys, "session", "show", sid)
    assert code == 0 and "#1 the left pad is worn" in out and max(map(len, out.splitlines())) < 120
    code, out, _ = run(capsys, "session", "list")
    assert code == 0 and sid in out


def test_control_characters_a_memory_holds_are_escaped_for_people_and_kept_in_json(capsys, robotmem_home: Path):
    # an ESC stored in a memory reached the operator's terminal: `recall red` turned it red
    red = "the \x1b[31mred\x1b[0m cup\tis on the shelf\rFAKE \x9b2J"
    with Memory(embedder=None) as mem:
        mem.learn(red, context={"label": "\x1b]0;retitled\x07", "task": {"success": True}})
    for argv in (("recall", "cup", "--min-relevance", "0"), ("memory", "get", "1"), ("outcomes", "label")):
        code, out, _ = run(capsys, *argv)
        assert code == 0, argv
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), (argv, out)
        assert "\\x1b" in out, (argv, out)
    code, out, _ = run(capsys, "memory", "get", "1")
    assert "the \\x1b[31mred\\x1b[0m cup\tis on the shelf\\x0dFAKE \\x9b2J" in out  # tab kept: it is layout
    code, out, _ = run(capsys, "--json", "recall", "cup", "--min-relevance", "0")
    assert code == 0 and not re.search(r"[\x00-\x1f\x7f-\x9f]", out.replace("\n", ""))
    assert json.loads(out)["results"][0]["content"] == red  # lossless
