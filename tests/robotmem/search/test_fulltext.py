import pytest

from robotmem import Memory
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
def test_only_common_words_keep_the_rarest_and_window_only_with_vectors(mem: Memory):
    _fill(mem, 2500)
    conn = mem._db.connection()
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
