"""The web view's episode list and episode page on a store with one very large episode.

Builds a store (embeddings off) with ``--episodes`` ordinary episodes of 40 records each and one
episode of ``--big`` perceptions (a force sample each), then times, over real HTTP against a
``robotmem ui`` process:

* ``/api/episodes`` (the list the page polls every few seconds),
* ``/api/episodes/{big}`` (opening the large episode: its first timeline page), and
* ``/api/episodes/{big}/timeline?page=1`` (the next page, fetched as the person scrolls),

and, in this process, what the list reads per episode now (``Memory.session_overviews``: a few
aggregate statements) against what it read before (``Memory.session_timeline``: every record of
every listed episode), the reference measured in the same run; the large episode's payloads read
by ``Memory.get_data_many`` against one ``get_data`` each (what the page did before); and its
records read narrow (``robotmem.store.outline.session_outline``, what the page reads now) against
in full (``Memory.session_timeline``, what it read before).

    python scripts/bench_web.py [--episodes 50] [--big 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from robotmem import Memory
from robotmem.store.outline import session_outline
from robotmem.view import episode_detail
from robotmem.view.episodes import OUTLINE_PATHS


def build(home: Path, episodes: int, big: int) -> tuple[list[str], str]:
    with Memory(home / "memory.db", embedder=None) as mem:
        sids = []
        for e in range(episodes):
            sid = mem.start_session(context={"task": {"name": f"pick {e}"}})["session_id"]
            mem.save_perceptions([{"description": f"grasp attempt {i} of episode {e}", "perception_type": "tactile",
                                   "data": {"fz": [float(i)] * 8}, "session_id": sid, "embed": False}
                                  for i in range(40)])
            mem.end_session(sid, outcome_score=0.5)
            sids.append(sid)
        sid = mem.start_session(context={"task": {"name": "long soak"}})["session_id"]
        for first in range(0, big, 2000):
            mem.save_perceptions([{"description": f"force sample {i}", "perception_type": "tactile",
                                   "data": {"fz": [float(i % 50)] * 8}, "session_id": sid, "embed": False}
                                  for i in range(first, min(big, first + 2000))])
        mem.end_session(sid, outcome_score=0.9)
        return [*sids, sid], sid


def read_outline(mem: Memory, session_id: str) -> list[dict[str, object]]:
    with mem.store.read() as conn:
        return session_outline(conn, session_id, OUTLINE_PATHS)


def median_ms(call: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def start_ui(home: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "robotmem.cli.main", "ui", "--port", "0"],
                               env={**os.environ, "ROBOTMEM_HOME": str(home), "ROBOTMEM_EMBEDDINGS": "off"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("robotmem ui: "):
            return process, line.split()[2]
    raise SystemExit("robotmem ui did not start: " + (process.stderr.read() if process.stderr else ""))


def fetch(url: str) -> int:
    with urllib.request.urlopen(url, timeout=600) as answer:
        return len(answer.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--big", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        start = time.perf_counter()
        sids, big = build(home, args.episodes, args.big)
        print(f"store: {args.episodes} episodes of 40 records and one of {args.big:,} "
              f"({time.perf_counter() - start:.1f} s to build)")
        with Memory(home / "memory.db", embedder=None) as mem:
            overviews = median_ms(lambda: mem.session_overviews(sids), args.rounds)
            timelines = median_ms(lambda: [mem.session_timeline(s) for s in sids], max(1, args.rounds // 2))
            ids = [m["id"] for m in mem.session_timeline(big)["memories"]]
            batched = median_ms(lambda: mem.get_data_many(ids), args.rounds)
            one_by_one = median_ms(lambda: [mem.get_data(i) for i in ids], max(1, args.rounds // 2))
            detail = median_ms(lambda: episode_detail(mem, big), max(1, args.rounds // 2))
            full = median_ms(lambda: mem.session_timeline(big), max(1, args.rounds // 2))
            narrow = median_ms(lambda: read_outline(mem, big), args.rounds)
        print(f"list reads, in process: session_overviews {overviews:.1f} ms; "
              f"every record of every episode (the reference, before) {timelines:.1f} ms")
        print(f"the big episode's {len(ids):,} payloads, in process: get_data_many {batched:.0f} ms; "
              f"one get_data each (the reference, before) {one_by_one:.0f} ms; the whole page's data "
              f"(episode_detail) {detail:.0f} ms")
        print(f"the big episode's records, in process: narrow (session_outline) {narrow:.0f} ms; "
              f"in full (session_timeline, the reference, before) {full:.0f} ms")
        process, url = start_ui(home)
        try:
            base = url.split("#")[0].rstrip("/")
            size = fetch(f"{base}/api/episodes")
            listed = median_ms(lambda: fetch(f"{base}/api/episodes"), args.rounds)
            page_size = fetch(f"{base}/api/episodes/{big}")
            page = median_ms(lambda: fetch(f"{base}/api/episodes/{big}"), max(1, args.rounds // 2))
            next_size = fetch(f"{base}/api/episodes/{big}/timeline?page=1")
            next_page = median_ms(lambda: fetch(f"{base}/api/episodes/{big}/timeline?page=1"), args.rounds)
        finally:
            process.terminate()
            process.wait(timeout=30)
        print(f"GET /api/episodes: p50 {listed:.1f} ms ({size / 1024:.0f} kB)")
        print(f"GET /api/episodes/<the {args.big:,}-record episode>: p50 {page:.0f} ms ({page_size / 1024:.0f} kB)")
        print(f"GET /api/episodes/<the same>/timeline?page=1: p50 {next_page:.0f} ms ({next_size / 1024:.0f} kB)")
        print(json.dumps({"overviews_ms": round(overviews, 1), "timelines_ms": round(timelines, 1),
                          "payloads_batched_ms": round(batched), "payloads_one_by_one_ms": round(one_by_one),
                          "detail_ms": round(detail), "outline_ms": round(narrow), "full_records_ms": round(full),
                          "list_ms": round(listed, 1), "page_ms": round(page), "page_kb": round(page_size / 1024),
                          "next_page_ms": round(next_page), "next_page_kb": round(next_size / 1024)}))


if __name__ == "__main__":
    main()
