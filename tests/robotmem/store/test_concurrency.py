"""Several threads and processes share one file: no 'database is locked' reaches a caller."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from robotmem import Memory

WRITER = textwrap.dedent(
    """
    import sys
    from robotmem import Memory
    path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Memory(path, embedder=None) as mem:
        for i in range(count):
            mem.learn(f"{tag} note {i}")
            mem.recall(f"{tag} note")
            if i % 10 == 0:
                mem.save_perceptions([{"description": f"{tag} batch {i} item {j}"} for j in range(20)])
    print("done")
    """
)


def test_threads_writing_and_reading_concurrently_all_succeed(db_path: Path):
    errors: list[BaseException] = []
    with Memory(db_path, embedder=None) as mem:

        def work(tag: str) -> None:
            try:
                for i in range(100):
                    mem.learn(f"{tag} observation {i}")
                    mem.recall(f"{tag} observation")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert mem.stats()["facts"] == 400


def test_processes_writing_one_file_concurrently_all_succeed(db_path: Path):
    Memory(db_path, embedder=None).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), f"p{i}", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "locked" not in err
    with Memory(db_path, embedder=None) as mem:
        assert mem.stats()["facts"] == 180
        assert mem.stats()["perceptions"] == 3 * 6 * 20


def test_a_committed_write_survives_a_killed_process(db_path: Path):
    script = textwrap.dedent(
        """
        import sys, time
        from robotmem import Memory
        mem = Memory(sys.argv[1], embedder=None)
        mid = mem.learn("written just before the crash")["memory_id"]
        print(mid, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(db_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    memory_id = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Memory(db_path, embedder=None) as mem:
        assert mem.get(memory_id)["content"] == "written just before the crash"
