"""Many episodes shorter than late_grace_s in a row: each waits behind the one before it, and
none is lost, merged or finished out of order (the held episodes are unwound one by one)."""

from __future__ import annotations

from collections.abc import Callable

from pipeline_helpers import T0, S, image, marker, odom

from bridges.pipeline import Pipeline, TopicEpisodes
from robotmem import Memory

MakePipeline = Callable[..., Pipeline]


def test_three_hundred_episodes_shorter_than_the_grace_window_are_each_stored_whole(
        mem: Memory, make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline(policy=TopicEpisodes())
    episodes, step = 300, S // 2  # 0.5 s episodes, 2 s late_grace_s
    for k in range(episodes):
        t = T0 + k * 2 * step
        pipeline.feed(marker(t, "start"))
        pipeline.feed(odom(t + step // 4, float(k), 0.0))
        pipeline.feed(marker(t + step // 2, "end"))
        pipeline.feed(image(t + step // 2 - 1))  # stamped before its end, arriving after it
    stats = pipeline.close()
    sessions = mem.list_sessions(collection="test")
    assert len(sessions) == episodes and all(s["status"] == "ended" for s in sessions)
    starts = sorted(s["context"]["episode"]["t_start_ns"] for s in sessions)
    assert starts == [T0 + k * 2 * step for k in range(episodes)]
    assert stats.topics["/camera/image_raw"].late == episodes
    assert stats.topics["/camera/image_raw"].outside_episode == 0
