"""Two replays of one recording into one store at once (a nightly job overlapping a manual run).

The first holds the recording (Memory.exclusive on its session prefix) while it replays it;
the second is refused, stores nothing and exits 1, so it never rewrites the episode the first
is writing. A replay killed inside an episode holds nothing any more: the next one rewrites
that episode, as docs/replay.md ("Idempotency") says.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from recordings import Msg, S, odometry, write_mcap

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_recording
from robotmem import ConflictError, Memory

REPO = Path(__file__).resolve().parents[3]
RunCli = Callable[..., tuple[int, str, str]]
MAY_2015 = 1432166400 * S

SECONDS = 40
HZ = 100  # 4,000 messages: the replay reports progress (every 2,000) inside its one episode

#: replays RECORDING into DB; at its first progress report, once its episode's session is
#: open, says "inside" and waits for a line on stdin (or to be killed); says why and exits 1
#: when no session opens
_REPLAY_AND_WAIT = """
import sys, time
from pathlib import Path
from robotmem import Memory
from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_recording
waited = []
with Memory(sys.argv[1], embedder=None) as mem:
    def progress(done, total):
        if waited:
            return
        # The writer thread opens it. The deadline only turns a regression that never opens one
        # into a failure (the parent reads this line instead of "inside") rather than a hung run.
        deadline = time.monotonic() + 300
        while not mem.list_sessions(status="open"):
            if time.monotonic() > deadline:
                print("no episode session opened within 300 s", flush=True)
                sys.exit(1)
            time.sleep(0.01)
        waited.append(done)
        print("inside", flush=True)
        sys.stdin.readline()
    replay_recording(mem, Path(sys.argv[2]), BridgeConfig(), ReplayOptions(), progress)
print("done", flush=True)
"""


def _drive(tmp_path: Path) -> Path:
    messages = [Msg("/odom", "nav_msgs/msg/Odometry", MAY_2015 + i * S // HZ,
                    odometry(MAY_2015 + i * S // HZ, i / HZ * 0.5, 0.0)) for i in range(SECONDS * HZ)]
    return write_mcap(tmp_path / "drive.mcap", messages)


def _replay_inside(db: Path, recording: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-c", _REPLAY_AND_WAIT, str(db), str(recording)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == "inside\n"
    return proc


def _stored_once(db: Path) -> tuple[int, int, int]:
    """(sessions, active records, duplicated (session, topic, occurred_at) keys) of the store."""
    with Memory(db, embedder=None) as mem:
        sessions = mem.list_sessions(limit=10**9)
        records = [r for s in sessions for r in mem.session_timeline(s["session_id"])["memories"]
                   if r.get("status", "active") == "active"]
    keys = collections.Counter((r["session_id"], r["context"]["source"].get("topic"), r["occurred_at"])
                               for r in records)
    return len(sessions), len(records), sum(1 for n in keys.values() if n > 1)


def test_a_second_replay_while_one_runs_is_refused_and_duplicates_nothing(
        tmp_path: Path, robotmem_home: Path, run_cli: RunCli) -> None:
    recording = _drive(tmp_path)
    db = robotmem_home / "memory.db"
    first = _replay_inside(db, recording)
    try:
        with Memory(db, embedder=None) as mem:
            (open_session,) = mem.list_sessions(status="open")
            before = len(mem.session_timeline(open_session["session_id"])["memories"])
            with pytest.raises(ConflictError) as refused:
                replay_recording(mem, recording, BridgeConfig(), ReplayOptions())
            assert refused.value.field == "path"
            assert "another replay of this recording into collection 'default' is running" in refused.value.message
            # The episode the first replay is writing was not forgotten nor written a second time.
            assert len(mem.session_timeline(open_session["session_id"])["memories"]) == before
        code, out, err = run_cli("replay", str(recording))
        assert code == 1
        assert f"error: {recording}: another replay of this recording" in err and "(skipped)" in err
        code, out, err = run_cli("replay", str(recording), "--collection", "other")  # another collection: its own
        assert code == 0, err
    finally:
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.flush()
        remaining, _ = first.communicate()
    assert first.returncode == 0 and remaining == "done\n"
    # One replay's episode per collection: 4 chunks of 10 s and a summary each, nothing twice.
    assert _stored_once(db) == (2, 2 * (SECONDS // 10 + 1), 0)


def test_an_episode_left_open_by_a_killed_replay_is_rewritten_by_the_next(
        tmp_path: Path, robotmem_home: Path, run_cli: RunCli) -> None:
    recording = _drive(tmp_path)
    db = robotmem_home / "memory.db"
    killed = _replay_inside(db, recording)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    code, out, err = run_cli("replay", str(recording))
    assert code == 0, err
    assert "episodes: 0 new, 0 already stored, 1 rewritten" in out
    assert _stored_once(db) == (1, SECONDS // 10 + 1, 0)
