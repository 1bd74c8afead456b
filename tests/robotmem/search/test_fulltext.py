import pytest

from robotmem import Memory
from robotmem.search import fulltext, vectors
from robotmem.search.fulltext import plan_fulltext


def _fill(mem: Memory, count: int) -> list[int]:
    return mem.save_perceptions([{"description": f"the shelf sensor reading {i}"} for i in range(count)])


@pytest.mark.sqlite_only  # the FTS5 query plan; PostgreSQL scores every match (ts_rank)
def test_words_found_nearly_everywhere_are_left_out_when_rarer_words_exist(mem: Memory):
    _fill(mem, 2500)
    target = mem.learn("the gripper pad is worn")["memory_id"]
    conn = mem._db.connection()
    plan = plan_fulltext(conn, "the worn pad", allow_window=True)
    assert plan is not None and "the" in plan.dropped and set(plan.kept) == {"worn", "pad"}
    assert mem.recall("the worn pad")["results"][0]["id"] == target


@pytest.mark.sqlite_only  # the FTS5 query plan
def test_only_common_words_keep_the_rarest_and_window_only_with_vectors(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    _fill(mem, 2500)
    conn = mem._db.connection()
    assert plan_fulltext(conn, "the shelf", allow_window=True).min_rowid is None  # 2,500 matches: all scored
    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 1000)
    with_vectors = plan_fulltext(conn, "the shelf", allow_window=True)
    assert with_vectors is not None and len(with_vectors.kept) == 1 and with_vectors.min_rowid is not None
    text_only = plan_fulltext(conn, "the shelf", allow_window=False)
    assert text_only is not None and text_only.min_rowid is None


def test_a_common_word_query_without_vectors_still_finds_an_old_match(mem: Memory):
    ids = _fill(mem, 2500)
    result = mem.recall("shelf sensor", n=3, context_filter={"$or": [{"x": 1}, {"x": {"$exists": False}}]})
    assert result["count"] == 3
    oldest = mem.recall("reading 0", n=100)
    assert ids[0] in [h["id"] for h in oldest["results"]]


@pytest.mark.sqlite_only  # the FTS5 query plan
def test_the_rarest_words_within_the_posting_budget_are_ranked_together(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    mem.save_perceptions([{"description": f"bin {'valve ' if i < 300 else ''}{'dock ' if i < 40 else ''}lidar {i}"}
                          for i in range(1000)])
    conn = mem._db.connection()
    monkeypatch.setattr(fulltext, "COMMON_SHARE", 1.0)  # only the budget decides here
    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 400)
    plan = plan_fulltext(conn, "dock valve lidar", allow_window=True)
    # dock (40) + valve (300) fit in 400 postings; lidar (1,000) would not.
    assert plan is not None and plan.kept == ("dock", "valve") and plan.dropped == ("lidar",)
    assert plan.min_rowid is None
    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 30)
    plan = plan_fulltext(conn, "dock valve lidar", allow_window=True)
    assert plan is not None and plan.kept == ("dock",) and plan.min_rowid is not None


@pytest.mark.sqlite_only  # FTS5's vocabulary table
def test_document_counts_are_reused_until_the_store_moves_by_one_percent(mem: Memory):
    from robotmem.search.relevance import document_frequencies

    mem.save_perceptions([{"description": f"shelf sensor reading {i}"} for i in range(150)])
    assert document_frequencies(mem._db.connection(), ["shelf", "bin"]) == {"shelf": 150, "bin": 0}
    mem.save_perception("shelf bin reading extra")
    # One new memory of 151 is within 1 %: the counts are reused (151 // 100 = 1 row of slack).
    assert document_frequencies(mem._db.connection(), ["shelf"]) == {"shelf": 150}
    mem.save_perception("shelf bin reading more")
    assert document_frequencies(mem._db.connection(), ["shelf", "bin"]) == {"shelf": 152, "bin": 2}


@pytest.mark.sqlite_only
def test_a_small_store_recounts_after_any_change(mem: Memory):
    from robotmem.search.relevance import document_frequencies

    mem.save_perceptions([{"description": f"shelf sensor reading {i}"} for i in range(20)])
    assert document_frequencies(mem._db.connection(), ["shelf"]) == {"shelf": 20}
    mem.save_perception("shelf bin reading extra")
    assert document_frequencies(mem._db.connection(), ["shelf"]) == {"shelf": 21}


@pytest.mark.sqlite_only  # the FTS5 query plan
def test_a_window_without_enough_filtered_matches_scores_every_match(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    import time

    from robotmem.search.fulltext import fulltext_hits
    from robotmem.search.request import build_request

    ids = mem.save_perceptions([{"description": f"shelf sensor reading {i}", "metadata": {"i": i}}
                                for i in range(2500)])
    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 1000)
    monkeypatch.setattr(fulltext, "COMMON_WINDOW", 500)
    conn = mem._db.connection()
    plan = plan_fulltext(conn, "shelf", allow_window=True)
    assert plan is not None and plan.min_rowid is not None and plan.min_rowid > ids[10]
    # Only the oldest memories pass; none of them is among the newest matches the window holds.
    req = build_request(query="shelf", collection=mem.collection, n=5, min_confidence=0, session_id=None,
                        context_filter={"$or": [{"i": {"$lt": 3}}, {"none": {"$exists": True}}]},
                        spatial_sort=None, since=None, until=None)
    hits = fulltext_hits(conn, req, plan, time.time(), 30 * 86400.0, 5)
    assert sorted(hits) == ids[:3]


@pytest.mark.sqlite_only  # the FTS5 paging
def test_best_ranked_matches_that_cannot_be_returned_are_paged_past(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    """Without a filter the first page of matches is short (2k): when the best-ranked ones are
    forgotten, the next, larger pages still find exactly the eligible top k."""
    short = mem.save_perceptions([{"description": f"valve valve valve {i}"} for i in range(150)])
    mem.save_perceptions([{"description": f"the coolant valve on line {i} was checked and left open"}
                          for i in range(60)])
    for memory_id in short:
        mem.forget(memory_id, reason="test")
    paged = mem.recall("valve", n=10, min_relevance=0)["results"]
    monkeypatch.setattr(fulltext, "PAGE", 1000)  # one page holding every match: the reference
    whole = mem.recall("valve", n=10, min_relevance=0)["results"]
    assert len(paged) == 10 and not set(short) & {h["id"] for h in paged}
    assert [h["id"] for h in paged] == [h["id"] for h in whole]


@pytest.mark.sqlite_only  # the FTS5 paging; PostgreSQL ranks in one statement
def test_a_filter_asked_again_checks_a_first_page_sized_by_the_share_that_passed(mem: Memory, monkeypatch):
    # Checked on the best-ranked matches, as a broad filter is at scale (not from the leaf index).
    monkeypatch.setattr(vectors, "LEAF_CANDIDATE_CAP", 0)
    mem.save_perceptions([{"description": f"grasp note {i}", "metadata": {"task": {"ok": i % 10 != 0}}}
                          for i in range(600)])
    checked: list[int] = []
    real = fulltext.eligible_subset

    def counted(conn, req, ids, now, half_life_s):
        checked.append(len(ids))
        return real(conn, req, ids, now, half_life_s)

    monkeypatch.setattr(fulltext, "eligible_subset", counted)

    def ask(**restriction):
        return [h["id"] for h in mem.recall("grasp note", n=10, min_relevance=0, **restriction)["results"]]

    first = ask(context_filter={"task.ok": True})
    assert checked == [fulltext.PAGE_NARROWED * 50]  # k is the candidate pool, max(50, 4n)
    checked.clear()
    # 360 of 400 passed: 1.25 x 50 / 0.9 = 70 would do, and a page is never under PAGE x k.
    assert ask(context_filter={"task.ok": True}) == first
    assert checked == [fulltext.PAGE * 50]
    checked.clear()
    # Another filter has no share yet: it starts from the full first page, and passes a tenth.
    rare = ask(context_filter={"task.ok": False})
    assert checked[0] == fulltext.PAGE_NARROWED * 50 and len(rare) == 10
    checked.clear()
    assert ask(context_filter={"task.ok": False}) == rare
    assert checked[0] == fulltext.PAGE_NARROWED * 50  # 1.25 x 50 / 0.1 = 625: capped at the full page


def _bm25_along(conn, match: str, order: str, floor: int = 0) -> list[float]:
    """FTS5's own bm25() of each match at or above ``floor``, in the order ``order`` gives."""
    return [row[1] for row in conn.execute(
        f"SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ? "
        f"ORDER BY {order}", (match, floor))]


@pytest.mark.sqlite_only  # FTS5's auxiliary functions
def test_one_word_is_ranked_in_bm25_order_without_bm25(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    import random

    from robotmem.store.term_rank import TERM_RANK

    rng = random.Random(3)
    filler = ["bin", "arm", "cube", "wet", "door", "lidar", "torque", "camera"]
    # The word 1-4 times in texts of 2-30 words: BM25 weighs both, so a rank on either alone fails.
    ids = mem.save_perceptions([{"description": " ".join(
        ["shelf"] * rng.randint(1, 4) + rng.choices(filler, k=rng.randint(1, 26)))} for _ in range(3000)])
    conn = mem._db.connection()
    ours = _bm25_along(conn, '"shelf"', f"{TERM_RANK}(memories_fts)")
    assert len(ours) == 3000 and len(set(ours)) > 50
    assert ours == sorted(ours)  # bm25() never rises along our order: it is bm25()'s order
    window = _bm25_along(conn, '"shelf"', f"{TERM_RANK}(memories_fts)", floor=ids[-500])
    assert len(window) == 500 and window == sorted(window)

    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 1000)
    plan = plan_fulltext(conn, "shelf", allow_window=True)
    assert plan is not None and plan.min_rowid is not None and not plan.term_rank  # 3,000 matches: bm25() is cheaper
    assert fulltext._fts_only(plan)[0].endswith("ORDER BY rank")
    monkeypatch.setattr(fulltext, "TERM_RANK_FROM", 2000)
    plan = plan_fulltext(conn, "shelf", allow_window=True)
    assert plan is not None and plan.min_rowid is not None and plan.term_rank
    sql, params = fulltext._fts_only(plan)
    assert f"ORDER BY {TERM_RANK}(" in sql  # the window's rows only: bm25() would count all 3,000
    ranked = [row[0] for row in conn.execute(sql, params)]
    reference = {row[0]: row[1] for row in conn.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ?", params)}
    assert set(ranked) == set(reference)
    assert [reference[i] for i in ranked] == sorted(reference.values())


@pytest.mark.sqlite_only  # the FTS5 query plan
def test_a_compound_word_or_every_match_keeps_bm25(mem: Memory, monkeypatch: pytest.MonkeyPatch):
    mem.save_perceptions([{"description": f"grip_force on the shelf {i}"} for i in range(3000)])
    conn = mem._db.connection()
    monkeypatch.setattr(fulltext, "POSTING_BUDGET", 1000)
    monkeypatch.setattr(fulltext, "TERM_RANK_FROM", 2000)
    compound = plan_fulltext(conn, "grip_force", allow_window=True)  # two phrases, each with its own IDF
    assert compound is not None and compound.min_rowid is not None and not compound.term_rank
    assert plan_fulltext(conn, "shelf", allow_window=False).term_rank is False  # every match: bm25() is cheaper


@pytest.mark.sqlite_only  # FTS5's bm25() as the reference
def test_a_common_word_in_a_small_chosen_set_is_counted_in_its_rows_in_bm25_order(mem: Memory,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    import random

    import numpy as np

    rng = random.Random(5)
    filler = ["bin", "arm", "cube", "wet", "door", "lidar", "torque", "camera"]
    ids = mem.save_perceptions([{"description": " ".join(
        ["shelf"] * rng.randint(0, 4) + rng.choices(filler, k=rng.randint(2, 26))), "metadata": {"batch": i % 20}}
        for i in range(3000)])
    conn = mem._db.connection()
    chosen = np.asarray(ids[7::20], dtype=np.int64)  # 150 rows
    plan = plan_fulltext(conn, "shelf", allow_window=False)
    assert plan is not None and plan.postings > 2000
    reference = {row[0]: row[1] for row in conn.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
        "AND rowid IN (SELECT value FROM json_each(?))", ('"shelf"', str(chosen.tolist())))}
    ranked = fulltext._among_rows(conn, plan, str(chosen.tolist()), len(chosen))
    assert set(ranked) == set(reference) and 0 < len(ranked) < len(chosen)  # the rows without the word drop out
    assert [reference[m] for m in ranked] == sorted(reference.values())
    assert fulltext._among_rows(conn, plan, str(chosen.tolist()), 5) == ranked[:5]

    # Through recall: the same answers whichever way the set's matches are ranked.
    def answer() -> list[tuple[int, float]]:
        hits = mem.recall("shelf", n=10, context_filter={"batch": 7}, min_relevance=0)["results"]
        return [(h["id"], round(h["score"], 9)) for h in hits]

    monkeypatch.setattr(fulltext, "AMONG_ROWS_FROM", 10**9)
    walked = answer()
    monkeypatch.setattr(fulltext, "AMONG_ROWS_FROM", 1)
    calls: list[int] = []
    original = fulltext._among_rows
    monkeypatch.setattr(fulltext, "_among_rows", lambda *a: calls.append(1) or original(*a))
    assert answer() == walked and calls
