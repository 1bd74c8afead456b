"""Real SQLite failures (disk full, read-only, I/O error) say what happened and what to do."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from robotmem import Memory
from robotmem.errors import ReadOnlyStoreError, StorageError

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
    assert isinstance(err.value, ReadOnlyStoreError)


def test_a_read_only_store_keeps_no_access_counts_and_warns_of_none_on_close(tmp_path: Path, caplog) -> None:
    mem = Memory(tmp_path / "ro.db", embedder=None)
    mem.learn("the cup is on the shelf")
    mem._db.connection().execute("PRAGMA query_only = 1").fetchall()  # fault injection: SQLITE_READONLY
    with caplog.at_level("DEBUG", logger="robotmem"):
        for _ in range(3):
            assert mem.recall("cup")["count"] == 1  # each recall counts an access, to be written later
        mem.close()
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    assert "access counts are not kept on a read-only store" in caplog.text


def test_a_store_that_fails_otherwise_says_why_it_could_not_record_access_counts(tmp_path: Path, caplog,
                                                                                   monkeypatch) -> None:
    mem = Memory(tmp_path / "full.db", embedder=None)
    mem.learn("the cup is on the shelf")
    assert mem.recall("cup")["count"] == 1

    def disk_full(*_: object) -> None:  # fault injection at the store seam
        raise StorageError("writing to the memory store failed: the disk is full")

    monkeypatch.setattr(mem._db, "flush_access_counts", disk_full)
    with caplog.at_level("WARNING", logger="robotmem"):
        mem.close()
    assert "could not record 1 access counts: writing to the memory store failed: the disk is full" in caplog.text


def test_a_file_size_limit_says_so_and_the_store_writes_again_once_it_is_raised(tmp_path: Path) -> None:
    # A file-size limit makes the kernel refuse writes (EFBIG), which SQLite reports as SQLITE_IOERR_WRITE:
    # the message names the limit, not "check the disk".
    script = textwrap.dedent(f"""
        import resource, signal
        from robotmem import Memory
        from robotmem.errors import StorageError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with Memory({str(tmp_path / "io.db")!r}, embedder=None) as mem:
            mem.learn("the cup is on the shelf")
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
            try:
                for i in range(500):
                    mem.save_perception(f"scan number {{i}} of the shelf", data=[float(i)] * 2000)
            except StorageError as exc:
                print(exc.message, exc.transient)
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
            print(mem.get(mem.learn("the bowl is in the sink")["memory_id"])["content"])
    """)
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300,
                         cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert "reached the largest size this process may write (a file-size limit" in out.stdout, out.stdout + out.stderr
    assert "raise the limit" in out.stdout and "check the disk" not in out.stdout
    failure, written = out.stdout.splitlines()[-2:]
    assert failure.endswith(" True")  # transient: the same write succeeds once the limit is raised
    assert written == "the bowl is in the sink"


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


@pytest.fixture
def bind_mount(tmp_path: Path):
    """A folder (``rw``) and a read-only bind mount of it (``ro``): one file seen through a writable
    and a read-only path, as a Docker ``:ro`` volume of a folder a writer still writes (needs root).
    Unmounted at the end whatever happens."""
    import os

    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(rw), str(ro)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield rw, ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


class _Writer:
    """A process holding the store open through the writable path: ``learn(n)`` learns n more facts."""

    def __init__(self, path: Path, first: int = 0) -> None:
        """``first``: the number of the next lesson (learning one the store holds changes nothing)."""
        script = textwrap.dedent(f"""
            import sys
            from robotmem import Memory
            mem = Memory({str(path)!r}, embedder=None)
            for line in sys.stdin:
                start, n = map(int, line.split())
                for i in range(start, start + n):
                    mem.learn(f"lesson {{i}} about the red door handle")
                if n == 0:
                    mem._db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                print("done", flush=True)
            mem.close()
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.learned = first

    def learn(self, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{self.learned} {n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"
        self.learned += n

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=120) == 0


def test_a_read_only_bind_mount_of_a_store_a_writer_has_open_sees_its_writes(bind_mount, caplog) -> None:
    rw, ro = bind_mount
    writer = _Writer(rw / "m.db")
    try:
        writer.learn(5)
        with caplog.at_level("INFO", logger="robotmem.store.connection"):
            reader = Memory(ro / "m.db", embedder=None)  # -wal and -shm are there: mode=ro
        try:
            assert reader.stats()["memories"] == 5
            writer.learn(30)
            assert reader.stats()["memories"] == 35
            assert [h["content"] for h in reader.recall("lesson 33 red door", n=1)["results"]] == [
                "lesson 33 about the red door handle"]
            writer.learn(0)  # checkpointed: the -wal is there but empty
            assert (rw / "m.db-wal").stat().st_size == 0
            writer.learn(10)
            assert reader.stats()["memories"] == 45
            with pytest.raises(StorageError, match="read-only"):
                reader.learn("a lesson the reader cannot write")
        finally:
            reader.close()
        # A reader opened while the -wal is empty (a writer had it open) reads through the -shm too.
        writer.learn(0)
        reader = Memory(ro / "m.db", embedder=None)
        try:
            writer.learn(5)
            assert reader.stats()["memories"] == 50
        finally:
            reader.close()
    finally:
        writer.close()
    assert "snapshot" not in caplog.text


def test_a_read_only_bind_mount_without_a_writer_is_read_as_a_snapshot_and_says_so(bind_mount, caplog) -> None:
    rw, ro = bind_mount
    writer = _Writer(rw / "m.db")
    writer.learn(5)
    writer.close()
    assert sorted(p.name for p in rw.iterdir()) == ["m.db"]  # no -wal, no -shm: nothing tells of a writer
    with caplog.at_level("WARNING", logger="robotmem.store.connection"):
        reader = Memory(ro / "m.db", embedder=None)
        import threading

        other = threading.Thread(target=reader.stats)  # another thread's connection: no second warning
        other.start()
        other.join()
    try:
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1
        assert "read as a snapshot" in warnings[0] and "noticed at the next read" in warnings[0]
        assert reader.stats()["memories"] == 5
    finally:
        reader.close()


def test_a_snapshot_notices_a_writer_that_comes_later_and_reads_what_it_writes(bind_mount, caplog) -> None:
    """A store read as a snapshot (no writer had it open) is opened again at the first read after a
    writer showed through the writable mount: the file changed (a writer that came and went between
    two reads), or its -wal and -shm files appeared (a writer that has it open)."""
    import threading

    rw, ro = bind_mount
    writer = _Writer(rw / "m.db")
    writer.learn(5)
    writer.close()
    with caplog.at_level("INFO", logger="robotmem.store.connection"):
        reader = Memory(ro / "m.db", embedder=None)  # a snapshot
        try:
            assert reader.stats()["memories"] == 5
            writer = _Writer(rw / "m.db", first=5)
            writer.learn(3)
            writer.close()
            assert sorted(p.name for p in rw.iterdir()) == ["m.db"]  # came and went: only the file tells
            assert reader.stats()["memories"] == 8
            writer = _Writer(rw / "m.db", first=8)  # a writer that stays: -wal and -shm appear
            try:
                writer.learn(4)
                assert reader.stats()["memories"] == 12
                assert [h["content"] for h in reader.recall("lesson 10 red door", n=1)["results"]] == [
                    "lesson 10 about the red door handle"]
                writer.learn(2)
                assert reader.stats()["memories"] == 14  # read through the -shm now: no reopen needed
                other: list[int] = []
                thread = threading.Thread(target=lambda: other.append(reader.stats()["memories"]))
                thread.start()
                thread.join()
                assert other == [14]  # another thread's connection sees it too
            finally:
                writer.close()
            with pytest.raises(StorageError, match="read-only"):
                reader.learn("a lesson the reader cannot write")
        finally:
            reader.close()
    assert caplog.text.count("opened again") == 2
    warnings = [r.getMessage() for r in caplog.records
                if r.levelname == "WARNING" and r.name == "robotmem.store.connection"]
    assert len(warnings) == 1 and "read as a snapshot" in warnings[0]  # once


@pytest.fixture
def failing_ext4(tmp_path: Path):
    """An ext4 file system on a loop device mounted ``errors=remount-ro`` (needs root), and a function
    that makes the kernel record an error on it, which remounts it read-only under the files open there,
    as a disk error does (``remount,ro`` is refused while files are open for writing). Afterwards it is
    unmounted, checked with e2fsck and mounted again by the returned ``repair``."""
    import os
    import shutil

    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext4 that the kernel remounts read-only needs root")
    if shutil.which("mkfs.ext4") is None or shutil.which("e2fsck") is None:
        pytest.skip("mkfs.ext4 and e2fsck (e2fsprogs) are not installed")
    image, folder = tmp_path / "ext4.img", tmp_path / "ext4"
    folder.mkdir()
    with image.open("wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {mounted.stderr.strip()}")
    try:
        source = subprocess.run(["findmnt", "-no", "SOURCE", str(folder)], capture_output=True, text=True,
                                check=True).stdout.strip()
        trigger = Path("/sys/fs/ext4") / Path(source).name / "trigger_fs_error"
        if not trigger.exists():
            pytest.skip(f"this kernel cannot be made to record an ext4 error ({trigger} is missing)")

        def fail() -> None:
            os.sync()  # what was written so far reaches the image before its journal is aborted
            trigger.write_text("robotmem test: a disk error\n")

        def repair() -> None:
            subprocess.run(["umount", str(folder)], check=True)
            subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True)
            subprocess.run(["mount", "-o", "loop", str(image), str(folder)], check=True)

        yield folder, fail, repair
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_file_system_made_read_only_under_an_open_store_says_so(failing_ext4) -> None:
    """SQLite reports the refused write (EROFS) as an I/O error; the message names the read-only file system."""
    folder, fail, repair = failing_ext4
    mem = Memory(folder / "s.db", embedder=None)
    try:
        for i in range(5):
            mem.learn(f"marker {i} is at the dock")
        fail()
        with pytest.raises(ReadOnlyStoreError) as err:
            mem.learn("the door is open")
        assert "became read-only while it was open" in err.value.message and "dmesg" in err.value.message
        assert "check the disk" not in err.value.message and err.value.transient
        with pytest.raises(ReadOnlyStoreError):
            mem.save_perceptions([{"description": "a scan of the door", "data": [1.0] * 100}])
        assert mem.recall("marker dock", n=5)["count"] == 5  # reads go on
    finally:
        mem.close()
    repair()
    with Memory(folder / "s.db", embedder=None) as mem:
        assert sorted(h["content"] for h in mem.recall("marker dock", n=10, min_relevance=0)["results"]) == [
            f"marker {i} is at the dock" for i in range(5)]
