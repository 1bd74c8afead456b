"""Which message time the pipeline believes (bridges/pipeline/stamps.py; docs/replay.md, "Recorded time").

Each stream is /odom at 20 Hz along +x at 0.5 m/s for 60 s, with its log time (``arrived_ns``)
beside the stamp, as the readers and the live bridge give it. One stamp is then moved; the
expectations come from the raw messages themselves: the log times bound the episode, a chunk
spans at most chunk_seconds of them, and the first message's position is where it starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from bridges.pipeline import BridgeConfig, Pipeline, RosMessage
from bridges.pipeline.stamps import OUTLIER_S, StampCheck, running_offset
from robotmem import Memory

from pipeline_helpers import S, T0, by_topic, joints, stamp, straight_drive, summary_of

SECONDS = 60.0
HZ = 20.0


def _logged(latency_ns: int = 0) -> list[RosMessage]:
    """The drive, each message logged ``latency_ns`` after its stamp."""
    return [dataclasses.replace(m, arrived_ns=m.t_ns + latency_ns) for m in straight_drive(T0, SECONDS, HZ)]


def _restamped(msg: RosMessage, t_ns: int) -> RosMessage:
    """``msg`` with header stamp ``t_ns`` (the message time a reader takes from it), log time kept."""
    data = dict(msg.data, header=dict(msg.data["header"], stamp=stamp(t_ns)))
    return dataclasses.replace(msg, t_ns=t_ns, data=data)


def _replay(make_pipeline: Callable[..., Pipeline], messages: list[RosMessage]) -> tuple[str, int]:
    """(the one episode's session id, stamps replaced on the messages' topic)"""
    pipeline = make_pipeline(session_id_for=lambda start_ns: f"s_{start_ns}")
    for msg in messages:
        pipeline.feed(msg)
    stats = pipeline.close()
    (session_id,) = stats.session_ids
    return session_id, stats.topics[messages[0].topic].stamps_replaced


def _assert_episode_as_logged(mem: Memory, session_id: str, messages: list[RosMessage]) -> None:
    """The episode and its chunks as the log times say, whatever one stamp said."""
    first_log = min(m.arrived_ns or 0 for m in messages)
    last_log = max(m.arrived_ns or 0 for m in messages)
    chunk_s = BridgeConfig().chunk_seconds
    summary = summary_of(mem, session_id)
    episode = summary["context"]["episode"]
    assert (episode["t_start_ns"], episode["t_end_ns"]) == (first_log, last_log)
    assert summary["context"]["task"]["duration_s"] == pytest.approx((last_log - first_log) / S)
    assert summary["context"]["spatial"]["start_position"][:2] == [0.0, 0.0]
    chunks = by_topic(mem, session_id, "/odom")
    assert len(chunks) == int(SECONDS // chunk_s)
    for chunk in chunks:
        assert 0 < chunk["context"]["task"]["duration_s"] <= chunk_s + 1 / HZ
        assert first_log / S <= chunk["occurred_at"] <= last_log / S
    assert sum(mem.get_data(c["id"])["raw_points"] for c in chunks) == len(messages)


@pytest.mark.parametrize("ahead_s", [20.0, 1500.0])
def test_a_first_stamp_ahead_of_its_log_time_is_replaced_by_it(
        mem: Memory, make_pipeline: Callable[..., Pipeline], ahead_s: float) -> None:
    messages = _logged()
    messages[0] = _restamped(messages[0], messages[0].t_ns + int(ahead_s * S))
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 1
    assert session_id == f"s_{messages[0].arrived_ns}"
    _assert_episode_as_logged(mem, session_id, messages)


@pytest.mark.parametrize("shift_s", [-1500.0, -20.0, 20.0])
def test_one_stamp_far_from_its_neighbours_mid_recording_is_replaced(
        mem: Memory, make_pipeline: Callable[..., Pipeline], shift_s: float) -> None:
    messages = _logged()
    messages[500] = _restamped(messages[500], messages[500].t_ns + int(shift_s * S))
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 1
    _assert_episode_as_logged(mem, session_id, messages)


def test_a_steady_latency_is_believed(mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """Stamps 0.4 s before their log times, jittering by 0.3 s: every stamp stands."""
    messages = [dataclasses.replace(m, arrived_ns=m.t_ns + 4 * S // 10 + (i % 7) * S // 20)
                for i, m in enumerate(straight_drive(T0, SECONDS, HZ))]
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 0
    episode = summary_of(mem, session_id)["context"]["episode"]
    assert (episode["t_start_ns"], episode["t_end_ns"]) == (messages[0].t_ns, messages[-1].t_ns)


def test_a_first_stamp_a_little_ahead_neither_stretches_a_chunk_nor_moves_the_start(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """Within OUTLIER_S the stamp is believed: the chunks and the episode still span the messages'
    earliest to latest stamp, never from the first message onwards only."""
    ahead_ns = int(OUTLIER_S / 2 * S)
    messages = _logged()
    messages[0] = _restamped(messages[0], messages[0].t_ns + ahead_ns)
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 0
    stamps = [m.t_ns for m in messages]
    episode = summary_of(mem, session_id)["context"]["episode"]
    assert (episode["t_start_ns"], episode["t_end_ns"]) == (min(stamps), max(stamps))
    chunks = by_topic(mem, session_id, "/odom")
    assert len(chunks) == int(SECONDS // BridgeConfig().chunk_seconds)
    assert max(c["context"]["task"]["duration_s"] for c in chunks) <= BridgeConfig().chunk_seconds + 1 / HZ


def test_messages_without_a_log_time_keep_their_stamps(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """A caller feeding the pipeline directly (no ``arrived_ns``) has nothing to check a stamp against."""
    messages = straight_drive(T0, 20.0, HZ)
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 0
    assert summary_of(mem, session_id)["context"]["episode"]["t_start_ns"] == T0


def test_a_topic_whose_stamps_all_run_off_the_log_time_keeps_them(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """A robot clock 2 min behind the recorder's (under max_episode_s): a steady offset, not an
    outlier. Its first message waits for the second to vouch for its stamp."""
    skew_ns = 120 * S
    messages = [dataclasses.replace(m, arrived_ns=m.t_ns + skew_ns) for m in straight_drive(T0, SECONDS, HZ)]
    session_id, replaced = _replay(make_pipeline, messages)
    assert replaced == 0
    assert session_id == f"s_{T0}"
    episode = summary_of(mem, session_id)["context"]["episode"]
    assert (episode["t_start_ns"], episode["t_end_ns"]) == (messages[0].t_ns, messages[-1].t_ns)


def test_a_single_message_far_from_its_log_time_is_placed_at_it_when_the_pipeline_closes(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """Nothing follows to vouch for it: the log time is believed."""
    (msg,) = _logged()[:1]
    session_id, replaced = _replay(make_pipeline, [_restamped(msg, msg.t_ns + 20 * S)])
    assert replaced == 1
    assert session_id == f"s_{msg.arrived_ns}"


def test_a_held_first_message_is_released_by_tick_once_its_wait_is_over(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """The live bridge: a topic that published once does not keep its message until the bridge stops."""
    (msg,) = _logged()[:1]
    pipeline = make_pipeline(session_id_for=lambda start_ns: f"s_{start_ns}")
    pipeline.feed(_restamped(msg, msg.t_ns + 20 * S))
    pipeline.tick(T0 + int(OUTLIER_S * S))
    assert pipeline.stats.session_ids == []
    pipeline.tick(T0 + int(OUTLIER_S * S) + 1)
    assert pipeline.stats.session_ids == [f"s_{T0}"]
    assert pipeline.stats.topics["/odom"].stamps_replaced == 1
    pipeline.close()


def test_a_joint_stream_whose_first_stamp_is_a_little_ahead_is_chunked_as_its_stamps_span(
        mem: Memory, make_pipeline: Callable[..., Pipeline]) -> None:
    """Every chunked converter measures a chunk from its earliest message (converters/base.py)."""
    messages = [joints(T0 + int(i * S / HZ), [math.sin(i / 20), 0.1 * i / HZ]) for i in range(int(SECONDS * HZ))]
    first = messages[0]
    messages[0] = dataclasses.replace(first, t_ns=first.t_ns + int(OUTLIER_S / 2 * S))
    session_id, _ = _replay(make_pipeline, messages)
    chunks = by_topic(mem, session_id, "/joint_states")
    assert len(chunks) == int(SECONDS // BridgeConfig().chunk_seconds)
    assert max(c["context"]["task"]["duration_s"] for c in chunks) <= BridgeConfig().chunk_seconds + 1 / HZ


def test_one_outlier_among_two_offsets_does_not_move_the_running_offset() -> None:
    """A topic 2 min off its log time whose second stamp is 30 s further off: the window holds two
    offsets, a tie, and the offset in use (the first) stays (stamps.running_offset, as the live
    bridge's MessageClock follows offsets). Taking the upper of the two made the outlier the running
    offset, and the third message, back on the topic's offset, was replaced as if it were the outlier."""
    drive = _logged()
    off = 120 * S
    check = StampCheck(limit_s=3600.0)
    admitted = [m for offset, msg in zip([off, off + 30 * S, off, off], drive, strict=False)
                for m in check.admit(_restamped(msg, msg.t_ns + offset))]
    # the first could not be vouched for by the second, the second is the outlier; the rest keep their stamps
    assert check.replaced == 2
    assert [m.t_ns - m.arrived_ns for m in admitted if m.arrived_ns is not None] == [0, 0, off, off]
    assert running_offset([off, off + 30 * S], off) == off and running_offset([1, 5, 9], 0) == 5
