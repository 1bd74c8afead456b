"""A bridge writing to PostgreSQL while the server is down: its outbox holds the records and
writes every one, once, when the server is back (a real server, stopped and started)."""

from __future__ import annotations

from typing import Any

from pipeline_helpers import (
    T0,
    ManualClock,
    S,
    assert_docking_episode_written_once,
    assert_kept_frames_stored_or_counted,
    feed_docking_episode,
    feed_kept_frames_while_the_store_fails,
    joints,
    straight_drive,
)

from bridges.pipeline import BridgeConfig, FileEpisodes, Pipeline, RetryPolicy, TopicEpisodes
from robotmem import Memory


def test_records_written_while_the_server_is_down_are_held_and_written_once_it_is_back(
        own_server: tuple[Any, Any]) -> None:
    import pgserver

    server, pgdata = own_server
    url = server.get_uri()
    clock = ManualClock()
    with Memory(url=url, embedder=None) as mem:
        pipeline = Pipeline(mem, BridgeConfig(), collection="test", robot_id="bot-1", episode_policy=TopicEpisodes(),
                            source="ws://robot:9090", write_retry=RetryPolicy(clock=clock, sleep=clock.advance))
        server.cleanup()  # the server stops before the episode starts
        drive = feed_docking_episode(pipeline)
        clock.advance(1.0)
        pipeline.tick(T0 + 27 * S)
        stats = pipeline.stats
        assert stats.records_written == 0 and stats.write_retries == 2 and stats.records_dropped == 0
        assert pipeline.writer.pending_records == 5  # three chunks, the note, the summary

        back = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            clock.advance(10.0)
            pipeline.tick(T0 + 28 * S)
            assert_docking_episode_written_once(mem, pipeline, drive)
            pipeline.close()
        finally:
            back.cleanup()


def test_records_held_while_the_server_is_down_stay_bounded_in_bytes(own_server: tuple[Any, Any]) -> None:
    import pgserver

    server, pgdata = own_server
    with Memory(url=server.get_uri(), embedder=None) as mem:
        server.cleanup()
        pipeline = feed_kept_frames_while_the_store_fails(mem)
        back = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            pipeline.close()
            assert_kept_frames_stored_or_counted(mem, pipeline)
        finally:
            back.cleanup()


def _drive_with_joints(pipeline: Pipeline, name: str) -> None:
    """Odometry, ten JointStates naming ``name`` and ``elbow``, odometry again; then closed."""
    msgs = (straight_drive(T0, 2.0)
            + [joints(T0 + int(2.5 * S) + i * S // 20, [0.1 * i, 0.2], names=[name, "elbow"]) for i in range(10)]
            + straight_drive(T0 + 3 * S, 1.0))
    for msg in msgs:
        pipeline.feed(msg)
    pipeline.close()


def _live_pipeline(mem: Memory, clock: ManualClock) -> Pipeline:
    return Pipeline(mem, BridgeConfig(), episode_policy=FileEpisodes(), collection="test", robot_id="bot-1",
                    source="ws://robot:9090", write_retry=RetryPolicy(clock=clock, sleep=clock.advance))


def test_a_joint_name_past_postgresqls_lexeme_limit_is_stored_with_the_whole_episode(
        postgres_url: str, tmp_path: Any) -> None:
    # 700 Thai letters are 2,100 bytes: PostgreSQL took it for a lost connection, the outbox held the
    # episode behind it as an outage and dropped all of it at close (the session was left open)
    outcome = {}
    for name, where in (("sqlite", str(tmp_path / "m.db")), ("postgresql", postgres_url)):
        clock = ManualClock()
        with Memory(where, embedder=None) as mem:
            pipeline = _live_pipeline(mem, clock)
            _drive_with_joints(pipeline, "ก" * 700)
            stats = pipeline.stats
            outcome[name] = (stats.records_rejected, stats.records_dropped, stats.write_retries,
                             mem.stats()["memories"], [s["status"] for s in mem.list_sessions(collection="test")])
    assert outcome["postgresql"] == outcome["sqlite"] == (0, 0, 0, 3, ["ended"])


def test_a_record_the_server_refuses_for_its_content_is_rejected_alone_and_the_episode_goes_on(
        postgres_url: str) -> None:
    import psycopg

    clock = ManualClock()
    with Memory(postgres_url, embedder=None) as mem:
        # a real statement error (SQLSTATE 22023) for one record's content: it would fail the same way
        # every time, so the outbox must not hold the episode behind it as if the server were down
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("""
                CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    IF NEW.content LIKE '%poison%' THEN
                        RAISE EXCEPTION 'refused' USING ERRCODE = '22023';
                    END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER refuse_poison BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION refuse_poison();
            """)
        pipeline = _live_pipeline(mem, clock)
        _drive_with_joints(pipeline, "poison")
        stats = pipeline.stats
        assert (stats.records_rejected, stats.records_dropped, stats.write_retries) == (1, 0, 0)
        assert "refused" in stats.topic("/joint_states").rejected_reason
        assert mem.stats()["memories"] == 2
        assert [s["status"] for s in mem.list_sessions(collection="test")] == ["ended"]


def test_a_session_start_failing_past_the_attempt_limit_while_the_server_is_down_is_kept(
        own_server: tuple[Any, Any]) -> None:
    # Down longer than the attempt limit: the episode's start was given up, and once the server was
    # back every record behind it was refused (no such session).
    import pgserver

    server, pgdata = own_server
    clock = ManualClock()
    with Memory(url=server.get_uri(), embedder=None) as mem:
        pipeline = Pipeline(mem, BridgeConfig(), collection="test", robot_id="bot-1", episode_policy=TopicEpisodes(),
                            source="ws://robot:9090",
                            write_retry=RetryPolicy(clock=clock, sleep=clock.advance, max_attempts=2))
        server.cleanup()
        drive = feed_docking_episode(pipeline)
        for second in range(5):  # well past the attempt limit
            clock.advance(10.0)
            pipeline.tick(T0 + (29 + second) * S)
        assert pipeline.stats.records_written == 0
        back = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            clock.advance(10.0)
            pipeline.tick(T0 + 35 * S)
            assert pipeline.stats.records_rejected == 0
            assert_docking_episode_written_once(mem, pipeline, drive)
            pipeline.close()
        finally:
            back.cleanup()
