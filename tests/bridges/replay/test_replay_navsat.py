"""NavSatFix is stored as a geographic track: start/end latitude, longitude, altitude."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from recordings import Msg, S, navsat_fix, write_mcap

from bridges.pipeline import BridgeConfig
from bridges.replay import ReplayOptions, replay_recording
from robotmem import Memory

T0 = 1432166400 * S
FIX = "sensor_msgs/msg/NavSatFix"
METRES_PER_DEGREE_LAT = 111_195.0  # mean Earth radius: 6371.0088 km * pi / 180


def test_a_gps_fix_stream_is_a_geographic_track(tmp_path: Path, memory: Memory) -> None:
    messages = []
    for i in range(60):  # 12 s at 5 Hz, due north at 1 m/s, climbing 0.1 m/s
        t = i / 5
        lat = 48.0 + t / METRES_PER_DEGREE_LAT
        status = -1 if i in (7, 8, 9) else 0  # three messages without a fix
        messages.append(Msg("/gps/fix", FIX, T0 + i * S // 5,
                            navsat_fix(T0 + i * S // 5, lat if status == 0 else math.nan, 11.5, 500 + 0.1 * t, status)))
    result = replay_recording(memory, write_mcap(tmp_path / "gps.mcap", messages), BridgeConfig(), ReplayOptions())
    (session,) = result.stats.session_ids
    chunks = sorted((m for m in memory.session_timeline(session)["memories"]
                     if m["context"]["source"].get("topic") == "/gps/fix"), key=lambda m: m["occurred_at"])
    assert len(chunks) == 2
    first, last = chunks[0]["context"]["geo"], chunks[-1]["context"]["geo"]
    assert first["start"] == pytest.approx({"latitude": 48.0, "longitude": 11.5, "altitude": 500.0})
    assert last["end"]["latitude"] == pytest.approx(48.0 + 11.8 / METRES_PER_DEGREE_LAT, abs=1e-9)
    assert last["end"]["altitude"] == pytest.approx(501.18)
    assert sum(c["context"]["geo"]["fixes"] for c in chunks) == 57
    # the step across the missing fixes is part of the walk here (no gap: 0.8 s < 1 s)
    assert sum(c["context"]["geo"]["distance_m"] for c in chunks) == pytest.approx(11.8, rel=1e-3)
    assert chunks[0]["context"]["spatial"] == {"position": [pytest.approx(v) for v in
                                                            chunks[0]["context"]["spatial"]["position"]],
                                               "frame": "wgs84"}
