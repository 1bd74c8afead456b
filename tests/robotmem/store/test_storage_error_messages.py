"""Real SQLite failures (disk full, read-only, I/O error) say what happened and what to do."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from robotmem import Memory
from robotmem.errors import StorageError

REPO = Path(__file__).resolve().parents[3]


def _fill(mem: Memory) -> None:
    for i in range(200):
        mem.save_perception(f"scan number {i} of the shelf", data=[float(i)] * 2000)


def test_disk_full_says_so_and_what_to_do(mem: Memory) -> None:
    mem.learn("the cup is on the shelf")
    conn = mem._db.connection()  # fault injection: SQLite's own page quota gives SQLITE_FULL
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}").fetchall()
    with pytest.raises(StorageError) as err:
        _fill(mem)
    assert "the disk is full" in err.value.message and "free space" in err.value.message
    assert mem.recall("cup")["results"][0]["content"] == "the cup is on the shelf"


def test_read_only_database_says_so_and_what_to_do(mem: Memory) -> None:
    mem.learn("the cup is on the shelf")
    mem._db.connection().execute("PRAGMA query_only = 1").fetchall()  # fault injection: SQLITE_READONLY
    with pytest.raises(StorageError) as err:
        mem.learn("the bowl is in the sink")
    assert "read-only" in err.value.message and "permission" in err.value.message


def test_an_io_error_says_so_and_what_to_do(tmp_path: Path) -> None:
    # A file-size limit makes the kernel refuse writes (EFBIG): SQLite reports SQLITE_IOERR_WRITE.
    script = textwrap.dedent(f"""
        import resource, signal
        from robotmem import Memory
        from robotmem.errors import StorageError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with Memory({str(tmp_path / "io.db")!r}, embedder=None) as mem:
            mem.learn("the cup is on the shelf")
            resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
            try:
                for i in range(500):
                    mem.save_perception(f"scan number {{i}} of the shelf", data=[float(i)] * 2000)
            except StorageError as exc:
                print(exc.message)
    """)
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300,
                         cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert "an I/O error occurred" in out.stdout and "check the disk" in out.stdout, out.stdout + out.stderr


def test_a_file_that_is_not_a_database_says_so(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(StorageError) as err:
        Memory(path, embedder=None)
    assert "not a robotmem database" in err.value.message and "check the path" in err.value.message
    assert path.read_text() == "hello\n"


def test_a_store_cut_short_says_it_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    with Memory(path, embedder=None) as mem:
        for i in range(300):
            mem.learn(f"the cup number {i} is on shelf {i % 7} of the kitchen")
    with open(path, "r+b") as f:
        f.truncate(20_000)
    with pytest.raises(StorageError) as err:
        Memory(path, embedder=None).recall("cup")
    assert "corrupt" in err.value.message and "backup" in err.value.message


def test_another_applications_database_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'ada');"
                 "PRAGMA user_version = 3")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StorageError) as err:
        Memory(path, embedder=None)
    assert "not a robotmem database" in err.value.message and "users" in err.value.message
    assert path.read_bytes() == before  # no tables, no user_version, no WAL mode written into it
    assert not Path(f"{path}-wal").exists()


@pytest.fixture
def read_only_mount(tmp_path: Path):
    """A small tmpfs (needs root), remounted read-only by calling the returned function;
    unmounted at the end whatever happens."""
    import os

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs to remount it read-only needs root")
    folder = tmp_path / "media"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")

    def remount(mode: str = "ro") -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(folder)], check=True)

    try:
        yield folder, remount
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _crash_after_learning(path: Path, *insights: str) -> None:
    """A process that learns and dies without closing: its -wal and -shm files stay beside the store."""
    script = textwrap.dedent(f"""
        import os
        from robotmem import Memory
        mem = Memory({str(path)!r}, embedder=None)
        for insight in {list(insights)!r}:
            mem.learn(insight)
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=120)


def test_a_store_on_a_read_only_mount_is_read_and_refuses_writes_saying_why(read_only_mount, capsys) -> None:
    from robotmem.cli.main import main

    folder, remount = read_only_mount
    path = folder / "s.db"
    with Memory(path, embedder=None) as mem:
        mem.learn("the dock is behind the shelf")
    remount("ro")
    with Memory(path, embedder=None) as mem:
        assert [h["content"] for h in mem.recall("dock")["results"]] == ["the dock is behind the shelf"]
        assert mem.stats()["memories"] == 1
        with pytest.raises(StorageError) as err:
            mem.learn("the lidar is dirty")
    assert "the database file is read-only" in err.value.message and "mount it read-write" in err.value.message
    assert err.value.advice is not None and "read-only" in err.value.advice
    capsys.readouterr()
    assert main(["--db", str(path), "--json", "stats"]) == 0
    assert '"memories": 1' in capsys.readouterr().out
    assert main(["--db", str(path), "recall", "dock"]) == 0
    assert "the dock is behind the shelf" in capsys.readouterr().out
    assert main(["--db", str(path), "learn", "the lidar is dirty"]) == 1
    err_text = capsys.readouterr().err
    assert "the database file is read-only" in err_text and "cannot be opened" not in err_text
    assert sorted(p.name for p in folder.iterdir()) == ["s.db"]


def test_a_read_only_mount_with_commits_still_in_the_wal_reads_them_or_says_why_not(read_only_mount) -> None:
    folder, remount = read_only_mount
    path = folder / "w.db"
    _crash_after_learning(path, "the dock is behind the shelf", "the lidar is dirty")
    assert (folder / "w.db-wal").stat().st_size > 0 and (folder / "w.db-shm").exists()
    remount("ro")
    with Memory(path, embedder=None) as mem:  # the -wal is read through the -shm that is there
        assert mem.stats()["memories"] == 2
        assert [h["content"] for h in mem.recall("lidar")["results"]] == ["the lidar is dirty"]
    remount("rw")
    (folder / "w.db-shm").unlink()  # without it, SQLite cannot read the -wal on a read-only mount
    remount("ro")
    with pytest.raises(StorageError) as err:
        Memory(path, embedder=None)
    assert "the database file is read-only" in err.value.message
    assert "w.db-wal file holds commits not yet copied into the database" in err.value.message
