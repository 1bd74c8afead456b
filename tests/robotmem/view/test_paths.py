"""Paths never jump across missing data, and they match the recorded poses (read by the mcap library)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import msgpack
import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from robotmem import Memory
from robotmem.view import episode_detail
from robotmem.view.paths import MAX_GAP_S, MAX_PATH_POINTS, decimate_path, segment_starts

REPO = Path(__file__).resolve().parents[3]
#: (t in epoch seconds, x, y)
Point = tuple[float, float, float]


def split_segments(chunks: list[list[Point]], gaps: list[tuple[float, float]] | None = None,
                   max_gap_s: float = MAX_GAP_S) -> list[list[Point]]:
    """Chunks (each a time-ordered point list) cut where episode_paths cuts a path (segment_starts)."""
    points = [point for chunk in chunks for point in chunk]
    firsts = np.array([index == 0 for chunk in chunks for index in range(len(chunk))], dtype=bool)
    starts = segment_starts(np.array([p[0] for p in points], dtype=float), firsts, gaps or [], max_gap_s)
    return [points[a:b] for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(points)])]


def thin_segments(segments: list[list[Point]], max_points: int = MAX_PATH_POINTS) -> list[list[Point]]:
    """Point lists thinned as episode_paths thins a path's segments (decimate_path)."""
    points = [point for segment in segments for point in segment]
    starts = np.cumsum([0] + [len(segment) for segment in segments[:-1]])
    x, y = (np.array([p[k] for p in points], dtype=float) for k in (1, 2))
    return [[points[i] for i in kept.tolist()] for kept in decimate_path(x, y, starts, max_points)]


def test_a_recorded_gap_between_two_points_ends_the_segment() -> None:
    chunk = [(0.0, 0.0, 0.0), (1.0, 1.0, 0.0), (5.0, 5.0, 0.0), (6.0, 6.0, 0.0)]
    assert split_segments([chunk]) == [chunk]  # inside a chunk a long interval is a simplified line
    segments = split_segments([chunk], gaps=[(2.0, 4.0)])
    assert segments == [chunk[:2], chunk[2:]]


def test_chunks_further_apart_than_the_limit_are_separate_segments() -> None:
    first = [(0.0, 0.0, 0.0), (10.0, 1.0, 0.0)]
    close = [(10.5, 1.1, 0.0), (20.0, 2.0, 0.0)]
    far = [(30.0, 9.0, 9.0), (40.0, 10.0, 9.0)]
    assert split_segments([first, close, far]) == [first + close, far]


def _raw_odom(path: Path, start_ns: int, end_ns: int) -> list[tuple[float, float]]:
    with path.open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        return [(m.pose.pose.position.x, m.pose.pose.position.y)
                for _, _, message, m in reader.iter_decoded_messages(topics=["/odom"])
                if start_ns <= message.log_time <= end_ns]


def test_the_drawn_path_starts_and_ends_where_the_recording_does(run_replay) -> None:
    run_replay(REPO / "datasets" / "nav_demo.mcap", "--episode-split", "topic:/robotmem/episode")
    with Memory(embedder=None) as mem:
        sessions = sorted(mem.list_sessions(), key=lambda s: s["context"]["episode"]["t_start_ns"])
        assert len(sessions) == 2
        for session in sessions:
            detail = episode_detail(mem, session["session_id"])
            (path,) = detail["paths"]
            assert path["frame"] == "odom" and len(path["segments"]) == 1
            drawn = path["segments"][0]
            start_ns = session["context"]["episode"]["t_start_ns"]
            raw = _raw_odom(REPO / "datasets" / "nav_demo.mcap", start_ns, start_ns + int(detail["episode"]["duration_s"] * 1e9))
            assert drawn[0] == pytest.approx(list(raw[0]), abs=0.05)
            assert drawn[-1] == pytest.approx(list(raw[-1]), abs=0.05)
            xs, ys = [p[0] for p in raw], [p[1] for p in raw]
            assert min(p[0] for p in drawn) == pytest.approx(min(xs), abs=0.1)
            assert max(p[1] for p in drawn) == pytest.approx(max(ys), abs=0.1)


def test_an_outage_recorded_on_the_episode_breaks_the_drawn_path() -> None:
    with Memory(embedder=None) as mem:
        episode = mem.start_session(context={"robot": {"id": "r1"}})
        sid = episode["session_id"]
        for i, (t0, xs) in enumerate(((100.0, [0.0, 1.0, 2.0]), (110.0, [2.0, 3.0, 4.0]), (125.0, [9.0, 10.0, 11.0]))):
            mem.save_perception(
                f"pose trajectory /odom chunk {i}", "proprioceptive",
                data={"t0_ns": int(t0 * 1e9), "t": [0.0, 4.0, 9.0], "x": xs, "y": [0.0, 0.0, 0.0], "z": [0.0] * 3},
                metadata={"source": {"topic": "/odom"},
                          "spatial": {"start_position": [xs[0], 0, 0], "end_position": [xs[-1], 0, 0],
                                      "position": [xs[1], 0, 0], "frame": "odom"}},
                session_id=sid)
        detail = episode_detail(mem, sid)
    (path,) = detail["paths"]
    assert [[p[0] for p in s] for s in path["segments"]] == [[0.0, 1.0, 2.0, 2.0, 3.0, 4.0], [9.0, 10.0, 11.0]]


def test_a_gap_recorded_on_a_chunk_breaks_only_its_own_topic() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        gaps = [{"start": 103.0, "end": 106.0, "reason": "no messages for 3.0 s", "topic": "/odom"},
                {"start": 101.0, "end": 102.0, "reason": "no messages for 1.0 s", "topic": "/camera"}]
        mem.save_perception("pose trajectory /odom with an outage", "proprioceptive",
                            data={"t0_ns": 100_000_000_000, "t": [0.0, 1.5, 2.5, 7.0, 8.0],
                                  "x": [0.0, 1.0, 2.0, 5.0, 6.0], "y": [0.0] * 5},
                            metadata={"source": {"topic": "/odom"}, "gaps": gaps,
                                      "spatial": {"start_position": [0, 0, 0], "end_position": [6, 0, 0],
                                                  "position": [2, 0, 0], "frame": "odom"}},
                            session_id=sid)
        (path,) = episode_detail(mem, sid)["paths"]
    assert [[p[0] for p in s] for s in path["segments"]] == [[0.0, 1.0, 2.0], [5.0, 6.0]]


def test_thinning_keeps_each_segments_ends_and_order_and_leaves_short_paths_alone() -> None:
    short = [[(float(i), float(i), 0.0) for i in range(10)]]
    assert thin_segments(short, max_points=10) == short
    segments = [[(float(i), float(i), 0.0) for i in range(start, start + n)]
                for start, n in ((0, 7_001), (10_000, 2), (20_000, 3_000), (30_000, 1))]
    thinned = thin_segments(segments, max_points=1000)
    assert len(thinned) == len(segments)
    assert sum(len(s) for s in thinned) <= 1000
    for original, kept in zip(segments, thinned):
        assert kept[0] == original[0] and kept[-1] == original[-1]
        assert set(kept) <= set(original) and kept == sorted(kept)


@pytest.mark.parametrize("pieces, size", [(20_000, 2), (5_000, 3), (300, 40), (251, 8)])
def test_a_path_broken_into_many_pieces_stays_within_the_budget_and_is_never_joined(pieces: int, size: int) -> None:
    segments = [[(float(p * 100 + i), float(p), float(i), ) for i in range(size)] for p in range(pieces)]
    thinned = thin_segments(segments, max_points=1000)
    assert 0 < sum(len(s) for s in thinned) <= 1000
    originals = {s[0]: s for s in segments}
    for kept in thinned:  # each kept piece is one original piece's own points, its ends included
        original = originals[kept[0]]
        assert kept[-1] == original[-1] and set(kept) <= set(original)


def test_a_long_trail_is_sent_thinned_within_its_own_bounds() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        xs = [float(i % 997) for i in range(0, 30_000)]  # a trail back and forth, three chunks of 10,000
        for c in range(3):
            chunk = xs[c * 10_000:(c + 1) * 10_000]
            mem.save_perception(
                f"pose trajectory /odom chunk {c}", "proprioceptive",
                data={"t0_ns": int((100 + c * 100) * 1e9), "t": [i * 0.01 for i in range(10_000)], "x": chunk,
                      "y": [v * 0.5 for v in chunk]},
                metadata={"source": {"topic": "/odom"},
                          "spatial": {"start_position": [chunk[0], 0, 0], "end_position": [chunk[-1], 0, 0],
                                      "position": [chunk[0], 0, 0], "frame": "odom"}},
                session_id=sid)
        (path,) = episode_detail(mem, sid)["paths"]
    drawn = [p for s in path["segments"] for p in s]
    assert path["points"] == 30_000 and path["decimated"] is True
    assert len(drawn) <= MAX_PATH_POINTS
    assert drawn[0] == [xs[0], xs[0] * 0.5] and drawn[-1] == [xs[-1], xs[-1] * 0.5]
    assert all(y == x * 0.5 for x, y in drawn)
    assert [len(s) for s in path["segments"]] == [len(t) for t in path["times"]]


def test_the_timeline_has_markers_gaps_and_force_curves() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": "arm-2"}, "task": {"name": "grasp"}})["session_id"]
        mem.save_perception("wrist force during the grasp", "tactile",
                            data={"t": [0.0, 0.1, 0.2], "force": [1.2, 8.7, 9.1], "torque": [0.1, 0.2, 0.3]},
                            metadata={"gaps": [{"start": 5.0, "end": 7.5, "reason": "disconnected"}]},
                            session_id=sid)
        mem.learn("grip_force=9N held the wet glass bottle", session_id=sid)
        mem.end_session(sid, outcome_score=0.9)
        detail = episode_detail(mem, sid)
    kinds = [e["kind"] for e in detail["timeline"]]
    assert kinds[-1] == "end" and "start" in kinds and "tactile" in kinds and "fact" in kinds
    (gap,) = [e for e in detail["timeline"] if e["kind"] == "gap"]
    assert "2.5 s" in gap["content"] and "disconnected" in gap["content"]
    assert "outcome 0.9" in detail["timeline"][-1]["content"]
    curves = {f["name"]: f["v"] for f in detail["series"]["forces"]}
    assert curves == {"force": [1.2, 8.7, 9.1], "torque": [0.1, 0.2, 0.3]}


def test_a_point_that_is_not_finite_is_left_out_and_breaks_the_path_there() -> None:
    with Memory(embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        nan, inf = float("nan"), float("inf")
        mem.save_perception("pose trajectory /odom with bad readings", "proprioceptive",
                            data={"t0_ns": 100_000_000_000, "t": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, nan],
                                  "x": [0.0, 1.0, nan, 3.0, 4.0, 5.0, 6.0], "y": [0.0, 0.0, 0.0, 0.0, inf, 0.0, 0.0]},
                            metadata={"source": {"topic": "/odom"},
                                      "spatial": {"start_position": [0, 0, 0], "end_position": [5, 0, 0], "frame": "odom"}},
                            session_id=sid)
        (path,) = episode_detail(mem, sid)["paths"]
    # x=nan at 0.2 and y=inf at 0.4 break the path; the point with no finite time (x=6) is only left out
    assert path["segments"] == [[[0.0, 0.0], [1.0, 0.0]], [[3.0, 0.0]], [[5.0, 0.0]]]


def _raw_points(db: Path, session_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The episode's poses read from the SQLite file with apsw and msgpack, not through robotmem:
    a payload's arrays are msgpack ext 1, a [dtype, shape] header then the raw bytes."""
    def ext(code: int, data: bytes) -> Any:
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data)
        dtype, shape = unpacker.unpack()
        return np.frombuffer(data[unpacker.tell():], dtype=np.dtype(dtype)).reshape(shape)

    connection = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    chunks = [msgpack.unpackb(blob, ext_hook=ext, raw=False) for (blob,) in connection.execute(
        "SELECT p.data FROM payloads p JOIN memories m ON m.id = p.memory_id WHERE m.session_id = ? "
        "ORDER BY m.occurred_at", (session_id,))]
    connection.close()
    return (np.concatenate([c["t0_ns"] / 1e9 + np.asarray(c["t"]) for c in chunks]),
            np.concatenate([c["x"] for c in chunks]), np.concatenate([c["y"] for c in chunks]))


def test_a_decimated_path_keeps_each_stretchs_extremes_and_its_ends(tmp_path: Path) -> None:
    # 30,000 poses in one segment with spikes (a localisation jump, a bump) a robot really took:
    # every k-th point kept, as the path was thinned before, drew none of them.
    rng = np.random.default_rng(3)
    db = tmp_path / "memory.db"
    with Memory(db, embedder=None) as mem:
        sid = mem.start_session()["session_id"]
        for c in range(300):
            x = c * 0.5 + np.cumsum(rng.normal(0.0, 0.01, 100))
            y = np.sin(np.arange(c * 100, c * 100 + 100) / 700.0) + rng.normal(0.0, 0.005, 100)
            if c % 37 == 5:
                y[int(rng.integers(1, 99))] += 25.0 if c % 2 else -25.0
            if c % 53 == 7:
                x[int(rng.integers(1, 99))] -= 40.0
            mem.save_perceptions([{"description": f"pose chunk {c}", "perception_type": "proprioceptive",
                                   "session_id": sid, "embed": False, "occurred_at": 1000.0 + c,
                                   "data": {"t0_ns": (1000 + c) * 10**9, "t": [0.01 * i for i in range(100)],
                                            "x": x.tolist(), "y": y.tolist()},
                                   "metadata": {"source": {"topic": "/odom"},
                                                "spatial": {"start_position": [x[0], y[0]],
                                                            "end_position": [x[-1], y[-1]], "frame": "map"}}}])
        (path,) = episode_detail(mem, sid)["paths"]
    t, x, y = _raw_points(db, sid)
    (times,), (drawn,) = path["times"], path["segments"]
    assert path["points"] == len(t) == 30_000 and path["decimated"] and len(drawn) <= MAX_PATH_POINTS
    at = {float(a): (float(b), float(c)) for a, b, c in zip(t, x, y)}
    assert all(at[time] == tuple(point) for time, point in zip(times, drawn))  # raw poses, none made up
    assert times == sorted(times) and times[0] == t[0] and times[-1] == t[-1]
    stretches = (MAX_PATH_POINTS - 2) // 4
    edges = np.linspace(0, len(t), stretches + 1).astype(int)
    kept_t = np.array(times)
    kept = np.array(drawn)
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (kept_t >= t[low]) & (kept_t <= t[high - 1])
        for axis, values in ((0, x), (1, y)):
            assert kept[inside, axis].min() == values[low:high].min()
            assert kept[inside, axis].max() == values[low:high].max()
    assert kept[:, 1].max() > 20 and kept[:, 1].min() < -20 and kept[:, 0].min() < -30  # the spikes are drawn
