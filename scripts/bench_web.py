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

With ``--fleet N`` the store also holds N short episodes (one pose chunk each; more than the
list's 500 a page) and the list's last page is fetched by its cursor (``after=``) too; with
``--pose-chunks N`` one more episode of N pose chunks (10 poses each, 0.1 s apart, a spike now
and then), whose page (its path decimated to 2,000 points) is timed in process
(``episode_detail``) and over HTTP, with its timeline's lines from its middle (``at=``) and the
500 after those (``after=``).

    python scripts/bench_web.py [--episodes 50] [--big 20000] [--rounds 5] [--fleet 3000] [--pose-chunks 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import urllib.parse
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


def _pose(sid: str, at: float, xs: list[float], ys: list[float]) -> dict[str, object]:
    return {"description": "pose chunk", "perception_type": "proprioceptive", "session_id": sid, "embed": False,
            "occurred_at": at, "data": {"t0_ns": int(at * 1e9), "t": [0.1 * i for i in range(len(xs))], "x": xs, "y": ys},
            "metadata": {"source": {"topic": "/odom"},
                         "spatial": {"start_position": [xs[0], ys[0]], "end_position": [xs[-1], ys[-1]], "frame": "map"}}}


def build_fleet(home: Path, fleet: int, pose_chunks: int) -> str | None:
    """``fleet`` episodes of one pose chunk, and (``pose_chunks`` > 0) one of that many chunks."""
    rng = random.Random(7)
    with Memory(home / "memory.db", embedder=None) as mem:
        for e in range(fleet):
            sid = mem.start_session(context={"robot": {"id": f"bot{e % 7}"}, "task": {"name": f"pick {e}"}})["session_id"]
            mem.save_perceptions([_pose(sid, time.time(), [0.0, 1.0], [0.0, float(e % 5)])])
            mem.end_session(sid, outcome_score=0.5)
        if not pose_chunks:
            return None
        sid = mem.start_session(context={"robot": {"id": "soak"}, "task": {"name": "long"}})["session_id"]
        with mem.bulk_writer() as writer:
            for first in range(0, pose_chunks, 2000):
                batch = []
                for c in range(first, min(pose_chunks, first + 2000)):
                    xs = [c * 0.01 + i * 0.001 + rng.gauss(0, 0.01) for i in range(10)]
                    ys = [((c * 10 + i) % 1000) * 0.01 + (50.0 if rng.random() < 1e-4 else 0.0) for i in range(10)]
                    batch.append(_pose(sid, 1.79e9 + c, xs, ys))
                writer.save_perceptions(batch)
        return str(sid)


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


def fetch_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=600) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def last_list_page(base: str) -> str | None:
    """The query of the episode list's last page, followed by its cursors (None: one page only)."""
    query = None
    page = fetch_json(f"{base}/api/episodes")
    while page.get("next") is not None:
        query = "after=" + urllib.parse.quote(str(page["next"]))
        page = fetch_json(f"{base}/api/episodes?{query}")
    return query


def bench_fleet(base: str, pose_sid: str | None, pose_chunks: int, rounds: int, figures: dict[str, object]) -> None:
    last = last_list_page(base)
    if last is not None:
        figures["list_last_page_ms"] = round(median_ms(lambda: fetch(f"{base}/api/episodes?{last}"), rounds), 1)
        print(f"GET /api/episodes?after=<the last page's cursor>: p50 {figures['list_last_page_ms']} ms")
    if pose_sid is None:
        return
    page = f"{base}/api/episodes/{pose_sid}"
    figures["pose_page_kb"] = round(fetch(page) / 1024)
    figures["pose_page_ms"] = round(median_ms(lambda: fetch(page), max(1, rounds // 2)))
    print(f"GET /api/episodes/<the pose episode>: p50 {figures['pose_page_ms']} ms ({figures['pose_page_kb']} kB)")
    middle = f"at={1.79e9 + pose_chunks // 2:.0f}"  # the lines from the middle of the episode
    first = fetch_json(f"{page}/timeline?{middle}")
    figures["pose_timeline_ms"] = round(median_ms(lambda: fetch(f"{page}/timeline?{middle}"), rounds))
    print(f"GET /api/episodes/<the pose episode>/timeline?{middle} (its middle): p50 {figures['pose_timeline_ms']} ms")
    if first.get("timeline_next") is not None:
        after = "after=" + urllib.parse.quote(str(first["timeline_next"]))
        figures["pose_timeline_after_ms"] = round(median_ms(lambda: fetch(f"{page}/timeline?{after}"), rounds))
        print(f"GET /api/episodes/<the pose episode>/timeline?after=<cursor>: p50 {figures['pose_timeline_after_ms']} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--big", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fleet", type=int, default=0, help="short episodes to page the list through")
    parser.add_argument("--pose-chunks", type=int, default=0, help="chunks of one more pose episode")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        start = time.perf_counter()
        sids, big = build(home, args.episodes, args.big)
        print(f"store: {args.episodes} episodes of 40 records and one of {args.big:,} "
              f"({time.perf_counter() - start:.1f} s to build)")
        start = time.perf_counter()
        pose_sid = build_fleet(home, args.fleet, args.pose_chunks)
        figures: dict[str, object] = {}
        if args.fleet or pose_sid:
            print(f"and {args.fleet:,} episodes of one pose chunk, and one of {args.pose_chunks:,} pose chunks "
                  f"({time.perf_counter() - start:.1f} s to build)")
        if pose_sid is not None:
            with Memory(home / "memory.db", embedder=None) as mem:
                figures["pose_detail_ms"] = round(median_ms(lambda: episode_detail(mem, pose_sid), max(1, args.rounds // 2)))
            print(f"the {args.pose_chunks:,}-chunk pose episode's page data (episode_detail), in process: "
                  f"{figures['pose_detail_ms']} ms")
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
            bench_fleet(base, pose_sid, args.pose_chunks, args.rounds, figures)
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
                          "next_page_ms": round(next_page), "next_page_kb": round(next_size / 1024), **figures}))


if __name__ == "__main__":
    main()
