"""A bridge writing to PostgreSQL while the server is down: its outbox holds the records and
writes every one, once, when the server is back (a real server, stopped and started)."""

from __future__ import annotations

from typing import Any

from pipeline_helpers import (
    T0,
    ManualClock,
    S,
    assert_docking_episode_written_once,
    feed_docking_episode,
)

from bridges.pipeline import BridgeConfig, Pipeline, RetryPolicy, TopicEpisodes
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
