"""scripts/bench_insert.py writes the same records either way it is asked to, and times them."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_insert as bench  # noqa: E402

from robotmem import Memory  # noqa: E402


def test_both_writers_store_the_same_records(tmp_path: Path) -> None:
    stores = {}
    for writer in ("save_perceptions", "bulk_writer"):
        db = tmp_path / f"{writer}.db"
        result = bench.run(ROOT, db, 3000, writer)
        assert result["records_per_s"] > 0 and result["learn_p50_ms"] > 0  # type: ignore[operator]
        with Memory(db, embedder=None) as mem:
            assert mem.stats()["perceptions"] == 3000
            stores[writer] = [mem.get(i)["content"] for i in (1, 1500, 3000)]
    assert stores["save_perceptions"] == stores["bulk_writer"]
