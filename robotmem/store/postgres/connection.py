"""PostgreSQL connections: one per thread, reconnecting after the server comes back.

Statements are written with ``?`` placeholders, as for SQLite; :class:`PgConnection`
turns them into psycopg's ``%s`` (outside string literals) so one statement text can
serve both stores where the SQL itself is portable.

Writes run at READ COMMITTED (rows are locked, not snapshots, so concurrent writers
queue instead of failing); reads run in a REPEATABLE READ READ ONLY snapshot, which
PostgreSQL never aborts. A deadlock or serialization failure is retried by
:meth:`PgDatabase.run_write`, the one place a transaction body can be re-run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...config import check_postgres_url, redact_url
from ...errors import StorageError
from ..claims import Release, claim_key, in_this_process
from ..forks import in_child_after_fork, keep_inherited
from ..pipeline import PipelinedWrites, Transactions

__all__ = ["PgConnection", "PgDatabase"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)

#: libpq's connection liveness settings, unless the URL sets them: without them a write sent
#: into a network partition (a robot out of Wi-Fi range) waits for the kernel's TCP timeouts,
#: about 15 minutes, before it fails. With them an unacknowledged send fails after 30 s and a
#: silent idle connection is noticed within 25 s, so the call gets a storage_error instead.
LIVENESS = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
            "tcp_user_timeout": 30_000}
_RETRIES = 8
#: Looks at a lost COMMIT's transaction while the old backend still holds it (about 2 s in all).
_OUTCOME_POLLS = 12
#: A write transaction knows its id from the start (in the BEGIN's own round trip), so that a COMMIT
#: whose answer a lost connection took can be looked up (PgDatabase._commit).
_BEGIN_WRITE = "BEGIN; SELECT txid_current()"


@lru_cache(maxsize=1024)
def _to_psycopg(query: str) -> str:
    """``?`` placeholders to ``%s`` and literal ``%`` to ``%%``, leaving quoted text alone."""
    out: list[str] = []
    quoted = False
    for char in query:
        if char == "'":
            quoted = not quoted
            out.append(char)
        elif char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


def _with_liveness(url: str) -> str:
    """The URL as libpq connection settings, with LIVENESS where the URL sets nothing (the URL wins)."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return url  # connect reports the malformed URL
    return make_conninfo(url, **{key: value for key, value in LIVENESS.items() if key not in given})


class PgConnection:
    """A psycopg connection with the small surface the store code uses (``execute`` with ``?``)."""

    dialect = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        #: the thread that opened it, the only one that runs statements on it
        self.owner = threading.get_ident()
        self._rowcount = 0
        #: (collection, model) pairs whose vector index is known to exist
        self.indexed: set[tuple[str, str]] = set()
        #: Counts taken inside the current read-only snapshot (REPEATABLE READ: they cannot change
        #: before it ends), by key; None outside one. Recall counts its words' document frequencies
        #: for the full-text plan and again for relevance (robotmem.search.relevance).
        self.snapshot_counts: dict[Hashable, int] | None = None
        #: The running write transaction's id, to look up a COMMIT whose answer was lost.
        self.xid: int | None = None

    def execute(self, query: str, params: Any = ()) -> psycopg.Cursor[Any]:
        cur = self.raw.execute(_to_psycopg(query), tuple(params) if params else None)
        self._rowcount = cur.rowcount
        return cur

    def executemany(self, query: str, rows: Any) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(_to_psycopg(query), list(rows))
            self._rowcount = cur.rowcount

    def executemany_returning(self, query: str, rows: Any) -> list[tuple[Any, ...]]:
        """executemany of an INSERT ... RETURNING, pipelined; the returned rows in input order."""
        out: list[tuple[Any, ...]] = []
        with self.raw.cursor() as cur:
            cur.executemany(_to_psycopg(query), list(rows), returning=True)
            while True:
                out.extend(tuple(r) for r in cur.fetchall())
                if not cur.nextset():
                    break
        return out

    def changes(self) -> int:
        return self._rowcount

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        try:
            with self.raw.transaction():
                yield
        except psycopg.Error as exc:
            raise StorageError(_describe(exc), transient=_transient(exc)) from exc

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class PgDatabase:
    """Hands each thread its own connection to one PostgreSQL database."""

    kind = "postgresql"

    def __init__(self, url: str, *, connect_timeout_s: int = 5, on_connect: Callable[[PgConnection], None]
                 | None = None) -> None:
        check_postgres_url(url)  # also when opened without a Config (migrate --to, tooling)
        self.url = url
        self.location = redact_url(url)
        self._timeout = connect_timeout_s
        self._on_connect = on_connect
        self._local = threading.local()
        self._all: list[PgConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        # Threads (their ident) inside an outermost read() or write(): close() leaves their
        # connections to them (_leave). psycopg closes a socket at once, also under a statement
        # another thread is waiting on, which failed that call with "the connection to PostgreSQL
        # was lost"; one closed between two statements of a call failed the call half done.
        self._in_call: set[int] = set()
        in_child_after_fork(self._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: the parent's connections are its sockets, one protocol stream each; the
        child opens its own on first use. Not closed: psycopg's close sends the server a Terminate,
        which ended the parent's session."""
        self._lock = threading.Lock()
        keep_inherited(*self._all)
        self._all = []
        self._in_call = set()
        self._local = threading.local()

    def connection(self) -> PgConnection:
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.raw.closed:
            self._forget(conn)
            conn = None
        if conn is None:
            if self._closed:
                raise StorageError("the memory store is closed")
            conn = self._open()
            with self._lock:
                closed = self._closed  # close() ran while it connected: it never saw this one
                if not closed:
                    self._all.append(conn)
            if closed:
                _close_quietly(conn)
                raise StorageError("the memory store is closed")
            self._local.conn = conn
        return conn

    def claim(self, name: str) -> Release | str:
        """Claim ``name`` (robotmem.store.claims): an advisory lock of a transaction left open on a
        connection of its own, so that it lasts exactly as long as the claim, and the server drops
        it when the holder's process or host goes away (keepalives: within about half a minute).
        The release, or who holds it.

        Of the transaction, not the session: behind a pooler in transaction mode (pgbouncer) a
        session-level lock stayed on the pooled server connection after the claim ended, held for
        as long as the pool kept it; an open transaction keeps its server connection to itself
        until it ends. It holds no snapshot between statements (READ COMMITTED) and writes nothing,
        so vacuum is not held back."""
        raw = self._connect("robotmem claim")
        try:
            # Advisory locks span the database; each schema of it is a store of its own.
            schema = raw.execute("SELECT current_schema()").fetchone()
            key = int.from_bytes(claim_key(f"{schema[0] if schema else ''}\0{name}"), "big", signed=True)
            # One simple query, the key written in (an integer): a statement with parameters leaves its
            # portal, and the portal's snapshot, open until the next statement, which holds back
            # vacuum's horizon for as long as the claim lasts (seen in pg_stat_activity.backend_xmin).
            # A server's idle_in_transaction_session_timeout (a DBA's guard against forgotten
            # transactions) would end the claim while its replay runs: off for this transaction.
            row = _selected_row(raw.execute(
                "BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0; "
                f"SELECT pg_try_advisory_xact_lock({int(key)})"))
            if row is None or not row[0]:
                holder = raw.execute(
                    "SELECT a.pid, a.client_addr, a.client_hostname FROM pg_locks l JOIN pg_stat_activity a"
                    " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s"
                    " AND l.objid = %s AND l.objsubid = 1",
                    ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
                raw.close()
                where = (holder[2] or holder[1]) if holder is not None else None
                return (f"PostgreSQL backend {holder[0]} of a client on {where}" if holder is not None and where
                        else "another connection")
        except psycopg.Error as exc:
            raw.close()
            raise StorageError(f"cannot claim {name!r} in PostgreSQL: {_describe(exc)}") from exc
        # In a forked child, which shares the socket, the release does nothing: the claim is the parent's.
        return in_this_process(lambda: _end_claim(raw))

    def open_connections(self) -> int:
        """Connections currently open (one per thread that used the store, bulk writers' aside)."""
        with self._lock:
            return len(self._all)

    def _enter(self, conn: PgConnection) -> bool:
        """Note a call on this thread; True when it is the outermost (then ``_leave`` it)."""
        with self._lock:
            if conn not in self._all:  # close() took it between connection() and here
                raise StorageError("the memory store is closed")
            if conn.owner in self._in_call:
                return False
            self._in_call.add(conn.owner)
            return True

    def _leave(self) -> None:
        """The outermost call on this thread returned: if the store was closed meanwhile, close the
        thread's connection here, now that nothing runs on it."""
        me = threading.get_ident()
        with self._lock:
            self._in_call.discard(me)
            mine = [c for c in self._all if c.owner == me] if self._closed else []
            for conn in mine:
                self._all.remove(conn)
        for conn in mine:
            _close_quietly(conn)

    def _connect(self, application_name: str) -> psycopg.Connection[Any]:
        try:
            # prepare_threshold=None: no named server-side statements. Behind a pooler in transaction
            # mode (pgbouncer) the server connection changes between transactions, and psycopg's
            # prepared "_pg3_0" was missing there, or already existed, or named another statement
            # (a COMMIT bound to a 3-parameter query). Unnamed statements cost nothing measurable
            # here: docs/benchmarks.md, "Behind pgbouncer".
            return psycopg.connect(_with_liveness(self.url), connect_timeout=self._timeout, autocommit=True,
                                   application_name=application_name, prepare_threshold=None)
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to PostgreSQL at {self.location}: {_first_line(exc)}") from exc

    def _open(self) -> PgConnection:
        raw = self._connect("robotmem")
        conn = PgConnection(raw)
        if self._on_connect is not None:
            try:
                self._on_connect(conn)
            except psycopg.Error as exc:
                raw.close()
                raise StorageError(f"cannot prepare the PostgreSQL connection: {_describe(exc)}",
                                   transient=_transient(exc)) from exc
        return conn

    def _forget(self, conn: PgConnection) -> None:
        self._local.conn = None
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        try:
            conn.raw.close()
        except psycopg.Error:  # pragma: no cover - closing a broken connection
            pass

    @contextmanager
    def read(self) -> Iterator[PgConnection]:
        """A consistent snapshot for several SELECTs."""
        conn = self.connection()
        outermost = self._enter(conn)
        try:
            if conn.in_transaction:
                yield conn
                return
            with self._transaction(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "reading") as active:
                active.snapshot_counts = {}
                try:
                    yield active
                finally:
                    active.snapshot_counts = None
        finally:
            if outermost:
                self._leave()

    @contextmanager
    def write(self, *, wait: bool = True) -> Iterator[PgConnection]:
        """One atomic write transaction; nested calls join the outer one.

        ``wait=False`` gives up at once when a row it needs is locked (bookkeeping that can
        be written later).
        """
        conn = self.connection()
        outermost = self._enter(conn)
        try:
            if conn.in_transaction:
                yield conn
                return
            with self._transaction(conn, _BEGIN_WRITE, "writing to") as active:
                if not wait:
                    active.execute("SET LOCAL lock_timeout = '50ms'")
                yield active
        finally:
            if outermost:
                self._leave()

    def pipelined_writes(self) -> PipelinedWrites:
        """Write transactions on a connection of their own that commit on a worker thread (bulk loads)."""
        if self._closed:
            raise StorageError("the memory store is closed")
        return PipelinedWrites(self._open(), Transactions(
            backend_error=psycopg.Error, begin=self._begin_batch, commit=self._commit_batch,
            rollback=self._rollback_dedicated, failed=self._write_failed, close=_close_quietly))

    def _begin_batch(self, conn: PgConnection) -> PgConnection:
        return self._begin(conn, _BEGIN_WRITE, drop=_close_quietly, reopen=self._open)

    def _commit_batch(self, conn: PgConnection) -> None:
        self._commit(conn, "writing to", drop=_close_quietly, rollback=self._rollback_dedicated)

    def _commit(self, conn: PgConnection, verb: str, *, drop: Callable[[PgConnection], None],
                rollback: Callable[[PgConnection], None]) -> None:
        """COMMIT the transaction on ``conn``. When the connection is lost with it, PostgreSQL is
        asked on a new one how the transaction ended: the COMMIT may have been carried out with only
        its answer lost, and calling the write failed then would have a caller that retries
        (``transient``) store it twice (a perception, a batch) or reinforce a fact once more."""
        try:
            conn.raw.execute("COMMIT")
        except psycopg.Error as exc:
            if not _connection_lost(exc):
                rollback(conn)
                raise _failed(verb, exc) from exc
            drop(conn)  # the old backend ends its transaction once it sees the socket closed
            outcome = self._outcome(conn.xid) if conn.xid is not None else "aborted"  # a read: nothing to keep
            if outcome == "committed":
                log.warning("the connection to PostgreSQL was lost with a COMMIT, which was carried out")
                return
            if outcome == "aborted":
                raise _failed(verb, exc) from exc
            raise StorageError(
                f"{verb} the memory store failed: {_describe(exc)} while the transaction was committed, and "
                f"whether it was stored is unknown", transient=False) from exc
        finally:
            conn.xid = None

    def _outcome(self, xid: int | None) -> str | None:
        """'committed' or 'aborted' for a transaction of a lost connection, as PostgreSQL knows it on a
        new one; None when the server cannot be asked or the old backend still holds it."""
        if xid is None:
            return None
        try:
            probe = self._open()
        except StorageError:
            return None
        try:
            for attempt in range(_OUTCOME_POLLS):
                row = probe.raw.execute("SELECT txid_status(%s)", (xid,)).fetchone()
                status = row[0] if row is not None else None
                if status in ("committed", "aborted"):
                    return str(status)
                time.sleep(0.005 * 2**min(attempt, 6))
            return None
        except psycopg.Error:
            return None
        finally:
            _close_quietly(probe)

    def _rollback_dedicated(self, conn: PgConnection) -> None:
        _rollback_or_close(conn)

    def _write_failed(self, exc: BaseException) -> StorageError:
        return _failed("writing to", exc)

    def run_write(self, body: Callable[[PgConnection], T]) -> T:
        """``body`` in a write transaction, re-run when PostgreSQL asks (deadlock, serialization)."""
        for attempt in range(_RETRIES):
            try:
                with self.write() as conn:
                    return body(conn)
            except StorageError as exc:
                if not isinstance(exc.__cause__, _RETRYABLE) or attempt == _RETRIES - 1:
                    raise
                time.sleep(0.005 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _transaction(self, conn: PgConnection, begin: str, verb: str) -> Iterator[PgConnection]:
        conn = self._begin(conn, begin, drop=self._forget, reopen=self.connection)
        try:
            yield conn
        except BaseException as exc:
            conn.xid = None
            self._rollback(conn)
            if isinstance(exc, psycopg.Error):
                raise _failed(verb, exc) from exc
            raise
        self._commit(conn, verb, drop=self._forget, rollback=self._rollback)

    def _begin(self, conn: PgConnection, statement: str, *, drop: Callable[[PgConnection], None],
               reopen: Callable[[], PgConnection]) -> PgConnection:
        """``statement`` (a BEGIN) on ``conn``, or on a new connection when ``conn`` was lost: the
        connection a transaction runs on, a thread's own or a bulk writer's."""
        try:
            _start(conn, statement)
            return conn
        except psycopg.OperationalError:
            # The server dropped this connection (a restart, an idle timeout): nothing ran
            # yet, so try once more on a new one before calling the server unreachable.
            drop(conn)
        conn = reopen()
        try:
            _start(conn, statement)
        except psycopg.OperationalError as exc:
            drop(conn)
            raise StorageError(f"the PostgreSQL server at {self.location} is unreachable: "
                               f"{_first_line(exc)}") from exc
        return conn

    def _rollback(self, conn: PgConnection) -> None:
        try:
            conn.raw.execute("ROLLBACK")
        except psycopg.Error:
            self._forget(conn)  # the connection broke with the statement: open a new one next time

    def close(self) -> None:
        """Close every connection; one inside a call on another thread is closed by that thread
        when the call returns (``_leave``), so the call finishes as it would have."""
        self._closed = True
        with self._lock:
            idle = [c for c in self._all if c.owner not in self._in_call]
            self._all = [c for c in self._all if c.owner in self._in_call]
        for conn in idle:
            _close_quietly(conn)


def _close_quietly(conn: PgConnection) -> None:
    try:
        conn.raw.close()
    except psycopg.Error:  # pragma: no cover
        log.exception("closing a connection failed")


def _failed(verb: str, exc: BaseException) -> StorageError:
    """A transaction's failure; a lost connection is called that (the server may well be up: the
    next transaction opens a new connection), not unreachable."""
    detail = _describe(exc) if isinstance(exc, psycopg.Error) else str(exc)
    return StorageError(f"{verb} the memory store failed: {detail}", transient=_transient(exc))


def _rollback_or_close(conn: PgConnection) -> None:
    """End whatever transaction is open on ``conn``; a connection that broke with the statement is
    closed, and the next call (or batch) opens a new one."""
    if conn.in_transaction and not conn.raw.closed:
        try:
            conn.raw.execute("ROLLBACK")
        except psycopg.Error:
            _close_quietly(conn)


def _start(conn: PgConnection, statement: str) -> None:
    """Run ``statement`` (a BEGIN, and for a write the SELECT of its transaction id). A failure the server
    reports for the statement, not the connection, ends the transaction the BEGIN opened and is a
    StorageError: a hot standby refuses a write's transaction id ("cannot execute pg_current_xact_id()
    during recovery"), which reached the caller as psycopg's own exception and left the transaction
    open and aborted, so that every later call of the thread joined it and failed."""
    try:
        conn.xid = _transaction_id(conn.raw.execute(statement))
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        conn.xid = None
        _rollback_or_close(conn)
        verb = "writing to" if statement == _BEGIN_WRITE else "reading"
        raise _failed(verb, exc) from exc


def _selected_row(cursor: psycopg.Cursor[Any]) -> Any:
    """The first row of the first statement that selects one, in a string of several (``BEGIN;
    SELECT ...``); None when none does."""
    while cursor.description is None:
        if not cursor.nextset():
            return None
    return cursor.fetchone()


def _transaction_id(cursor: psycopg.Cursor[Any]) -> int | None:
    """The id a BEGIN statement selected (_BEGIN_WRITE), or None for a plain BEGIN."""
    row = _selected_row(cursor)
    return int(row[0]) if row is not None else None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


#: SQLSTATEs after which the connection is gone: class 08 (connection exception), the server
#: shutting down or not yet accepting connections (57P01-57P03), and the server ending a session
#: idle past idle_session_timeout (57P05) or idle_in_transaction_session_timeout (25P03).
_GONE_STATES = ("57P01", "57P02", "57P03", "57P05", "25P03")
#: SQLSTATE classes of failures outside the statement: the connection (08), a conflict with another
#: transaction (40), the server's resources (53: disk full, out of memory, too many connections),
#: an operator or a timeout (57), the server's system (58); and a lock not had in time (55P03, the
#: lock_timeout of write(wait=False)). Any other class (54 program limit exceeded, 22 data, 23
#: constraint, 42 syntax) is the statement's own and fails again the same way; see
#: robotmem.errors.StorageError.transient and its SQLite twin in store/connection.py.
_TRANSIENT_CLASSES = ("08", "40", "53", "57", "58")
_TRANSIENT_STATES = ("55P03",)


def _connection_lost(exc: psycopg.Error) -> bool:
    """Whether the connection failed (not the statement). psycopg's OperationalError is not that
    test: it also covers server errors such as ProgramLimitExceeded ("word is too long")."""
    state = exc.sqlstate
    if state is None:  # libpq's own errors: the socket closed, the server went away, a closed connection
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return state.startswith("08") or state in _GONE_STATES


def _transient(exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.Error):
        return False
    if _connection_lost(exc):
        return True
    state = exc.sqlstate
    return state is not None and (state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES)


def _describe(exc: psycopg.Error) -> str:
    """What failed, without SQL text: the server's message, or why the connection dropped."""
    if _connection_lost(exc):
        return f"the connection to PostgreSQL was lost ({_first_line(exc)})"
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) or _first_line(exc)
    if exc.sqlstate == "57014" and "statement timeout" in primary:
        return primary + _STATEMENT_TIMEOUT_HINT
    if exc.sqlstate == "25006":  # read_only_sql_transaction
        return primary + (" (this server or role only reads: a hot standby, or default_transaction_read_only; "
                          "write through the primary, as a role that may write)")
    return primary


#: What to do when the server's statement_timeout, a DBA's guard against runaway queries, cancels
#: robotmem's own long work (an index build, a migration step, an import batch). The transaction was
#: rolled back, so nothing of it is stored, and the next try fails the same way unless the limit changes.
_STATEMENT_TIMEOUT_HINT = (
    " (the server's statement_timeout; raise it for robotmem's "
    "role: ALTER ROLE ... SET statement_timeout = '10min', or for one command: "
    "PGOPTIONS='-c statement_timeout=0' robotmem ...)")


def _end_claim(raw: psycopg.Connection[Any]) -> None:
    """End a claim's transaction, and its lock, before its connection closes. Closing alone left the
    lock to the server's backend, which lets go of it only once it has read the disconnect: under
    load, a claim of the same name made right after the block still found it held (seen in CI)."""
    try:
        raw.execute("ROLLBACK")
    except psycopg.Error:
        pass  # the connection is gone already, and the lock with it
    finally:
        raw.close()
