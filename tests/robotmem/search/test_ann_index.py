"""The persisted, memory-mapped vector index (search/ann_index.py) on real SQLite files and real faiss index files.

Stores here are small (hundreds of rows) with the size floor lowered, so the index path
runs in seconds; scripts/bench_recall.py measures it at 100,000 and 1,000,000.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from given_vectors import DIM, GivenVectors, vector_of

from robotmem import Memory, ValidationError
from robotmem.cli.commands import render_stats
from robotmem.cli.main import main as cli_main
from robotmem.search import ann_index, rebuild_process
from robotmem.search.ann_index import index_folder, newest_file
from robotmem.search.eligibility import Eligibility
from robotmem.search.recall import RecallEngine

HERE = Path(__file__).resolve().parent


def _fill(mem: Memory, count: int, collection: str | None = None, start: int = 0) -> list[int]:
    return mem.save_perceptions([
        {"description": f"c{i % 40} grasp note {i}", "metadata": {"task": {"slot": i % 30, "k": i}},
         **({"collection": collection} if collection else {})}
        for i in range(start, start + count)
    ])


def _exact_top(mem: Memory, q: np.ndarray, k: int, collection: str = "default") -> list[int]:
    conn = mem._db.connection()
    rows = conn.execute("SELECT e.memory_id, e.vector FROM embeddings e JOIN memories m ON m.id = e.memory_id "
                        "WHERE m.status = 'active' AND m.collection = ?", (collection,)).fetchall()
    ids = np.array([r[0] for r in rows])
    scores = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, DIM) @ q
    order = np.argsort(-scores)[:k]
    return [int(ids[i]) for i in order if scores[i] >= 0.2]


def _vector_ids(mem: Memory, q: np.ndarray, n: int = 10, **kwargs) -> list[int]:
    return [h["id"] for h in mem.recall("zzqxv", n=n, query_vector=q, min_relevance=0, **kwargs)["results"]]


@pytest.fixture
def built(db_path: Path):
    with Memory(db_path, embedder=GivenVectors()) as mem:
        _fill(mem, 1500)
        reports = mem.rebuild_vector_indexes(min_rows=0)
        assert reports and reports[0]["rows"] == 1500
    return db_path


def test_the_index_is_written_beside_the_store_and_answers_like_the_exact_scan(built: Path):
    folder = index_folder(built)
    assert folder is not None and len(list(folder.glob("*.faiss"))) == 1
    with Memory(built, embedder=GivenVectors()) as mem:
        agree = []
        for i in range(30):
            q = vector_of(f"c{i % 40} query {i}")
            expected = _exact_top(mem, q, 10)
            got = _vector_ids(mem, q)
            assert got[: len(expected)] and set(got) >= set(expected[:5])
            agree.append(len(set(got) & set(expected)) / max(1, len(expected)))
        assert np.mean(agree) >= 0.95
        assert mem.recall_engine._vectors.ann("default", "test-given/32", DIM) is not None


def _private_kb() -> int:
    return sum(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("RssAnon:"))


def _resident_through_mapping(path: Path) -> int:
    """Bytes of ``path`` resident through this process's mappings of it."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(head[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads this process's memory maps from /proc (Linux)")
def test_a_snapshot_is_searched_in_the_files_own_pages_not_copied(tmp_path: Path):
    """Several processes on one store share the page cache: a snapshot opened and searched across
    every list is resident through its file mapping, not copied into private memory."""
    import faiss

    dim, rows, nlist = 128, 300_000, 64
    data = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dim), dim, nlist, faiss.ScalarQuantizer.QT_4bit,
                                          faiss.METRIC_INNER_PRODUCT)
    index.train(data[:10_000])
    index.add_with_ids(data, np.arange(rows, dtype=np.int64))
    path = tmp_path / "snapshot.faiss"
    faiss.write_index(index, str(path))
    del index
    size = path.stat().st_size
    before = _private_kb()
    view = ann_index.open_snapshot(path)
    params = faiss.SearchParametersIVF()
    params.nprobe = nlist
    _, found = view.search(data[:4], 5, params=params)
    assert found[:, 0].tolist() != [-1] * 4
    assert _resident_through_mapping(path) >= 0.9 * size
    assert (_private_kb() - before) * 1024 < 0.25 * size


def test_a_query_far_from_every_list_probes_the_lists_about_as_near_as_the_nearest(built: Path):
    path, seq = newest_file(index_folder(built), "default", "test-given/32")
    ann = ann_index.AnnIndex(path, seq, "default", "test-given/32", DIM)
    base = 4
    with Memory(built, embedder=GivenVectors()) as mem:
        conn = mem._db.connection()
        stored = np.frombuffer(conn.execute("SELECT vector FROM embeddings LIMIT 1").fetchone()[0], dtype=np.float32)
    centroids = ann._view.quantizer.reconstruct_n(0, ann._view.nlist)
    # Between every list at once: the mean direction of the centroids.
    between = centroids.sum(axis=0) / np.linalg.norm(centroids.sum(axis=0))
    for query in (stored, between.astype(np.float32)):
        near = np.sort(centroids @ query)[::-1]
        expected = min(4 * base, max(base, int(np.count_nonzero(near >= near[0] - ann_index.LIST_MARGIN))))
        assert ann.lists_to_probe(query, base) == expected
    assert ann.lists_to_probe(stored, base) == base  # a stored vector sits near its own list
    assert ann.lists_to_probe(between.astype(np.float32), base) > base
    assert ann.lists_to_probe(between.astype(np.float32), ann._view.nlist) == ann._view.nlist


def test_the_first_probe_runs_beside_the_full_text_search_and_changes_nothing(built: Path, monkeypatch):
    threads: list[str] = []
    real_probe = ann_index.AnnIndex.probe

    def probe(self, query, fetch, nprobe):
        threads.append(threading.current_thread().name)
        return real_probe(self, query, fetch, nprobe)

    monkeypatch.setattr(ann_index.AnnIndex, "probe", probe)
    with Memory(built, embedder=GivenVectors()) as mem:
        asked = [(f"c{i} grasp note", vector_of(f"c{i} query {i}")) for i in range(10)]
        overlapped = [mem.recall(text, n=10, query_vector=q, min_relevance=0)["results"] for text, q in asked]
        assert len(threads) == 10 and all(name.startswith("robotmem-probe") for name in threads)
        threads.clear()
        monkeypatch.setattr(RecallEngine, "_probe_early", lambda *args: None)
        serial = [mem.recall(text, n=10, query_vector=q, min_relevance=0)["results"] for text, q in asked]
        assert threads == ["MainThread"] * 10

    def described(results):
        return [(h["id"], h["similarity"], h["relevance"]) for h in results]
    assert [described(r) for r in overlapped] == [described(r) for r in serial]
    assert all(len(r) == 10 for r in serial)


def test_recalls_from_many_threads_share_the_probe_workers_and_answer_as_alone(built: Path):
    from concurrent.futures import ThreadPoolExecutor

    asked = [(f"c{i % 40} grasp note", vector_of(f"c{i % 40} query {i}")) for i in range(24)]
    with Memory(built, embedder=GivenVectors()) as mem:
        def ask(item):
            text, q = item
            return [(h["id"], h["similarity"]) for h in
                    mem.recall(text, n=10, query_vector=q, min_relevance=0)["results"]]

        alone = [ask(item) for item in asked]
        with ThreadPoolExecutor(max_workers=6) as callers:
            together = list(callers.map(ask, asked))
    assert together == alone and all(len(r) == 10 for r in alone)


def test_similarities_reported_are_exact_float32_cosines(built: Path):
    with Memory(built, embedder=GivenVectors()) as mem:
        q = vector_of("c3 how hard to grip")
        for hit in mem.recall("zzqxv", n=10, query_vector=q, min_relevance=0)["results"]:
            stored = np.frombuffer(mem._db.connection().execute(
                "SELECT vector FROM embeddings WHERE memory_id = ?", (hit["id"],)).fetchone()[0], dtype=np.float32)
            assert hit["similarity"] == pytest.approx(float(stored @ q), abs=1e-4)


def test_writes_after_the_snapshot_are_found_and_forgotten_ones_are_not(built: Path):
    with Memory(built, embedder=GivenVectors()) as reader, Memory(built, embedder=GivenVectors()) as writer:
        target = vector_of("c7 grasp note 12")
        first = _vector_ids(reader, target, n=1)[0]
        writer.forget(first, reason="wrong")
        assert first not in _vector_ids(reader, target)
        new_id = writer.learn("c7 a brand new note")["memory_id"]
        assert _vector_ids(reader, vector_of("c7 a brand new note"), n=1) == [new_id]


def test_forget_in_another_process_is_seen_by_the_next_recall(built: Path):
    with Memory(built, embedder=GivenVectors()) as reader:
        q = vector_of("c11 grasp note 51")
        top = _vector_ids(reader, q, n=1)[0]
        code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); from given_vectors import GivenVectors; "
                f"from robotmem import Memory; m = Memory({str(built)!r}, embedder=GivenVectors()); "
                f"m.forget({top}, reason='bad'); m.close()")
        subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
        assert top not in _vector_ids(reader, q)


def test_reindex_publishes_a_newer_snapshot_only_when_stale(built: Path):
    folder = index_folder(built)
    with Memory(built, embedder=GivenVectors()) as mem:
        assert mem.rebuild_vector_indexes(min_rows=0) == []  # nothing changed
        before = newest_file(folder, "default", "test-given/32")
        _fill(mem, 100, start=5000)
        q = vector_of("c5 grasp note 5005")
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # from the overlay
        assert [r["rows"] for r in mem.rebuild_vector_indexes(min_rows=0)] == [1600]
        after = newest_file(folder, "default", "test-given/32")
        assert after is not None and before is not None and after[1] > before[1]
        assert len(list(folder.glob("*.faiss"))) == 1
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # from the new snapshot


def test_collections_stay_isolated(db_path: Path):
    with Memory(db_path, embedder=GivenVectors()) as mem:
        a = set(_fill(mem, 600, collection="arm-a"))
        b = set(_fill(mem, 600, collection="arm-b"))
        assert len(mem.rebuild_vector_indexes(min_rows=0)) == 2
        for i in range(10):
            q = vector_of(f"c{i} grasp note {i}")
            assert set(_vector_ids(mem, q, collection="arm-a")) <= a
            assert set(_vector_ids(mem, q, collection="arm-b")) <= b


def test_a_filter_leaving_30_rows_returns_those_30_ranked_by_exact_cosine(db_path: Path):
    with Memory(db_path, embedder=GivenVectors()) as mem:
        ids = _fill(mem, 900)
        mem.rebuild_vector_indexes(min_rows=0)
        slot = {m for i, m in enumerate(ids) if i % 30 == 4}
        q = vector_of("c4 grasp note 4")
        hits = mem.recall("zzqxv", n=30, min_confidence=0, min_relevance=0, query_vector=q,
                          context_filter={"task.slot": 4})["results"]
        assert {h["id"] for h in hits} == slot
        # Fewer rows than one answer holds: every one is scored with its cosine (a negative cosine
        # means nothing: those tie at the bottom).
        assert all(h["similarity"] is not None for h in hits)
        related = [h for h in hits if h["similarity"] > 0]
        assert related and [h["similarity"] for h in related] == sorted((h["similarity"] for h in related),
                                                                         reverse=True)


def test_a_killed_writer_leaves_the_index_consistent_with_the_rows(built: Path):
    writer = subprocess.Popen([sys.executable, str(HERE / "given_vectors.py"), str(built), "default", "3"],
                              stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert writer.stdout is not None
    for _ in range(3):  # a few committed batches, then kill it mid-write
        writer.stdout.readline()
    time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    with Memory(built, embedder=GivenVectors()) as mem:
        rows = mem._db.connection().execute(
            "SELECT m.id, m.content FROM memories m WHERE m.content LIKE 'c% writer 3 %'").fetchall()
        assert len(rows) >= 600 and len(rows) % 200 == 0  # whole batches only
        for memory_id, content in rows[::37]:
            assert _vector_ids(mem, vector_of(content), n=1) == [memory_id]
        mem.rebuild_vector_indexes(min_rows=0)
        for memory_id, content in rows[::41]:
            assert _vector_ids(mem, vector_of(content), n=1) == [memory_id]


def test_a_killed_reindex_leaves_the_previous_snapshot_in_use(built: Path):
    folder = index_folder(built)
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); from given_vectors import GivenVectors; "
            f"from robotmem import Memory; m = Memory({str(built)!r}, embedder=GivenVectors()); "
            "import robotmem.search.ann_index as a, os, signal; "
            "a.os.replace = lambda *x: os.kill(os.getpid(), signal.SIGKILL); "
            "m.learn('c1 one more'); m.rebuild_vector_indexes(min_rows=0)")
    done = subprocess.run([sys.executable, "-c", code], env=os.environ.copy())
    assert done.returncode == -signal.SIGKILL
    assert len(list(folder.glob("*.faiss"))) == 1 and list(folder.glob(".*.tmp"))
    with Memory(built, embedder=GivenVectors()) as mem:
        learned = mem._db.connection().execute("SELECT id FROM memories WHERE content = 'c1 one more'").fetchone()[0]
        assert _vector_ids(mem, vector_of("c1 one more"), n=1) == [learned]
        mem.rebuild_vector_indexes(min_rows=0)
        assert not list(folder.glob(".*.tmp"))  # the dead builder's leftovers are cleared


def test_a_repeated_query_is_embedded_once(db_path: Path):
    embedder = GivenVectors()
    with Memory(db_path, embedder=embedder) as mem:
        _fill(mem, 50)
        calls = embedder.calls
        for _ in range(5):
            mem.recall("c3 grasp note", n=3)
        assert embedder.calls == calls + 1


@pytest.mark.parametrize("bad", [[0.1] * (DIM - 1), [float("nan")] * DIM, [0.0] * DIM, "0.1,0.2", [[0.1] * DIM]])
def test_a_bad_query_vector_is_a_validation_error(db_path: Path, bad):
    with Memory(db_path, embedder=GivenVectors()) as mem:
        with pytest.raises(ValidationError) as info:
            mem.recall("grasp", query_vector=bad)
        assert info.value.field == "query_vector"


def test_a_query_vector_without_a_model_is_a_validation_error(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.recall("grasp", query_vector=[0.1] * DIM)
    assert info.value.field == "query_vector"


def test_the_reindex_command_names_the_vector_indexes_it_wrote():
    from robotmem.cli.commands import render_reindex

    lines = list(render_reindex({"reembedded": 0, "total": 0, "model_id": "m",
                                 "vector_indexes": [{"collection": "lab", "rows": 25000, "seconds": 3.25}]}))
    assert lines == ["embedded 0 of 0 memories with m", "vector index of lab: 25,000 vectors in 3.2 s"]


def test_a_filter_most_rows_fail_widens_the_search_to_the_exact_filtered_top(db_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """Every vector is near one centre, so the first proposals all clear the similarity floor
    and about 7 in 8 fail the filter: the index must propose more until k pass."""
    from robotmem.search import vectors

    monkeypatch.setattr(vectors, "LEAF_CANDIDATE_CAP", 0)  # the filter counts as broad: the index answers
    with Memory(db_path, embedder=GivenVectors()) as mem:
        ids = mem.save_perceptions([{"description": f"c1 grasp note {i}", "metadata": {"task": {"slot": i % 30}}}
                                    for i in range(1500)])
        mem.rebuild_vector_indexes(min_rows=0)
        slot = {m: i % 30 for i, m in enumerate(ids)}
        for i in range(5):
            q = vector_of(f"c1 query {i}")
            passing = [m for m in _exact_top(mem, q, 1500) if slot[m] in (0, 1, 2, 3)]
            got = _vector_ids(mem, q, context_filter={"task.slot": {"$in": [0, 1, 2, 3]}})
            assert len(got) == 10 and all(slot[m] in (0, 1, 2, 3) for m in got)
            assert len(set(got) & set(passing[:10])) >= 9
            # The index itself, asked for 50 of the rows that pass: the first 216 proposals hold
            # about 29; only widening finds 50, and they are the exact filtered top 50.
            ann = mem.recall_engine._vectors.ann("default", "test-given/32", DIM)
            assert ann is not None
            conn = mem._db.connection()
            hits = ann.search(conn, q, 50, Eligibility(now=mem.now(), half_life_s=1e9, min_confidence=0.0,
                                                       include_archived=False),
                              lambda found: {m for m in found if slot[m] in (0, 1, 2, 3)}, 0.2)
            assert hits is not None and len(hits) == 50
            assert len({m for m, _ in hits} & set(passing[:50])) >= 48


def test_a_few_hits_under_a_filter_come_from_the_first_probe(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Nearest-first's 4 anchors under a filter a seventh of the rows pass: the first probe
    proposes at least MIN_FETCH rows (listing them costs what 32 would), so it holds 4 that
    pass, instead of widening to three times the lists."""
    with Memory(db_path, embedder=GivenVectors()) as mem:
        ids = mem.save_perceptions([{"description": f"c1 grasp note {i}", "metadata": {"task": {"slot": i % 30}}}
                                    for i in range(1500)])
        mem.rebuild_vector_indexes(min_rows=0)
        slot = {m: i % 30 for i, m in enumerate(ids)}
        ann = mem.recall_engine._vectors.ann("default", "test-given/32", DIM)
        assert ann is not None and ann.first_probe(4)[0] == ann_index.MIN_FETCH and ann.first_probe(50)[0] == 216
        probes: list[int] = []
        real_probe = ann_index.AnnIndex.probe

        def probe(self, query, fetch, nprobe):
            probes.append(fetch)
            return real_probe(self, query, fetch, nprobe)

        monkeypatch.setattr(ann_index.AnnIndex, "probe", probe)
        rules = Eligibility(now=mem.now(), half_life_s=1e9, min_confidence=0.0, include_archived=False)
        for i in range(10):
            q = vector_of(f"c1 query {i}")
            hits = ann.search(mem._db.connection(), q, 4, rules,
                              lambda found: {m for m in found if slot[m] in (0, 1, 2, 3)}, 0.2)
            passing = [m for m in _exact_top(mem, q, 1500) if slot[m] in (0, 1, 2, 3)]
            assert hits is not None and len(hits) == 4 and all(slot[m] in (0, 1, 2, 3) for m, _ in hits)
            assert len({m for m, _ in hits} & set(passing[:4])) >= 3  # 4-bit codes of one cluster nearly tie
        assert probes == [ann_index.MIN_FETCH] * 10


def test_the_search_widens_by_the_share_that_passed():
    from robotmem.search.ann_index import _growth

    assert _growth(50, 27, 216, 216) == 3  # 12.5 % pass: about 650 proposals hold 50
    assert _growth(50, 0, 216, 216) == 8
    assert _growth(50, 49, 60, 216) == 2


def test_eligibility_is_read_only_as_far_down_the_ranking_as_k_hits_need():
    judged: list[list[int]] = []

    def eligible_if(rule):
        def check(ids):
            judged.append(list(ids))
            return {m for m in ids if rule(m)}
        return check

    ranked = list(range(216))
    verdicts: dict[int, bool] = {}
    assert ann_index._passing_best_first(ranked, verdicts, eligible_if(lambda m: True), 50) == ranked[:63]
    assert judged == [ranked[:63]]  # a quarter to spare, not all 216 candidates
    judged.clear()
    every_third = ann_index._passing_best_first(ranked, {}, eligible_if(lambda m: m % 3 == 0), 50)
    assert every_third == [m for m in ranked if m % 3 == 0]  # 72: all that pass among those judged
    assert [len(j) for j in judged] == [63, 63, 90]  # twice as far each time, each id once
    judged.clear()
    few = ann_index._passing_best_first(ranked, {}, eligible_if(lambda m: m < 5), 50)
    assert few == [0, 1, 2, 3, 4] and sum(len(j) for j in judged) == 216  # short only when all were judged


def _snapshot(mem: Memory):
    return mem.recall_engine._vectors.ann("default", GivenVectors.model_id, DIM)


def test_a_stale_snapshot_is_rebuilt_in_the_background_and_then_used(built: Path, monkeypatch):
    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)  # this small index's rebuild point
    folder = index_folder(built)
    before = newest_file(folder, "default", GivenVectors.model_id)
    with Memory(built, embedder=GivenVectors()) as mem:
        _fill(mem, 300, start=5000)  # 300 changes: under STALE_ROWS, no rebuild
        q = vector_of("c5 grasp note 5005")
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        mem.recall_engine._vectors.join_builds()
        assert newest_file(folder, "default", GivenVectors.model_id) == before
        _fill(mem, 200, start=6000)  # 500 changes: over it
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # answered, and a rebuild started
        mem.recall_engine._vectors.join_builds()
        after = newest_file(folder, "default", GivenVectors.model_id)
        assert after is not None and before is not None and after[1] > before[1]
        assert len(list(folder.glob("*.faiss"))) == 1
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        snapshot = _snapshot(mem)
        assert snapshot.seq == after[1] and len(snapshot) == 2000 and snapshot.overlay.changes_seen == 0


def test_a_rebuild_under_way_in_another_process_is_not_repeated(built: Path, monkeypatch):
    from robotmem.search.ann_index import _key

    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)

    folder = index_folder(built)
    before = newest_file(folder, "default", GivenVectors.model_id)
    lock = folder / f".{_key('default', GivenVectors.model_id)}.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import fcntl, sys; f = open({str(lock)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
                               "print('locked', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with Memory(built, embedder=GivenVectors()) as mem:
            _fill(mem, 500, start=5000)
            q = vector_of("c5 grasp note 5005")
            assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
            mem.recall_engine._vectors.join_builds()
            assert newest_file(folder, "default", GivenVectors.model_id) == before  # the other builder's turn
            holder.stdin.close()
            holder.wait()
            assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
            mem.recall_engine._vectors.join_builds()
            after = newest_file(folder, "default", GivenVectors.model_id)
            assert after is not None and before is not None and after[1] > before[1]
    finally:
        holder.kill()
        holder.wait()


def test_a_rebuild_started_by_a_short_lived_process_finishes_after_it_exits(built: Path):
    """A CLI recall exits in a tenth of a second; the rebuild it starts must not die with it."""
    folder = index_folder(built)
    before = newest_file(folder, "default", GivenVectors.model_id)
    with Memory(built, embedder=GivenVectors()) as mem:
        _fill(mem, 500, start=5000)
    # one recall that notices the stale snapshot, then an exit at once (os._exit: no orderly shutdown)
    code = (f"import os, sys; sys.path.insert(0, {str(HERE)!r}); from given_vectors import GivenVectors, vector_of; "
            "from robotmem import Memory; from robotmem.search import ann_index; ann_index.STALE_ROWS = 400; "
            f"m = Memory({str(built)!r}, embedder=GivenVectors()); "
            "m.recall('zzqxv', query_vector=vector_of('c5 grasp note 5005'), min_relevance=0); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
    deadline = time.monotonic() + 120  # a liveness bound, not a speed target: this build takes about a second
    while time.monotonic() < deadline:
        after = newest_file(folder, "default", GivenVectors.model_id)
        if after is not None and before is not None and after[1] > before[1] and not ann_index.building(
                folder, "default", GivenVectors.model_id):
            break
        time.sleep(0.1)
    assert after is not None and before is not None and after[1] > before[1]
    assert "rebuilt the vector index of default: 2000 rows" in (folder / "rebuild.log").read_text()
    with Memory(built, embedder=GivenVectors()) as mem:
        snapshot = _snapshot(mem)
        assert snapshot is not None and snapshot.seq == after[1] and len(snapshot) == 2000


def test_a_control_loop_on_a_stale_snapshot_starts_one_rebuild(built: Path, monkeypatch):
    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)
    started: list[tuple[str, ...]] = []
    real_start = rebuild_process.start

    def counted(*args):
        started.append(args)
        return real_start(*args)

    monkeypatch.setattr(rebuild_process, "start", counted)
    with Memory(built, embedder=GivenVectors()) as mem:
        _fill(mem, 500, start=5000)
        q = vector_of("c5 grasp note 5005")
        for _ in range(20):  # every cycle notices the stale snapshot while the first rebuild runs
            assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        mem.recall_engine._vectors.join_builds()
        assert len(started) == 1
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        assert _snapshot(mem).overlay.changes_seen == 0  # the new snapshot is in use, nothing more to start
        assert len(started) == 1


def test_stats_says_how_far_behind_each_snapshot_is_and_whether_it_is_being_rebuilt(built: Path, monkeypatch, capsys):
    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)
    folder = index_folder(built)
    seq = newest_file(folder, "default", GivenVectors.model_id)[1]
    with Memory(built, embedder=GivenVectors()) as mem:
        state = {"collection": "default", "model_id": GivenVectors.model_id, "kind": "snapshot", "vectors": 1500,
                 "built": True, "snapshot_seq": seq, "changes_since": 0, "stale": False, "building": False}
        assert mem.stats()["vector_indexes"] == [state]
        _fill(mem, 500, start=5000)
        assert mem.stats()["vector_indexes"] == [{**state, "vectors": 2000, "changes_since": 500, "stale": True}]
        with open(ann_index.build_lock(folder, "default", GivenVectors.model_id), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # as a builder holds it
            assert mem.stats()["vector_indexes"][0]["building"] is True
            assert mem.stats(collection="elsewhere")["vector_indexes"] == []
    capsys.readouterr()
    assert cli_main(["--db", str(built), "stats"]) == 0
    assert (f"vector index of default ({GivenVectors.model_id}, 2,000 vectors): 500 changes since it was written, "
            "stale") in capsys.readouterr().out


def test_a_collection_that_outgrows_the_exact_scan_gets_its_first_snapshot(db_path: Path, monkeypatch):
    monkeypatch.setattr(ann_index, "MIN_ROWS", 1000)
    with Memory(db_path, embedder=GivenVectors()) as mem:
        _fill(mem, 900)
        q = vector_of("c5 grasp note 505")
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # 900 vectors: the exact scan, nothing more
        mem.recall_engine._vectors.join_builds()
        assert mem.stats()["vector_indexes"] == []
        _fill(mem, 200, start=900)
        assert mem.stats()["vector_indexes"][0]["snapshot_seq"] is None
        assert (f"vector index of default ({GivenVectors.model_id}, 1,100 vectors): none yet, recall scans exactly"
                in "\n".join(render_stats(mem.stats())))
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # 1,100: answered exactly, and a build started
        mem.recall_engine._vectors.join_builds()
        assert mem.stats()["vector_indexes"][0]["stale"] is False
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        assert _snapshot(mem) is not None and len(_snapshot(mem)) == 1100
        assert mem.recall_engine._vectors._mirrors == {}  # the float32 copy is let go once the snapshot serves


def test_a_finished_builder_is_reaped_when_its_snapshot_is_opened(built: Path, monkeypatch):
    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)
    folder = index_folder(built)
    before = newest_file(folder, "default", GivenVectors.model_id)
    with Memory(built, embedder=GivenVectors()) as mem:
        _fill(mem, 500, start=5000)
        q = vector_of("c5 grasp note 5005")
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        vectors = mem.recall_engine._vectors
        (build,) = vectors._builds.values()
        assert build.process.wait(timeout=120) == 0  # a liveness bound: this build takes about a second
        assert newest_file(folder, "default", GivenVectors.model_id)[1] > before[1]
        assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]  # opens the new snapshot
        assert vectors._builds == {}  # the finished builder is let go (polled first, so it leaves no zombie)


def test_a_rebuild_that_cannot_start_is_tried_once_a_minute_and_recall_stays_exact(built: Path, monkeypatch, caplog):
    monkeypatch.setattr(ann_index, "STALE_ROWS", 400)
    attempts: list[tuple[str, ...]] = []

    def no_fork(*args):
        attempts.append(args)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(rebuild_process, "start", no_fork)
    with Memory(built, embedder=GivenVectors()) as mem:
        _fill(mem, 500, start=5000)
        q = vector_of("c5 grasp note 5005")
        for _ in range(20):
            assert _vector_ids(mem, q, n=1) == [_exact_top(mem, q, 1)[0]]
        assert len(attempts) == 1
        assert sum("cannot start rebuilding the vector index of default" in r.message for r in caplog.records) == 1


def test_the_builder_holds_the_lock_from_the_moment_it_is_started(built: Path):
    """Several processes notice a stale snapshot within one control cycle: one builder, no window."""
    folder = index_folder(built)
    seq = newest_file(folder, "default", GivenVectors.model_id)[1]
    first = rebuild_process.start(built, "default", GivenVectors.model_id, DIM, seq)
    assert first is not None
    assert ann_index.building(folder, "default", GivenVectors.model_id)  # before the child ran a line
    assert rebuild_process.start(built, "default", GivenVectors.model_id, DIM, seq) is None
    assert first.wait(timeout=120) == 0
    assert not ann_index.building(folder, "default", GivenVectors.model_id)
    assert newest_file(folder, "default", GivenVectors.model_id)[1] >= seq
    assert "rebuilt the vector index of default: 1500 rows" in (folder / "rebuild.log").read_text()


def test_the_builder_runs_below_the_priority_of_the_process_that_started_it(built: Path):
    """On two cores the build's k-means would otherwise take the CPU from the control loop's recalls."""
    seq = newest_file(index_folder(built), "default", GivenVectors.model_id)[1]
    child = rebuild_process.start(built, "default", GivenVectors.model_id, DIM, seq)
    assert child is not None
    try:  # read while the child is still importing (half a second); its later threads inherit it
        niceness = os.getpriority(os.PRIO_PROCESS, child.pid)
    finally:
        assert child.wait(timeout=120) == 0
    assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + rebuild_process.NICENESS) > 0


def test_a_failed_rebuild_is_logged_beside_the_snapshots_and_the_old_one_stays(built: Path, monkeypatch):
    folder = index_folder(built)
    before = newest_file(folder, "default", GivenVectors.model_id)
    child = rebuild_process.start(built, "default", GivenVectors.model_id, DIM + 1, before[1])  # no vector has it
    assert child is not None and child.wait() == 1
    assert "rebuilding the vector index of default failed" in (folder / "rebuild.log").read_text()
    assert newest_file(folder, "default", GivenVectors.model_id) == before
    # a store that keeps failing logs a traceback a minute: the log starts afresh past its bound
    monkeypatch.setattr(rebuild_process, "LOG_MAX_BYTES", 100)
    child = rebuild_process.start(built, "default", GivenVectors.model_id, DIM + 1, before[1])
    assert child is not None and child.wait() == 1
    failure = "rebuilding the vector index of default failed"
    assert (folder / "rebuild.log.1").read_text().count(failure) == 1
    assert (folder / "rebuild.log").read_text().count(failure) == 1
