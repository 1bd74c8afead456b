"""A bridge writing to PostgreSQL while the server is down: its outbox holds the records and
writes every one, once, when the server is back (a real server, stopped and started)."""

from __future__ import annotations

from typing import Any

from pipeline_helpers import (
    T0,
    S,
    by_topic,
    learn,
    marker,
    records,
    straight_drive,
    summary_of,
)

from bridges.pipeline import BridgeConfig, Pipeline, RetryPolicy, TopicEpisodes
from robotmem import Memory


class ManualClock:
    """Backoff time under the test's control (the outage itself is real)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


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
        pipeline.feed(marker(T0, 'start {"task": {"name": "dock"}}'))
        drive = straight_drive(T0, seconds=25)
        for msg in drive:
            pipeline.feed(msg)
        pipeline.feed(learn(T0 + 5 * S, "The dock is behind the pillar"))
        pipeline.feed(marker(T0 + 26 * S, "end 0.8"))
        clock.advance(1.0)
        pipeline.tick(T0 + 27 * S)
        stats = pipeline.stats
        assert stats.records_written == 0 and stats.write_retries == 2 and stats.records_dropped == 0
        assert pipeline.writer.pending_records == 5  # three chunks, the note, the summary

        back = pgserver.get_server(pgdata, cleanup_mode="stop")
        try:
            clock.advance(10.0)
            pipeline.tick(T0 + 28 * S)
            assert pipeline.writer.pending_records == 0 and stats.records_dropped == 0
            (session,) = stats.session_ids
            assert mem.get_session(session)["outcome_score"] == 0.8
            chunks = by_topic(mem, session, "/odom")
            assert sum(mem.get_data(c["id"])["raw_points"] for c in chunks) == len(drive)  # every pose, once
            assert [m["content"] for m in records(mem, session) if m["type"] == "fact"] == [
                "The dock is behind the pillar"]
            assert summary_of(mem, session)["task"]["name"] == "dock"
            pipeline.close()
        finally:
            back.cleanup()
