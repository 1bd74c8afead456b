"""A store that refuses writes (another connection holds SQLite's write lock): held, retried, bounded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest
from pipeline_helpers import (
    T0,
    ManualClock,
    S,
    assert_docking_episode_written_once,
    assert_kept_frames_stored_or_counted,
    by_topic,
    feed_docking_episode,
    feed_kept_frames_while_the_store_fails,
    kept_frame,
    records,
    straight_drive,
)

from bridges.pipeline import (
    BridgeConfig,
    FileEpisodes,
    Pipeline,
    RetryPolicy,
    TopicEpisodes,
)
from bridges.pipeline.episodes import EpisodePolicy
from robotmem import Memory
from robotmem.config import Config
from robotmem.errors import StorageError


class WriteLock:
    """Another connection to the same file holding the write lock, as a second process would."""

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("COMMIT")
            self.conn.close()
            self.held = False


@pytest.fixture
def busy_mem(tmp_path: Path) -> Iterator[Memory]:
    """A real store whose writers give up after 50 ms of waiting for the lock."""
    config = Config.load(busy_timeout_ms=50)
    with Memory(tmp_path / "busy.db", embedder=None, config=config) as memory:
        yield memory


@pytest.fixture
def lock(busy_mem: Memory) -> Iterator[WriteLock]:
    holder = WriteLock(busy_mem.path)
    yield holder
    holder.release()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _pipeline(mem: Memory, clock: ManualClock, policy: EpisodePolicy | None = None, **retry: float) -> Pipeline:
    return Pipeline(mem, BridgeConfig(), collection="test", robot_id="bot-1", episode_policy=policy or FileEpisodes(),
                    source="ws://robot:9090", write_retry=RetryPolicy(clock=clock, sleep=clock.advance, **retry))


def test_writes_refused_while_another_connection_holds_the_lock_are_written_once_it_is_gone(
        busy_mem: Memory, lock: WriteLock, clock: ManualClock) -> None:
    pipeline = _pipeline(busy_mem, clock, TopicEpisodes())
    drive = feed_docking_episode(pipeline)

    stats = pipeline.stats
    assert busy_mem.list_sessions() == [] and stats.records_written == 0
    assert stats.write_retries == 1  # the session start failed; the rest waits behind it, in order
    assert pipeline.writer.pending_records == 5  # three chunks, the note, the summary
    clock.advance(0.1)
    pipeline.tick(T0 + 27 * S)
    assert stats.write_retries == 1  # the backoff has not passed
    clock.advance(1.0)
    pipeline.tick(T0 + 28 * S)
    assert stats.write_retries == 2

    lock.release()
    clock.advance(10.0)
    pipeline.tick(T0 + 29 * S)
    assert_docking_episode_written_once(busy_mem, pipeline, drive)
    pipeline.close()


def test_writes_refused_by_a_full_disk_are_held_and_written_once_space_is_freed(tmp_path: Path,
                                                                               clock: ManualClock) -> None:
    # A full disk is transient (StorageError.transient): the episode that fits once space is freed is not dropped.
    with Memory(tmp_path / "full.db", embedder=None) as mem:
        conn = mem._db.connection()  # the thread the pipeline writes on
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}").fetchall()  # fault injection: SQLITE_FULL, as a full disk
        pipeline = _pipeline(mem, clock, TopicEpisodes())
        drive = feed_docking_episode(pipeline)
        stats = pipeline.stats
        # what fits in the file's free pages is written; the rest is held, nothing dropped
        assert stats.write_retries >= 1 and stats.records_dropped == 0 and pipeline.writer.pending_records > 0
        conn.execute("PRAGMA max_page_count = 1073741823").fetchall()  # space freed
        clock.advance(10.0)
        pipeline.tick(T0 + 29 * S)
        assert_docking_episode_written_once(mem, pipeline, drive)
        pipeline.close()
        assert stats.records_dropped == 0


def test_a_write_still_failing_after_the_attempt_limit_is_dropped_and_counted(
        busy_mem: Memory, clock: ManualClock) -> None:
    pipeline = _pipeline(busy_mem, clock, max_attempts=2)
    for msg in straight_drive(T0, seconds=11):
        pipeline.feed(msg)  # the session and the first chunk are stored
    lock = WriteLock(busy_mem.path)
    try:
        for msg in straight_drive(T0 + 11 * S, seconds=10, origin=(5.5, 0.0)):
            pipeline.feed(msg)  # the second chunk fails once ...
        clock.advance(1.0)
        pipeline.tick(T0 + 21 * S)  # ... and twice: dropped
        assert pipeline.stats.records_dropped == 1 and pipeline.stats.topics["/odom"].store_dropped == 1
        assert pipeline.writer.pending_records == 0
    finally:
        lock.release()
    stats = pipeline.close()
    (session,) = stats.session_ids
    assert busy_mem.get_session(session)["status"] == "ended"
    assert len(by_topic(busy_mem, session, "/odom")) == 2  # the first and the last chunk
    assert stats.write_retries == 2


def test_a_session_start_failing_past_the_attempt_limit_is_kept_so_its_episode_is_written_once_the_store_is_back(
        busy_mem: Memory, clock: ManualClock) -> None:
    # A store down longer than the attempt limit (a full disk an operator frees minutes later) gave up the
    # episode's start: every record and note queued behind it was then refused (no such session) once the
    # store came back, though they fit. A session operation holds no records: it waits for the store instead.
    lock = WriteLock(busy_mem.path)
    try:
        pipeline = _pipeline(busy_mem, clock, TopicEpisodes(), max_attempts=2)
        drive = feed_docking_episode(pipeline)
        for second in range(5):  # well past the attempt limit
            clock.advance(10.0)
            pipeline.tick(T0 + (29 + second) * S)
        assert pipeline.stats.records_written == 0
    finally:
        lock.release()
    clock.advance(10.0)
    pipeline.tick(T0 + 35 * S)
    assert pipeline.stats.records_rejected == 0
    assert_docking_episode_written_once(busy_mem, pipeline, drive)
    pipeline.close()


def test_held_records_stay_bounded_by_dropping_the_oldest(busy_mem: Memory, lock: WriteLock, clock: ManualClock) -> None:
    pipeline = _pipeline(busy_mem, clock, max_pending_records=2)
    for msg in straight_drive(T0, seconds=50):
        pipeline.feed(msg)  # four chunks complete while the store is locked
    assert pipeline.writer.pending_records == 2 and pipeline.stats.records_dropped == 2
    lock.release()
    pipeline.close()  # the last chunk and the summary push out two more of the oldest
    (session,) = pipeline.stats.session_ids
    (chunk,) = by_topic(busy_mem, session, "/odom")
    assert chunk["context"]["episode"]["t_start_ns"] > T0 + 40 * S  # the newest data was kept
    assert pipeline.stats.records_dropped == 4 and len(records(busy_mem, session)) == 2


def test_close_gives_up_on_a_store_that_stays_locked_and_counts_what_it_dropped(
        busy_mem: Memory, lock: WriteLock, clock: ManualClock) -> None:
    pipeline = _pipeline(busy_mem, clock, close_timeout_s=3.0)
    for msg in straight_drive(T0, seconds=12):
        pipeline.feed(msg)
    stats = pipeline.close()  # does not raise
    assert stats.records_dropped == 3  # two chunks and the summary
    assert stats.write_retries >= 3 and pipeline.writer.pending_records == 0
    lock.release()
    assert busy_mem.list_sessions() == []


def test_without_a_retry_policy_a_store_error_still_propagates(busy_mem: Memory, lock: WriteLock) -> None:
    pipeline = Pipeline(busy_mem, BridgeConfig(), collection="test", robot_id=None, episode_policy=FileEpisodes(),
                        source="/recordings/a.mcap")
    with pytest.raises(StorageError, match="busy"):
        pipeline.feed(straight_drive(T0, seconds=1)[0])


def test_a_store_error_that_is_not_transient_drops_that_operation_only_and_the_next_goes_on(clock: ManualClock) -> None:
    # a statement the database refuses for its content (StorageError.transient False) fails the same
    # way every time: holding it would hold every write queued behind it until they are all dropped
    from bridges.pipeline.outbox import StoreOperation, WriteOutbox
    from bridges.pipeline.stats import PipelineStats

    stats = PipelineStats()
    outbox = WriteOutbox(RetryPolicy(clock=clock, sleep=clock.advance), stats)
    ran: list[str] = []

    def refused() -> None:
        error = StorageError("writing to the memory store failed: word is too long")
        error.transient = False  # as the store sets it where it translates a statement's error
        raise error

    def busy() -> None:
        raise StorageError("the memory store is busy or unwritable")

    outbox.submit(StoreOperation("writing 2 records", refused, [("/joints", 1), ("/joints", 2)]))
    outbox.submit(StoreOperation("writing 1 record", lambda: ran.append("next"), [("/odom", 3)]))
    assert ran == ["next"] and len(outbox) == 0
    assert (stats.records_dropped, stats.write_retries) == (2, 0)

    outbox.submit(StoreOperation("writing 1 record", busy, [("/odom", 4)]))  # transient: held for a retry
    outbox.submit(StoreOperation("writing 1 record", lambda: ran.append("held"), [("/odom", 5)]))
    assert ran == ["next"] and len(outbox) == 2 and outbox.pending_records == 2
    assert (stats.records_dropped, stats.write_retries) == (2, 1)


def test_a_batch_larger_than_the_held_bytes_waits_for_the_store_until_a_newer_one_comes(clock: ManualClock) -> None:
    # Dropped at its first failure, every batch over --held-mb (a chunk of kept frames) was lost to
    # a store busy for a moment; the newest batch is held, the older ones still give way to it.
    from bridges.pipeline.outbox import StoreOperation, WriteOutbox
    from bridges.pipeline.stats import PipelineStats

    stats = PipelineStats()
    outbox = WriteOutbox(RetryPolicy(clock=clock, sleep=clock.advance, max_pending_bytes=1000), stats)
    store_busy, written = [True], []

    def write(name: str) -> Callable[[], None]:
        def run() -> None:
            if store_busy[0]:
                raise StorageError("the memory store is busy or unwritable")
            written.append(name)
        return run

    big = [("/cam", "x" * 5000)]
    outbox.submit(StoreOperation("writing 1 record", write("first"), big))
    assert len(outbox) == 1 and stats.records_dropped == 0
    outbox.submit(StoreOperation("writing 1 record", write("second"), big))
    assert len(outbox) == 1 and stats.records_dropped == 1  # the older gave way
    store_busy[0] = False
    outbox.pump(force=True)
    assert written == ["second"] and len(outbox) == 0


def test_held_records_stay_bounded_in_bytes_by_dropping_the_oldest(busy_mem: Memory, lock: WriteLock) -> None:
    # 2,000 records were the only bound: 2,000 kept frames of 500 KB are 1 GB held for a locked store.
    pipeline = feed_kept_frames_while_the_store_fails(busy_mem)
    lock.release()
    pipeline.close()
    assert_kept_frames_stored_or_counted(busy_mem, pipeline)


def test_a_batch_larger_than_the_byte_bound_is_written_when_the_store_takes_it(busy_mem: Memory) -> None:
    # The bound is for what waits on a failing store: a batch was checked against it before its
    # first try, so a healthy store never saw a chunk of frames over the bound.
    clock = ManualClock()
    pipeline = Pipeline(busy_mem, BridgeConfig(compressed_image_max_bytes=500_000), collection="test",
                        robot_id="bot-1", episode_policy=FileEpisodes(), source="ws://robot:9090",
                        write_retry=RetryPolicy(clock=clock, sleep=clock.advance, max_pending_bytes=1_000_000))
    for i in range(25):  # batches of ten 500 KB frames: 5 MB each
        pipeline.feed(kept_frame(T0 + i * S, 500_000))
    pipeline.close()
    (session,) = pipeline.stats.session_ids
    assert pipeline.stats.records_dropped == 0 and len(by_topic(busy_mem, session, "/cam/compressed")) == 25
