"""SQLite connections: one per thread, WAL, busy timeout, sqlite-vec loaded.

A thread's connection is closed when the thread ends: servers run calls on worker
threads that retire after idling, and each connection holds three open files (database,
WAL, shared memory), so keeping them would leak files with every burst of requests.

Readers never wait for writers in WAL mode; writers take the write lock up front
(``BEGIN IMMEDIATE``) so two writers queue on the busy timeout instead of
deadlocking on a lock upgrade.

Copying the WAL back into the database (a checkpoint) runs on a thread of its own
(``_Checkpointer``), not inside the commit that crossed SQLite's threshold: after a
bulk insert of 1,000 memories that copy rewrote every page the batch touched (about
1,300 on a fresh store, 5,800 at 100,000 memories, mostly random index pages) and
synced the file twice, all on the caller's time.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import sqlite_vec

from ..errors import ReadOnlyStoreError, StorageError
from .claims import Release, claim_file
from .forks import in_child_after_fork, keep_inherited
from .pipeline import PipelinedWrites, Transactions
from .term_rank import register_term_rank

__all__ = ["Database", "one_row", "scalar"]

log = logging.getLogger(__name__)

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # NORMAL in WAL mode: a committed transaction survives a crash of the process;
    # only a power loss may roll back the last few commits.
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
    "PRAGMA cache_size=-65536",
    # No memory map: pages read through the mapping stay in the process's resident set
    # (a second process on a 100,000-memory store held all 256 MB of its map after 250
    # recalls), while pages read into the 64 MB cache above are bounded; recall times did
    # not differ measurably (docs/benchmarks.md).
    "PRAGMA mmap_size=0",
)


#: Bytes of WAL file kept when SQLite starts the WAL again from its first frame; the rest is cut
#: off. A reader's long snapshot (a vector index rebuild reads one for 20-40 s at a million
#: memories) stops checkpoints while writes go on, and the file it grew to stayed on disk for
#: good. Above CHECKPOINT_NOW_AT's frames (41 MB), so the usual WAL is never cut and regrown.
WAL_KEEP_BYTES = 64 << 20

#: WAL frames at which a commit asks the checkpoint thread to copy the WAL back (SQLite's own
#: threshold, at which the commit would otherwise copy it itself).
CHECKPOINT_AT = 1000
#: WAL frames past which the committing thread checkpoints itself, as SQLite would: writes outran
#: the checkpoint thread, and the WAL must not grow without bound (it restarts from its first frame
#: once a checkpoint has copied every frame).
CHECKPOINT_NOW_AT = 10_000
#: Seconds the checkpoint thread waits, after the last commit that asked it for a checkpoint, before it
#: cuts the WAL file to nothing (a TRUNCATE checkpoint that gives up at once if a reader or writer is
#: there, tried again as long). WAL_KEEP_BYTES alone left a robot's card holding 64 MB of WAL after a
#: burst for as long as the store stayed open, and a WAL grown beside a long reader (215 MB for 200,000
#: perceptions written during one export) at that size until the next write.
IDLE_TRUNCATE_S = 5.0


#: Held by a checkpoint thread while it is inside SQLite, and by a thread while it forks. A fork
#: while the thread held one of SQLite's process-wide mutexes (opening its connection, right after
#: the commit that started it) left the child's first connection to any store waiting for that mutex
#: for ever. The threads robotmem starts are its to keep out of a fork; a caller's own threads are
#: the caller's (docs/reliability.md, "Forked processes").
_IN_SQLITE = threading.Lock()
os.register_at_fork(before=_IN_SQLITE.acquire, after_in_parent=_IN_SQLITE.release,
                    after_in_child=_IN_SQLITE.release)


#: Steps of upkeep (Database.after_checkpoints) per wake of the checkpoint thread, each inside
#: _IN_SQLITE on its own. The first prune after an upgrade covers the whole old log (2,000,000 rows
#: held _IN_SQLITE for 2.3 s in one go, forks and other stores' checkpoints waiting): a step is
#: one page of it (change_log.PAGE_ROWS, a few ms), and the checkpoint runs between wakes.
UPKEEP_STEPS_PER_WAKE = 4
#: Seconds between two wakes while upkeep is left: writers of this process get the write lock in between.
UPKEEP_PAUSE_S = 0.05

#: A step of upkeep on the checkpoint thread's connection; True: more is left, call it again.
Upkeep = Callable[[apsw.Connection], bool]


class _Checkpointer:
    """Passive checkpoints on a daemon thread with a connection of its own, started on first request.

    A checkpoint only copies committed frames into the database file: readers, writers and crash
    recovery see the same data whether it runs here, in a commit or never.
    """

    def __init__(self, open_connection: Callable[[], apsw.Connection],
                 work: Upkeep | None = None) -> None:
        self.opener = open_connection
        #: Upkeep run on this thread after each checkpoint it was asked for (Database.after_checkpoints).
        self.work: Upkeep | None = work
        self._wake = threading.Event()
        self._lock = threading.Lock()
        # One checkpoint at a time in this process: SQLite refuses a second one at once (busy).
        self._running = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._here = threading.local()  # .never: commits on this thread leave every checkpoint to the thread
        self._done = threading.Condition()
        self._asked = 0  # settle() calls so far
        self._upkept = 0  # the last of them after which the upkeep ran to its end

    def request(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="robotmem-checkpoint", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        try:
            with _IN_SQLITE:
                conn = self.opener()
        except StorageError:
            log.exception("the checkpoint thread cannot open the store; commits leave the WAL to the next one")
            return
        # Never waits for a lock: a passive checkpoint takes none, and the idle truncation gives up and
        # is tried again rather than hold the write lock while it waits for readers.
        conn.set_busy_timeout(0)
        to_cut = False  # the WAL file may hold more than nothing since the last truncation
        more = False  # the upkeep stopped at its cap with work left: it goes on after UPKEEP_PAUSE_S
        try:
            while True:
                woke = self._wake.wait(UPKEEP_PAUSE_S if more else IDLE_TRUNCATE_S if to_cut else None) or more
                self._wake.clear()
                if self._stopped:
                    return
                if woke:
                    asked = self._asked
                    with _IN_SQLITE:
                        self.run_here(conn, "main")
                    more = self._upkeep(conn)
                    to_cut = True
                    if not more:
                        self._settled(asked)
                else:
                    with _IN_SQLITE:
                        to_cut = not self._truncate(conn)
        finally:
            with _IN_SQLITE:
                conn.close()
            self._settled(None)

    def _upkeep(self, conn: apsw.Connection) -> bool:
        """Up to UPKEEP_STEPS_PER_WAKE steps of the upkeep, each inside _IN_SQLITE on its own: a fork
        or another store's checkpoint waits for one step at most. True: work is left for the next wake."""
        if self.work is None:
            return False
        for _ in range(UPKEEP_STEPS_PER_WAKE):
            with _IN_SQLITE:
                try:
                    if not self.work(conn):
                        return False
                except apsw.BusyError:
                    return False  # a writer holds the lock: the next wake tries again
                except Exception:  # upkeep only: the store works without it until the next wake
                    log.exception("upkeep after a checkpoint failed")
                    return False
        return True

    def _settled(self, asked: int | None) -> None:
        """The upkeep ran to its end after request number ``asked`` (None: the thread ended)."""
        with self._done:
            self._upkept = self._asked if asked is None else max(self._upkept, asked)
            self._done.notify_all()

    def settle(self) -> None:
        """Wake the thread and wait until its upkeep ran to the end after this call: for tests, which
        must not depend on when the thread is scheduled."""
        with self._done:
            self._asked += 1
            asked = self._asked
        self.request()
        with self._done:
            while self._upkept < asked and not self._stopped and self._thread is not None and self._thread.is_alive():
                self._done.wait(0.1)

    def _truncate(self, conn: apsw.Connection) -> bool:
        """Copy the whole WAL back and cut its file to nothing; False: a reader or writer is there, try later."""
        with self._running:
            try:
                conn.wal_checkpoint("main", apsw.SQLITE_CHECKPOINT_TRUNCATE)
            except apsw.BusyError:
                return False
            except apsw.Error as exc:  # a full or failing disk: the next commit that asks tries again
                log.warning("cutting the WAL back failed: %s", exc)
        return True

    @contextmanager
    def left_to_the_thread(self) -> Iterator[None]:
        """Commits in the block never checkpoint on the committing thread, however long the WAL.

        For bookkeeping written on a reader's time (recall's access counts): past CHECKPOINT_NOW_AT
        such a commit copied the WAL back on the recall's thread, after waiting for the checkpoint
        this thread was running, and a control loop's recall waited for both (docs/benchmarks.md).
        The writers that grow the WAL still checkpoint on their own time."""
        self._here.never = True
        try:
            yield
        finally:
            self._here.never = False

    def after_commit(self, conn: apsw.Connection, name: str, frames: int) -> int:
        """SQLite's WAL hook: runs after each commit with the frames the WAL holds."""
        if frames >= CHECKPOINT_NOW_AT and not getattr(self._here, "never", False):
            self.run_here(conn, name)
        if frames >= CHECKPOINT_AT:
            self.request()  # past CHECKPOINT_NOW_AT too: the thread cuts the WAL back once commits stop
        return apsw.SQLITE_OK

    def run_here(self, conn: apsw.Connection, name: str) -> None:
        """A passive checkpoint on this thread, after the one running in this process (if any)."""
        with self._running:
            try:
                conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
            except apsw.BusyError:
                pass  # another process is checkpointing: it copies these frames too
            except apsw.Error as exc:  # the frames stay in the WAL for the next checkpoint
                log.warning("a checkpoint failed: %s", exc)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()


#: A check of a file before any pragma changes it (SqliteStore's: that it is a memory store).
FileCheck = Callable[[apsw.Connection, Path], None]


def _on_read_only_media(path: Path) -> bool:
    """The store file exists on a file system mounted read-only."""
    try:
        return path.is_file() and bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _connect(path: Path, busy_timeout_ms: int) -> apsw.Connection:
    """A connection whose header was read: SQLite opens any file lazily, so a file that is not a
    database or is cut short fails here with SQLite's own reason (not later, in the FTS5
    registration, as "NoFTS5").

    On a read-only mount SQLite cannot open a WAL database the usual way (it must create the
    ``-shm`` file beside it), so the store is opened read-only instead: with ``mode=ro`` when a
    ``-wal`` (even empty) or ``-shm`` file is there, which reads the ``-wal`` through the ``-shm``
    and sees what a writer commits through another mount of the same folder (a bind mount
    remounted read-only, a Docker ``:ro`` volume); with ``immutable=1`` when neither is there
    (SQLite cannot open it ``mode=ro`` then), which reads the file as a snapshot (a
    :class:`_Snapshot`, which ``Database.read`` reopens once a writer shows). Reads work; writes
    fail with SQLite's "read-only" (see docs/reliability.md).
    """
    try:
        conn = apsw.Connection(str(path))
    except apsw.Error as exc:
        raise _open_failed(path, exc) from exc
    try:
        conn.set_busy_timeout(busy_timeout_ms)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except (apsw.CantOpenError, apsw.ReadOnlyError) as exc:
        conn.close()
        if not _on_read_only_media(path):
            raise _open_failed(path, exc) from exc
        return _connect_read_only(path, busy_timeout_ms)
    except apsw.Error as exc:
        conn.close()
        raise _open_failed(path, exc) from exc


_SNAPSHOTS_WARNED: set[str] = set()
_SNAPSHOTS_LOCK = threading.Lock()


def _warn_once(path: Path) -> bool:
    """True the first time a process opens ``path`` as a snapshot (each thread opens its own connection)."""
    key = str(path.resolve())
    with _SNAPSHOTS_LOCK:
        if key in _SNAPSHOTS_WARNED:
            return False
        _SNAPSHOTS_WARNED.add(key)
        return True


#: What tells that a writer came since a snapshot was opened: the database file's identity, size
#: and modification time (a writer that came and went folded its commits into the file), and
#: whether its -shm file exists (a writer has it open: a WAL writer makes it with the -wal, unless
#: it holds SQLite's exclusive locking mode, which robotmem never sets).
Signature = tuple[int, int, int, bool]


def _signature(path: str) -> Signature:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1, False)  # gone: differs from any file, so the next read reopens and says why not
    # os.access, not os.path.exists: no exception raised and caught for the usual missing file (a third of the cost).
    return (st.st_ino, st.st_size, st.st_mtime_ns, os.access(path + "-shm", os.F_OK))


class _Snapshot(apsw.Connection):
    """A connection that reads the file as it was (``immutable=1``: SQLite takes no locks and never
    looks at the -wal), so it must be reopened to see what a writer adds. ``stale`` tells whether one
    came: two stat calls, checked before each read transaction (their cost: docs/benchmarks.md)."""

    def __init__(self, uri: str, path: str, seen: Signature) -> None:
        super().__init__(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        self.path = path
        self.seen = seen

    def stale(self) -> bool:
        return _signature(self.path) != self.seen


def _connect_read_only(path: Path, busy_timeout_ms: int) -> apsw.Connection:
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    # Taken before the file is opened: a writer between the two reopens it once more, never misses.
    seen = _signature(str(path))
    # A -wal (even empty) or -shm file means a writer may have the store open, perhaps through
    # another mount of the same folder (a bind mount remounted read-only, a Docker :ro volume):
    # mode=ro reads through its -shm and sees what it commits. immutable=1 only without either.
    live = wal.exists() or shm.exists()
    unfolded = wal.exists() and wal.stat().st_size > 0
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + ("?mode=ro" if live else "?immutable=1")
    read_only = _WHAT_TO_DO[apsw.SQLITE_READONLY]
    try:
        conn = (apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI) if live
                else _Snapshot(uri, str(path), seen))
    except apsw.Error as exc:
        raise StorageError(f"cannot open the memory store at {path}: {read_only}", advice=read_only) from exc
    try:
        conn.set_busy_timeout(busy_timeout_ms)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.Error as exc:
        conn.close()
        if unfolded:
            # Commits still in the -wal file need its -shm index, which SQLite cannot create here.
            detail = (f"{read_only}; its {wal.name} file holds commits not yet copied into the database, "
                      "which only a writable mount can read (open it once read-write to fold them in)")
            raise StorageError(f"cannot open the memory store at {path}: {detail}", advice=detail) from exc
        raise _open_failed(path, exc) from exc
    if live:
        log.info("%s is on a read-only mount: opened read-only (reads work, writes fail)", path)
    elif _warn_once(path):
        log.warning(
            "%s is on a read-only mount and no writer has it open: read as a snapshot of the file as it is "
            "now (reads work, writes fail); a writer that opens it later through another mount of the same "
            "folder is noticed at the next read, which opens the store again to see its changes", path,
        )
    return conn


def _open_connection(path: Path, busy_timeout_ms: int, check: FileCheck | None = None) -> apsw.Connection:
    conn = _connect(path, busy_timeout_ms)
    try:
        # Check the file before a pragma changes another application's file.
        if check is not None:
            check(conn, path)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        register_term_rank(conn)
        for pragma in (*_PRAGMAS, f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}"):
            conn.execute(pragma).fetchall()
    except (apsw.Error, StorageError) as exc:
        conn.close()
        if isinstance(exc, StorageError):
            raise
        raise _open_failed(path, exc) from exc
    return conn


#: id() of each connection inside a write transaction (from BEGIN IMMEDIATE to its COMMIT or
#: ROLLBACK). Read at a fork without calling into SQLite: a connection another thread was using at
#: that instant may hold SQLite's mutex, which no thread of the child ever releases.
_WRITING: set[int] = set()
#: The real paths of the SQLite files a thread of this process's parent was writing when it forked
#: this process (Database._after_fork). SQLite keeps a file's locks per process: the child holds
#: a copy of that write lock that nothing in it will release, and each of its writes waited out the
#: busy timeout and then failed as "busy" (transient, "retry"), for as long as the child lived.
_WRITTEN_AT_FORK: set[str] = set()


class Database:
    """Hands each thread its own connection to one SQLite file."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 10_000, check_file: FileCheck | None = None) -> None:
        self.path = path
        self._real_path = os.path.realpath(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._check_file = check_file
        self._local = threading.local()
        # id(connection) -> (connection, the finalizer that closes it when its thread, or its bulk
        # writer, is gone)
        self._all: dict[int, tuple[apsw.Connection, weakref.finalize[[apsw.Connection], Any]]] = {}
        self._lock = threading.Lock()
        self._closed = False
        # id(connection) of each connection inside an outermost read() or write(): close() leaves
        # these to their own thread (_leave). apsw refuses to close a connection that is running a
        # statement in another thread, and closing one between two statements of a call would fail
        # that call half done.
        self._in_call: set[int] = set()
        # Neither the thread nor the hook refers to the Database: an unclosed one can still be
        # collected, and then stops its thread.
        self._checkpointer = _Checkpointer(functools.partial(_open_connection, path, busy_timeout_ms, check_file))
        self._stop_checkpoints = weakref.finalize(self, self._checkpointer.stop)
        if str(path) != ":memory:":
            # An in-memory store is the process's own memory: a forked child keeps its copy.
            in_child_after_fork(self._after_fork)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create the folder for the memory store {path}: {exc.strerror}") from exc

    def _after_fork(self) -> None:
        """In a forked child: the parent's connections stay the parent's (SQLite: "do not carry an open
        connection across a fork"; its locks are the parent process's), and closing one here would
        drop locks of the child's own connections to the file; the child opens its own on first use,
        and a checkpoint thread of its own when a commit asks for one."""
        self._lock = threading.Lock()
        if any(id(conn) in _WRITING for conn, _finalizer in self._all.values()):
            _WRITTEN_AT_FORK.add(self._real_path)
        for conn, finalizer in self._all.values():
            finalizer.detach()
            keep_inherited(conn)
        self._all = {}
        self._in_call = set()
        self._local = threading.local()
        self._stop_checkpoints.detach()  # the parent's thread is not in this process; its locks may be held
        self._checkpointer = _Checkpointer(self._checkpointer.opener, self._checkpointer.work)
        self._stop_checkpoints = weakref.finalize(self, self._checkpointer.stop)

    def after_checkpoints(self, work: Upkeep) -> None:
        """Run ``work`` on the checkpoint thread, with its connection, after each checkpoint that
        commits asked for: off every caller's time, while writes go on. ``work`` does a step (a
        transaction) at a time and returns True while more is left: a wake runs at most
        UPKEEP_STEPS_PER_WAKE of them, the next wake goes on. Its connection never waits for a lock
        (busy timeout 0) unless ``work`` sets one: ``work`` that writes is skipped while another
        writer is busy."""
        self._checkpointer.work = work

    def settle_upkeep(self) -> None:
        """Wake the checkpoint thread and wait until its upkeep ran to the end (tests)."""
        self._checkpointer.settle()

    def claim(self, name: str) -> Release | str:
        """Claim ``name`` among every process using this file (robotmem.store.claims): the release,
        or who holds it."""
        return claim_file(self.path, name)

    def connection(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError("the memory store is closed")
            conn = self._open()
            self._local.conn = conn
            # Detached by close(): a long-lived thread must not keep closed stores alive.
            finalizer = weakref.finalize(threading.current_thread(), self._retire, conn)
            with self._lock:
                self._all[id(conn)] = (conn, finalizer)
        return conn

    def _retire(self, conn: apsw.Connection) -> None:
        """Close the connection of a thread that ended (runs in whichever thread collects it)."""
        with self._lock:
            if self._all.pop(id(conn), None) is None:
                return  # close() got there first
        try:
            conn.close()
        except apsw.Error:  # pragma: no cover
            log.exception("closing the connection of a finished thread failed")

    def open_connections(self) -> int:
        """Connections currently open (one per live thread that used the store)."""
        with self._lock:
            return len(self._all)

    def _open(self) -> apsw.Connection:
        conn = _open_connection(self.path, self._busy_timeout_ms, self._check_file)
        conn.set_wal_hook(self._checkpointer.after_commit)  # replaces SQLite's checkpoint inside the commit
        return conn

    def _enter(self, conn: apsw.Connection) -> bool:
        """Note a call on the thread's connection; True when it is the outermost (then ``_leave`` it)."""
        with self._lock:
            if id(conn) not in self._all:  # close() took it between connection() and here
                raise StorageError("the memory store is closed")
            if id(conn) in self._in_call:
                return False
            self._in_call.add(id(conn))
            return True

    def _leave(self, conn: apsw.Connection) -> None:
        """The outermost call on ``conn`` returned: if the store was closed meanwhile, close ``conn`` here,
        on its own thread, now that nothing runs on it."""
        with self._lock:
            self._in_call.discard(id(conn))
            entry = self._all.pop(id(conn), None) if self._closed else None
        if entry is not None:
            entry[1].detach()
            _close_quietly(conn)

    def _reopen(self, conn: apsw.Connection) -> apsw.Connection:
        """The thread's connection opened again (a snapshot a writer has changed since)."""
        with self._lock:
            entry = self._all.pop(id(conn), None)
        if entry is None:  # close() took it
            raise StorageError("the memory store is closed")
        entry[1].detach()
        _close_quietly(conn)
        self._local.conn = None
        log.info("%s changed since it was read as a snapshot (a writer came through another mount): opened again",
                 self.path)
        return self.connection()

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several SELECTs."""
        conn = self.connection()
        if isinstance(conn, _Snapshot) and not conn.in_transaction and conn.stale():
            conn = self._reopen(conn)
        outermost = self._enter(conn)
        try:
            if conn.in_transaction:
                yield conn
                return
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            except apsw.Error as exc:
                log.error("read failed: %s", exc)
                detail = _describe(exc, conn)
                raise StorageError(f"reading the memory store failed: {detail}",
                                   advice=detail, transient=_transient(exc)) from exc
        finally:
            if outermost:
                self._leave(conn)

    @contextmanager
    def write(self, *, wait: bool = True) -> Iterator[apsw.Connection]:
        """One atomic write transaction; nested calls join the outer one.

        ``wait=False`` gives up at once when another writer holds the lock (for
        bookkeeping that can be written later), and its commit never runs a checkpoint on the
        caller's thread (it waits for nothing).
        """
        conn = self.connection()
        outermost = self._enter(conn)
        try:
            if conn.in_transaction:
                yield conn
                return
            if conn.readonly("main"):  # opened read-only on a read-only mount (_connect)
                detail = _WHAT_TO_DO[apsw.SQLITE_READONLY]
                raise ReadOnlyStoreError(f"writing to the memory store failed: {detail}", advice=detail)
            self._begin(conn, wait=wait)
            try:
                yield conn
            except BaseException as exc:
                failure = _write_failed(exc, conn) if isinstance(exc, apsw.Error) else None
                _rollback(conn)
                if failure is not None:
                    log.error("write failed: %s", exc)
                    raise failure from exc
                raise
            if wait:
                _commit(conn)
            else:
                with self._checkpointer.left_to_the_thread():
                    _commit(conn)
        finally:
            if outermost:
                self._leave(conn)

    def _begin(self, conn: apsw.Connection, *, wait: bool = True) -> None:
        if self._real_path in _WRITTEN_AT_FORK:
            raise StorageError(
                "this process was forked while another thread of its parent was writing to the memory "
                "store: SQLite's lock of that instant was copied into this process and is never released "
                "here, so it cannot write to the store (it can read). Fork while no thread writes, or use "
                "multiprocessing's spawn start method", transient=False)
        try:
            if not wait:
                conn.set_busy_timeout(0)
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                if not wait:
                    conn.set_busy_timeout(self._busy_timeout_ms)
        except apsw.Error as exc:
            detail = _describe(exc, conn)
            raise _kind(exc, conn)(f"the memory store is busy or unwritable: {detail}", advice=detail,
                                   transient=_transient(exc)) from exc
        _WRITING.add(id(conn))

    def pipelined_writes(self) -> PipelinedWrites:
        """Write transactions on a connection of their own that commit on a worker thread (bulk loads)."""
        if self._closed:
            raise StorageError("the memory store is closed")
        conn = self._open()
        failed = functools.partial(_write_failed, conn=conn)
        writes = PipelinedWrites(conn, Transactions(backend_error=apsw.Error, begin=self._begin_batch, commit=_commit,
                                                    rollback=_rollback, failed=failed, close=self._close_dedicated))
        # Closed with the store if the writer is not closed first (or with the writer, when it is collected).
        with self._lock:
            self._all[id(conn)] = (conn, weakref.finalize(writes, self._retire, conn))
        return writes

    def _begin_batch(self, conn: apsw.Connection) -> apsw.Connection:
        # A file connection is not lost between batches as a server's is: the batch stays on it.
        self._begin(conn)
        return conn

    def _close_dedicated(self, conn: apsw.Connection) -> None:
        with self._lock:
            entry = self._all.pop(id(conn), None)
        if entry is not None:
            entry[1].detach()
            conn.close()

    def close(self) -> None:
        """Close every connection; one inside a call on another thread is closed by that thread
        when the call returns (``_leave``), so the call finishes as it would have."""
        self._closed = True
        self._checkpointer.stop()
        with self._lock:
            idle = [entry for key, entry in self._all.items() if key not in self._in_call]
            for conn, _finalizer in idle:
                del self._all[id(conn)]
        for conn, finalizer in idle:
            try:
                conn.close()
            except apsw.ThreadingViolationError:
                # Running a statement outside read()/write() on another thread (schema_version):
                # the finalizer, still attached, closes it when that thread ends.
                with self._lock:
                    self._all[id(conn)] = (conn, finalizer)
                continue
            except apsw.Error:  # pragma: no cover
                log.exception("closing a connection failed")
            finalizer.detach()
        self._local = threading.local()


def _open_failed(path: Path, exc: apsw.Error) -> StorageError:
    """With the advice a server passes on: a robot's client learns that the disk is full, not only that
    the store failed (the path stays in the message, for the log)."""
    detail = _describe(exc)
    return StorageError(f"cannot open the memory store at {path}: {detail}", advice=detail)


def _close_quietly(conn: apsw.Connection) -> None:
    try:
        conn.close()
    except apsw.Error:  # pragma: no cover
        log.exception("closing a connection failed")


def _commit(conn: apsw.Connection) -> None:
    try:
        conn.execute("COMMIT")
    except apsw.Error as exc:
        raise _write_failed(exc, conn) from exc
    finally:
        if not conn.in_transaction:  # a COMMIT that failed may leave the transaction open
            _WRITING.discard(id(conn))


def _rollback(conn: apsw.Connection) -> None:
    """Roll back whatever is open (nothing after a failed COMMIT that SQLite rolled back itself)."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except apsw.Error:  # pragma: no cover - rollback after a failed statement
        log.exception("rollback failed")
    finally:
        _WRITING.discard(id(conn))


def _write_failed(exc: BaseException, conn: apsw.Connection | None = None) -> StorageError:
    """``conn``: the connection that failed, whose operating-system error tells an I/O error's cause."""
    detail = _describe(exc, conn) if isinstance(exc, apsw.Error) else str(exc)
    return _kind(exc, conn)(f"writing to the memory store failed: {detail}", advice=detail, transient=_transient(exc))


def _kind(exc: BaseException, conn: apsw.Connection | None) -> type[StorageError]:
    """ReadOnlyStoreError for a store that can only be read: its file (SQLITE_READONLY) or its file system,
    made read-only under an open store (an I/O error with EROFS)."""
    read_only = isinstance(exc, apsw.ReadOnlyError) or (
        isinstance(exc, apsw.IOError) and _system_errno(conn) == errno.EROFS)
    return ReadOnlyStoreError if read_only else StorageError


def one_row(conn: apsw.Connection, query: str, params: Any = ()) -> tuple[Any, ...]:
    """The single row of a query that always returns one (aggregates, PRAGMAs)."""
    row = conn.execute(query, params).fetchone()
    if row is None:  # pragma: no cover - aggregates always return a row
        raise StorageError("the memory store returned no row where one was expected")
    return tuple(row)


def scalar(conn: apsw.Connection, query: str, params: Any = ()) -> Any:
    return one_row(conn, query, params)[0]


# What happened and what to do, by SQLite's primary result code (the extended codes,
# e.g. SQLITE_IOERR_WRITE = 778, carry the primary one in their low byte).
_WHAT_TO_DO = {
    apsw.SQLITE_BUSY: "the database stayed locked by another writer past the busy timeout; retry, or raise "
                      "busy_timeout_ms if many processes write at once",
    apsw.SQLITE_LOCKED: "the database is locked by another statement; retry",
    apsw.SQLITE_FULL: "the disk is full; free space on the disk that holds the memory store (SQLite needs "
                      "room for the -wal file beside it too), then retry: nothing acknowledged was lost",
    apsw.SQLITE_READONLY: "the database file is read-only; give this process write permission on the file and "
                          "its folder (SQLite writes -wal and -shm files beside it), or mount it read-write",
    apsw.SQLITE_IOERR: "an I/O error occurred on the database file; check the disk (kernel log, free space, "
                       "a network mount that went away), then retry: nothing acknowledged was lost",
    apsw.SQLITE_CORRUPT: "the database file is corrupt; restore it from a backup or an export",
    apsw.SQLITE_NOTADB: "the file is not a robotmem database; check the path",
    apsw.SQLITE_CANTOPEN: "the database file cannot be opened; check that its folder exists and is writable",
    apsw.SQLITE_PERM: "the operating system denied access to the database file; check its permissions",
    apsw.SQLITE_NOMEM: "SQLite ran out of memory",
    apsw.SQLITE_TOOBIG: "a value is too large for SQLite",
}


#: SQLite's primary result codes of failures outside the statement (another writer, the disk, the
#: file's permissions or mount, memory): the same statement may succeed later. Any other code (a
#: value too big, a constraint, an SQL error, a corrupt file) fails again the same way; see
#: robotmem.errors.StorageError.transient and its PostgreSQL twin in store/postgres/connection.py.
_TRANSIENT_CODES = frozenset((apsw.SQLITE_BUSY, apsw.SQLITE_LOCKED, apsw.SQLITE_FULL, apsw.SQLITE_READONLY,
                              apsw.SQLITE_IOERR, apsw.SQLITE_CANTOPEN, apsw.SQLITE_PERM, apsw.SQLITE_NOMEM,
                              apsw.SQLITE_INTERRUPT, apsw.SQLITE_PROTOCOL))


def _transient(exc: BaseException) -> bool:
    code = getattr(exc, "result", None)
    return isinstance(exc, apsw.Error) and isinstance(code, int) and code & 0xFF in _TRANSIENT_CODES


#: What an I/O error means, by the operating system's error number behind it: SQLite reports a failed
#: write as SQLITE_IOERR whatever the cause (only ENOSPC in its plain write becomes SQLITE_FULL), and
#: "check the disk" sent a robot's operator to the kernel log for a file-size limit.
_IO_CAUSES = {
    errno.ENOSPC: _WHAT_TO_DO[apsw.SQLITE_FULL],
    errno.EDQUOT: "the disk quota of this user is used up; free space or raise the quota, then retry: nothing "
                  "acknowledged was lost",
    errno.EFBIG: "the database file reached the largest size this process may write (a file-size limit: ulimit -f, "
                 "RLIMIT_FSIZE) or its file system allows; raise the limit or move the store, then retry: nothing "
                 "acknowledged was lost",
    errno.EROFS: "the file system that holds the database became read-only while it was open (the kernel remounts "
                 "a disk read-only after an error: see its log, dmesg); reads still work, writes fail until it is "
                 "repaired and mounted read-write (unmounting it needs the processes that have the store open to "
                 "stop): nothing acknowledged was lost",
}


def _system_errno(conn: apsw.Connection | None) -> int:
    """The operating system's error number of the connection's last failed I/O (0: none known)."""
    try:
        return conn.system_errno if conn is not None else 0
    except apsw.Error:  # closed meanwhile
        return 0


def _describe(exc: apsw.Error, conn: apsw.Connection | None = None) -> str:
    """What failed and what to do, without SQL text or internals; ``conn``, the connection that failed,
    tells an I/O error's cause."""
    code = getattr(exc, "result", None)
    if isinstance(code, int) and code & 0xFF == apsw.SQLITE_IOERR:
        cause = _IO_CAUSES.get(_system_errno(conn))
        if cause is not None:
            return cause
    if isinstance(code, int) and code & 0xFF in _WHAT_TO_DO:
        return _WHAT_TO_DO[code & 0xFF]
    # Anything else (an SQL error, a constraint) is a defect or a store from a newer version.
    return f"SQLite reported {type(exc).__name__.removesuffix('Error') or 'an error'} ({code}); the log has the details"
