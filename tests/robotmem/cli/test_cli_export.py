"""`robotmem export` / `import` as processes: stopped mid-write, and through pipes (``-``)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robotmem import Memory

CLI = [sys.executable, "-m", "robotmem.cli.main"]


def _env() -> dict[str, str]:
    return {**os.environ, "ROBOTMEM_EMBEDDINGS": "off"}


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4,000 perceptions with payloads (about 8 MB of export): long enough to stop mid-write."""
    path = tmp_path_factory.mktemp("big") / "big.db"
    with Memory(path, embedder=None) as mem:
        sid = mem.start_session(context={"task": {"name": "push"}})["session_id"]
        for batch in range(8):
            mem.save_perceptions([{"description": f"push {batch}.{i}: the cube slid 机器人",
                                   "perception_type": "tactile", "session_id": sid,
                                   "data": {"f": [0.1 * j + i for j in range(100)]}} for i in range(500)])
        mem.end_session(sid, outcome_score=0.5)
    return path


def _temporaries(directory: Path) -> list[Path]:
    return sorted(directory.glob(".backup.jsonl.*.tmp"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_export_stopped_mid_write_leaves_the_previous_backup_byte_identical(big_store: Path, tmp_path: Path,
                                                                               sig: signal.Signals):
    backup = tmp_path / "backup.jsonl"
    subprocess.run([*CLI, "--db", str(big_store), "export", str(backup)], env=_env(), check=True,
                   capture_output=True, timeout=600)
    previous = backup.read_bytes()
    assert json.loads(previous.splitlines()[-1]) == {"kind": "end", "sessions": 1, "memories": 4000}
    # The export must get Ctrl-C as a terminal sends it. A test run started in the background of a
    # non-interactive shell has SIGINT ignored, children inherit that, and the export then ran to its
    # end (exit 0). A handler set here is reset to the default in the child.
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([*CLI, "--db", str(big_store), "export", str(backup)], env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    signalled = False
    while proc.poll() is None:  # once the temporary file holds some of the export
        temps = _temporaries(tmp_path)
        try:
            if temps and temps[0].stat().st_size > 100_000:
                proc.send_signal(sig)
                signalled = True
                break
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    out, err = proc.communicate(timeout=600)
    assert signalled, f"the export ended before it was signalled: {out!r} {err!r}"
    assert proc.returncode == (-signal.SIGTERM if sig == signal.SIGTERM else 130), err
    assert backup.read_bytes() == previous
    assert _temporaries(tmp_path) == []  # removed on the way out
    assert out == b""  # no summary: nothing was exported


def test_the_temporary_file_of_a_killed_export_is_removed_by_the_next_export(big_store: Path, tmp_path: Path):
    """SIGKILL (the OOM killer, a watchdog) cannot be caught, so its temporary file stays; the
    kernel drops the dead writer's lock, and the next export to that backup removes the file."""
    backup = tmp_path / "backup.jsonl"
    proc = subprocess.Popen([*CLI, "--db", str(big_store), "export", str(backup)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed = False
    while proc.poll() is None:
        temps = _temporaries(tmp_path)
        try:
            if temps and temps[0].stat().st_size > 100_000:
                proc.kill()
                killed = True
                break
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    proc.communicate(timeout=600)
    assert killed, "the export ended before it was killed"
    left = _temporaries(tmp_path)
    assert len(left) == 1 and not backup.exists()
    old = time.time() - 3600  # as a nightly backup finds last night's leftover
    os.utime(left[0], (old, old))
    subprocess.run([*CLI, "--db", str(big_store), "export", str(backup)], env=_env(), check=True,
                   capture_output=True, timeout=600)
    assert _temporaries(tmp_path) == []
    assert json.loads(backup.read_bytes().splitlines()[-1])["memories"] == 4000


def test_a_file_cut_short_is_refused_by_the_cli_with_exit_1(big_store: Path, tmp_path: Path):
    backup = tmp_path / "backup.jsonl"
    subprocess.run([*CLI, "--db", str(big_store), "export", str(backup)], env=_env(), check=True,
                   capture_output=True, timeout=600)
    lines = backup.read_bytes().splitlines(keepends=True)
    (tmp_path / "cut.jsonl").write_bytes(b"".join(lines[:3000]))
    proc = subprocess.run([*CLI, "--db", str(tmp_path / "new.db"), "import", str(tmp_path / "cut.jsonl")],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "cut.jsonl: nothing imported: the file stops at line 3,000 without the end record" in proc.stderr
    assert "after 1 sessions and 2,998 memories" in proc.stderr and "--allow-incomplete" in proc.stderr
    with Memory(tmp_path / "new.db", embedder=None) as mem:
        assert mem.stats()["memories"] == 0
    proc = subprocess.run([*CLI, "--json", "--db", str(tmp_path / "new.db"), "import", "--allow-incomplete",
                           str(tmp_path / "cut.jsonl")], env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and json.loads(proc.stdout)["memories"] == 2998
    assert "importing the records it holds" in proc.stderr


def test_export_to_stdout_piped_into_import_from_stdin_round_trips_a_store(big_store: Path, tmp_path: Path):
    """``robotmem export - | robotmem import -``: stdout holds only the JSON Lines, the summaries go to stderr."""
    export = subprocess.Popen([*CLI, "--json", "--db", str(big_store), "export", "-"], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert export.stdout is not None
    imported = subprocess.run([*CLI, "--json", "--db", str(tmp_path / "copy.db"), "import", "-"], env=_env(),
                              stdin=export.stdout, capture_output=True, text=True, timeout=600)
    export.stdout.close()
    export_err = export.stderr.read().decode() if export.stderr else ""
    assert export.wait(timeout=600) == 0, export_err
    assert json.loads(export_err) == {"sessions": 1, "memories": 4000}
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["memories"] == 4000
    assert not (tmp_path / "-").exists() and not Path("-").exists()
    with Memory(big_store, embedder=None) as source, Memory(tmp_path / "copy.db", embedder=None) as copy:
        assert copy.stats()["memories"] == source.stats()["memories"] == 4000
        hit = copy.recall("push 7.499", n=1, min_relevance=0)["results"][0]
        assert copy.get_data(hit["id"]) == source.get_data(hit["id"])


def test_export_to_stdout_writes_only_json_lines_there(tmp_path: Path):
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        mem.learn("the left door sticks 机器人")
    for argv in (["export", "-"], ["--json", "export", "-"], ["export", "/dev/stdout"],
                 ["--json", "export", "/dev/stdout"]):
        with (tmp_path / "out.jsonl").open("wb") as out:  # redirected to a file, as `> out.jsonl` does
            proc = subprocess.run([*CLI, "--db", str(tmp_path / "m.db"), *argv], env=_env(), stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=600)
        assert proc.returncode == 0, (argv, proc.stderr)
        lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [line["kind"] for line in lines] == ["header", "memory", "end"], argv
        assert lines[1]["content"] == "the left door sticks 机器人"
        summary = json.loads(proc.stderr) if "--json" in argv else proc.stderr
        assert summary == ({"sessions": 0, "memories": 1} if "--json" in argv else "sessions: 0\nmemories: 1\n")


def test_a_file_named_dash_is_written_as_dot_slash_dash(tmp_path: Path):
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        mem.learn("the left door sticks")
    proc = subprocess.run([*CLI, "--db", str(tmp_path / "m.db"), "export", "./-"], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout == "sessions: 0\nmemories: 1\n"
    assert json.loads((tmp_path / "-").read_text().splitlines()[-1])["kind"] == "end"
