import math
from pathlib import Path

import numpy as np
import pytest

from robotmem.search.relevance import (MatchFeatures, calibrated, fit_for, match_features, match_score, narrowness,
                                      query_terms, relevance)
from robotmem.store.backend import as_vector_bytes, dialect_of
from robotmem import Memory, NotFoundError, ValidationError
from robotmem.models import DEFAULT_MIN_RELEVANCE


def _ids(result: dict) -> list[int]:
    return [hit["id"] for hit in result["results"]]


def test_recall_without_embedder_runs_bm25_only_and_says_so(mem: Memory):
    mid = mem.learn("grip_force=12.5N worked on the wet bottle")["memory_id"]
    result = mem.recall("12.5N")
    assert result["mode"] == "bm25_only" and _ids(result) == [mid]


@pytest.mark.parametrize("query", ["12.5N", "12.5", "grip_force", "grip force", "0.05m", "bouteille mouillée"])
def test_full_text_finds_measurements_parameters_and_accents(mem: Memory, query):
    target = mem.learn("grip_force=12.5N at 0.05m clearance on the bouteille mouillee")["memory_id"]
    mem.learn("the camera exposure was too low")
    assert _ids(mem.recall(query))[:1] == [target]


@pytest.mark.parametrize("query", ["玻璃瓶", "滑った", "グリッパー"])
def test_full_text_finds_chinese_and_japanese_substrings(mem: Memory, query):
    zh = mem.learn("机器人抓取玻璃瓶时打滑了")["memory_id"]
    ja = mem.learn("グリッパーが濡れたボトルで滑った")["memory_id"]
    expected = zh if query == "玻璃瓶" else ja
    assert _ids(mem.recall(query))[0] == expected


@pytest.mark.parametrize("query", ['"', "AND OR NOT", "(((", "*", "a:b", "NEAR(x y)", "-", "😀", "'; DROP TABLE memories;--"])
def test_queries_with_punctuation_never_raise(mem: Memory, query):
    mem.learn("something to find")
    result = mem.recall(query)
    assert result["mode"] in ("bm25_only", "vector_only", "hybrid")
    assert mem.stats()["memories"] == 1


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n": 0}, "n"), ({"n": 101}, "n"), ({"n": "5"}, "n"),
        ({"min_confidence": -0.1}, "min_confidence"), ({"min_confidence": 1.5}, "min_confidence"),
        ({"since": "yesterday"}, "since"), ({"since": 10, "until": 5}, "since"),
        ({"spatial_sort": {"field": "spatial.p", "target": [1]}}, "spatial_sort.target"),
        ({"spatial_sort": {"target": [1, 2]}}, "spatial_sort.field"),
        ({"spatial_sort": {"field": "spatial.p", "target": [1, 2], "max_distance": -1}}, "spatial_sort.max_distance"),
        ({"session_id": "bad id!"}, "session_id"),
        ({"collection": "has space"}, "collection"),
    ],
)
def test_recall_rejects_bad_parameters_naming_the_field(mem: Memory, kwargs, field):
    with pytest.raises(ValidationError) as info:
        mem.recall("anything", **kwargs)
    assert info.value.field == field


def test_empty_query_needs_a_filter_or_spatial_sort(mem: Memory):
    with pytest.raises(ValidationError) as info:
        mem.recall("")
    assert info.value.field == "query"


def test_empty_query_with_filter_lists_matches_newest_first(mem: Memory, clock):
    old = mem.learn("pick ok", {"task": {"success": True}})["memory_id"]
    clock.advance(10)
    mem.learn("pick failed", {"task": {"success": False}})
    clock.advance(10)
    new = mem.learn("place ok", {"task": {"success": True}})["memory_id"]
    result = mem.recall("", context_filter={"task.success": True})
    assert result["mode"] == "filter_only" and _ids(result) == [new, old]


def test_hits_lift_context_sections_and_carry_the_documented_fields(mem: Memory):
    mem.learn("arm 1 drops screws", {"params": {"speed": 0.3}, "robot": {"id": "arm-1"}, "other": 1})
    hit = mem.recall("screws")["results"][0]
    for key in ("id", "content", "type", "perception_type", "session_id", "collection", "confidence",
                "created_at", "context", "params", "spatial", "robot", "task", "score"):
        assert key in hit
    assert hit["params"] == {"speed": 0.3} and hit["spatial"] == {} and hit["context"]["other"] == 1


def test_spatial_sort_orders_every_filtered_memory_nearest_first(mem: Memory):
    far = mem.learn("bin A emptied", {"spatial": {"p": [10, 0, 0]}})["memory_id"]
    near = mem.learn("dock sensor dirty", {"spatial": {"p": [1, 0, 0]}})["memory_id"]
    dict_point = mem.learn("door jammed", {"spatial": {"p": {"x": 2, "y": 0, "z": 0}}})["memory_id"]
    nowhere = mem.learn("battery swapped")["memory_id"]
    result = mem.recall("", spatial_sort={"field": "spatial.p", "target": [0, 0, 0]}, n=10)
    assert _ids(result) == [near, dict_point, far, nowhere]
    assert [round(h["distance"], 6) if h["distance"] is not None else None for h in result["results"]] == [1, 2, 10, None]
    bounded = mem.recall("", spatial_sort={"field": "spatial.p", "target": [0, 0, 0], "max_distance": 3}, n=10)
    assert _ids(bounded) == [near, dict_point]


def test_spatial_sort_ranks_beyond_the_text_hits(mem: Memory):
    """The nearest memory does not mention the query words: it still comes first."""
    mem.learn("the cup was far away", {"spatial": {"p": [50, 50]}})
    silent = mem.learn("nothing textual in common", {"spatial": {"p": [0.5, 0.5]}})["memory_id"]
    result = mem.recall("cup", spatial_sort={"field": "spatial.p", "target": [0, 0]})
    assert _ids(result)[0] == silent


def test_time_window_narrows_to_when_things_happened(mem: Memory, clock):
    early = mem.learn("morning calibration drifted")["memory_id"]
    t_mid = clock.now + 50
    clock.advance(100)
    late = mem.learn("evening calibration drifted")["memory_id"]
    assert _ids(mem.recall("calibration", since=t_mid)) == [late]
    assert _ids(mem.recall("calibration", until=t_mid)) == [early]
    iso = __import__("datetime").datetime.fromtimestamp(t_mid, __import__("datetime").timezone.utc).isoformat()
    assert _ids(mem.recall("calibration", since=iso)) == [late]


def test_collections_are_isolated(mem: Memory):
    a = mem.learn("conveyor belt slips", collection="line-a")["memory_id"]
    mem.learn("conveyor belt slips too", collection="line-b")
    assert _ids(mem.recall("conveyor", collection="line-a")) == [a]


def test_session_id_restricts_recall_to_one_episode(mem: Memory):
    s1 = mem.start_session()["session_id"]
    s2 = mem.start_session()["session_id"]
    a = mem.learn("valve sticks", session_id=s1)["memory_id"]
    mem.learn("valve sticks again", session_id=s2)
    assert _ids(mem.recall("valve", session_id=s1)) == [a]


def test_an_unknown_session_id_is_not_found_not_an_empty_answer(mem: Memory):
    # A mistyped id in a control loop must not read as "this episode remembers nothing".
    mem.learn("valve sticks", session_id=mem.start_session()["session_id"])
    with pytest.raises(NotFoundError) as info:
        mem.recall("valve", session_id="ses_doesnotexist")
    assert info.value.field == "session_id"


def test_recall_of_a_session_searches_its_collection(mem: Memory):
    sid = mem.start_session(collection="kitchen")["session_id"]
    mid = mem.learn("valve sticks when cold", session_id=sid)["memory_id"]
    assert _ids(mem.recall("valve", session_id=sid)) == [mid]  # not the default collection's nothing
    with pytest.raises(ValidationError) as info:
        mem.recall("valve", session_id=sid, collection="garage")
    assert info.value.field == "collection"


def test_min_confidence_filters_on_decayed_confidence(mem: Memory, clock):
    mid = mem.learn("wheel encoder glitch")["memory_id"]
    assert _ids(mem.recall("encoder")) == [mid]
    clock.advance(30 * 86_400 * 2)  # two half-lives: 0.8 -> 0.2
    assert _ids(mem.recall("encoder")) == []
    hit = mem.recall("encoder", min_confidence=0.1)["results"][0]
    assert hit["confidence"] == pytest.approx(0.2, rel=1e-6)


def test_hybrid_recall_uses_vectors_and_says_so(hybrid_mem: Memory):
    slip = hybrid_mem.learn("the gripper slipped on the wet glass bottle")["memory_id"]
    hybrid_mem.learn("the battery charger LED blinks red")
    # Found by meaning alone, below the default min_relevance (docs/recall.md): ask for every hit.
    result = hybrid_mem.recall("grasp failed on a slippery object", min_relevance=0)
    assert result["mode"] == "hybrid" and _ids(result)[0] == slip


def test_vector_search_is_isolated_per_collection(hybrid_mem: Memory):
    """A small collection next to a large one still gets its own vector hits."""
    hybrid_mem.save_perceptions([
        {"description": f"routine log line {i} about the warehouse shelf", "collection": "big"} for i in range(300)
    ])
    small = hybrid_mem.learn("the gripper slipped on the wet glass bottle", collection="small")["memory_id"]
    result = hybrid_mem.recall("grasp failed on a slippery object", collection="small", min_relevance=0)
    assert _ids(result) == [small]


def _narrow_store(mem: Memory) -> int:
    """120 memories of arm-1 and three of arm-2, one of which answers "what went wrong when grasping"."""
    mem.save_perceptions([{"description": f"arm-1 log {i}: moved tray {i % 9} to shelf {i % 5}",
                           "metadata": {"robot": {"id": "arm-1"}, "task": {"slot": i % 40}}} for i in range(120)])
    mem.learn("arm-2 calibrated its wrist camera against the checkerboard", {"robot": {"id": "arm-2"}})
    mem.learn("arm-2 parked overnight in bay 4", {"robot": {"id": "arm-2"}})
    return mem.learn("The Panda cracked a thin glass beaker with grip force 15 N; keep below 14 N for glassware.",
                     {"robot": {"id": "arm-2"}, "task": {"slot": 99}})["memory_id"]


def _relevance_of(result: dict, memory_id: int) -> float:
    return next(hit["relevance"] for hit in result["results"] if hit["id"] == memory_id)


@pytest.mark.parametrize("narrowing", [{"robot.id": "arm-2"},  # the leaf index finds the rows
                                       {"robot.id": {"$ne": "arm-1"}}])  # it cannot: they are counted
def test_a_filter_that_leaves_few_memories_is_evidence_that_they_are_asked_about(hybrid_mem: Memory, narrowing):
    """A vague question about three memories the caller picked out: relevance counts the pick
    (robotmem.search.relevance.narrowness), by the same amount whichever way the rows are found."""
    target = _narrow_store(hybrid_mem)
    question = "what went wrong when grasping"
    alone = _relevance_of(hybrid_mem.recall(question, min_relevance=0, n=20), target)
    narrowed = hybrid_mem.recall(question, context_filter=narrowing, min_relevance=0)
    assert len(narrowed["results"]) == 3
    expected = calibrated_with(hybrid_mem, question, target, narrow=narrowness(3))
    assert _relevance_of(narrowed, target) == pytest.approx(expected, abs=1e-3)
    assert _relevance_of(narrowed, target) > alone + 0.2
    # Above the default min_relevance with the pick, below it without.
    assert target in _ids(hybrid_mem.recall(question, context_filter=narrowing))
    assert target not in _ids(hybrid_mem.recall(question))


def _with_pick(alone: float, mem: Memory, question: str, memory_id: int, rows: int) -> float:
    """docs/recall.md: a pick of ``rows`` memories adds narrowness x match to the logit of ``alone``."""
    logit = math.log(alone / (1 - alone)) + fit_for(None).platt_narrow * narrowness(rows) * bm25_match(
        mem, question, memory_id)
    return 1 / (1 + math.exp(-logit))


def pair_features(mem: Memory, question: str, memory_id: int, cosine: float | None) -> MatchFeatures:
    """The pair's signals from the stored row (docs/recall.md), not from recall's output."""
    conn = mem.store.connection()
    fit = fit_for(None if cosine is None else mem.embedder.model_id)
    search_text, content, context = conn.execute(
        f"SELECT search_text, content, {'context::text' if dialect_of(conn) == 'postgresql' else 'json(context)'} "
        "FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return match_features(query_terms(conn, question, fit), search_text, content, cosine, context)


def stored_cosines(mem: Memory, question: str) -> dict[int, float]:
    """Every stored vector's cosine with the question (SQLite stores float32 bytes, PostgreSQL a
    pgvector value: both read as numpy here)."""
    q = mem.embedder.embed([question])[0]
    return {mid: float(np.frombuffer(as_vector_bytes(v), dtype=np.float32) @ q)
            for mid, v in mem.store.connection().execute("SELECT memory_id, vector FROM embeddings")}


def bm25_match(mem: Memory, question: str, memory_id: int) -> float:
    """The pair's match without vectors, from its own words (docs/recall.md)."""
    return match_score(pair_features(mem, question, memory_id, None))


@pytest.mark.parametrize("narrowing", [{"robot.id": "arm-2"}, {"robot.id": {"$ne": "arm-1"}}])
def test_without_vectors_the_pick_counts_the_same(mem: Memory, narrowing):
    """No model: no search computes the filter's rows, so recall reads them (up to NARROW_ROWS)."""
    target = _narrow_store(mem)
    alone = _relevance_of(mem.recall("beaker broke", min_relevance=0, n=20), target)
    narrowed = _relevance_of(mem.recall("beaker broke", context_filter=narrowing, min_relevance=0), target)
    assert narrowed == pytest.approx(_with_pick(alone, mem, "beaker broke", target, 3), abs=2e-3)
    assert narrowed > alone + 0.2


def test_an_episode_of_a_few_memories_counts_like_a_filter(mem: Memory):
    """session_id narrows as a filter does: an episode of three memories is the caller's pick."""
    _narrow_store(mem)
    sid = mem.start_session()["session_id"]
    target = mem.learn("The beaker cracked at grip force 15 N", session_id=sid)["memory_id"]
    mem.learn("wrist camera calibrated", session_id=sid)
    mem.learn("parked in bay 4", session_id=sid)
    alone = _relevance_of(mem.recall("beaker broke", min_relevance=0, n=20), target)
    in_episode = _relevance_of(mem.recall("beaker broke", session_id=sid, min_relevance=0), target)
    assert in_episode == pytest.approx(_with_pick(alone, mem, "beaker broke", target, 3), abs=2e-3)


@pytest.mark.parametrize("fixture", ["mem", "hybrid_mem"])
def test_a_pick_of_one_memory_does_not_make_it_an_answer_to_any_question(fixture: str, backend: str, request):
    """The pick lifts what relates to the question; a lone memory sharing neither words nor meaning
    with it stays far below the default min_relevance, with or without vectors."""
    store: Memory = request.getfixturevalue(fixture)
    store.save_perceptions([{"description": f"grasp red cube attempt {i}", "metadata": {"task": {"batch": i}}}
                            for i in range(150)])
    lone = store.learn("battery swapped at the dock", {"task": {"batch": -1}})["memory_id"]
    result = store.recall("grasp red cube", context_filter={"task.batch": -1}, min_relevance=0)
    assert _ids(result) == [lone]
    # The pick enters as narrow x match: it adds (almost) nothing to a pair with (almost) nothing in
    # common, whose relevance is the calibration's floor for such a pair.
    cosine = stored_cosines(store, "grasp red cube")[lone] if store.embedder is not None else None
    features = pair_features(store, "grasp red cube", lone, cosine)
    best = 0.0 if cosine is None else max(0.0, cosine)

    def with_pick(narrow: float) -> float:
        return relevance(features, best, narrow)

    assert result["results"][0]["relevance"] == pytest.approx(with_pick(narrowness(1)), abs=1e-3)
    assert with_pick(narrowness(1)) - with_pick(0.0) < 0.05
    assert result["results"][0]["relevance"] < DEFAULT_MIN_RELEVANCE / 2
    assert _ids(store.recall("grasp red cube", context_filter={"task.batch": -1})) == []


@pytest.mark.parametrize("narrowing", [{"robot.id": "arm-2"}, {"robot.id": {"$ne": "arm-1"}}, None])
def test_min_relevance_cuts_every_answer_at_its_value(hybrid_mem: Memory, narrowing):
    """Whatever the filter leaves, and however a memory came into the answer (found by a search,
    or one of the few memories a filter leaves), ``min_relevance=t`` returns exactly the hits of
    ``min_relevance=0`` whose relevance is at least t."""
    _narrow_store(hybrid_mem)
    for i in range(12):  # more arm-2 memories, some related to the question, most not
        hybrid_mem.learn(f"arm-2 {['dropped the cup', 'charged at dock 3', 'gripper slipped on glass', 'idle'][i % 4]} "
                         f"during shift {i}", {"robot": {"id": "arm-2"}})
    question = "what went wrong when grasping glassware"
    every = hybrid_mem.recall(question, context_filter=narrowing, min_relevance=0, n=100)["results"]
    assert len(every) >= 15
    for t in (0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.55, 0.8):
        cut = hybrid_mem.recall(question, context_filter=narrowing, min_relevance=t, n=100)["results"]
        assert {h["id"] for h in cut} == {h["id"] for h in every if h["relevance"] >= t}, t
        assert all(h["relevance"] >= t for h in cut)


def test_a_filter_that_leaves_many_memories_changes_no_relevance(hybrid_mem: Memory):
    target = _narrow_store(hybrid_mem)
    question = "what went wrong when grasping"
    alone = _relevance_of(hybrid_mem.recall(question, min_relevance=0, n=20), target)
    broad = hybrid_mem.recall(question, context_filter={"robot.id": {"$in": ["arm-1", "arm-2"]}}, min_relevance=0, n=20)
    assert _relevance_of(broad, target) == pytest.approx(alone, abs=1e-4)


def calibrated_with(mem: Memory, question: str, memory_id: int, *, narrow: float) -> float:
    """The relevance formula of docs/recall.md, from the pair's own signals (not recall's output)."""
    cosines = stored_cosines(mem, question)
    arm2 = [mid for (mid,) in mem.store.connection().execute(
        "SELECT id FROM memories WHERE content LIKE 'arm-2%' OR id = ?", (memory_id,))]
    best = max(cosines[mid] for mid in arm2)
    return relevance(pair_features(mem, question, memory_id, cosines[memory_id]), best, narrow)


def test_a_memory_stating_no_value_of_the_kind_asked_for_is_less_relevant(hybrid_mem: Memory):
    """"How often are the ropes replaced" asks for a time: the memory on the same ropes that states
    none is weighed down by the calibration's quantity term (docs/recall.md), the one that does is not."""
    stated = hybrid_mem.learn("Facade robot suspension ropes are replaced every 600 operating hours.")["memory_id"]
    frayed = hybrid_mem.learn("The facade robot's suspension rope frayed at the parapet edge.")["memory_id"]
    question = "how often are the facade robot's suspension ropes replaced"
    hits = {h["id"]: h for h in hybrid_mem.recall(question, min_relevance=0)["results"]}
    assert list(hits)[0] == stated
    cosines = stored_cosines(hybrid_mem, question)
    best = max(cosines.values())
    for memory_id, missing in ((stated, False), (frayed, True)):
        features = pair_features(hybrid_mem, question, memory_id, cosines[memory_id])
        assert features.quantity_missing is missing
        expected = calibrated(match_score(features), best, features.fit, 0.0, missing,
                              word_coverage=features.word_coverage, meaning_weight=features.meaning_weight,
                              cosine=cosines[memory_id], value_share=features.query_value_share)
        assert hits[memory_id]["relevance"] == pytest.approx(expected, abs=1e-3)
    assert fit_for(hybrid_mem.embedder.model_id).platt_quantity < 0


def test_filtered_vector_ranking_ranks_exactly_the_filtered_rows(hybrid_mem: Memory, backend: str):
    """A filter that leaves 30 rows ranks exactly those 30, like numpy over the same vectors."""
    records = [{"description": f"observation {i}: object {i % 7} moved {i % 11} cm on table {i % 3}",
                "metadata": {"task": {"batch": i % 20}}} for i in range(600)]
    ids = hybrid_mem.save_perceptions(records)
    query = "object moved on the table"
    result = hybrid_mem.recall(query, n=30, context_filter={"task.batch": 3}, min_confidence=0)
    got = _ids(result)
    wanted = {ids[i] for i in range(600) if i % 20 == 3}
    assert set(got) == wanted
    cosines = stored_cosines(hybrid_mem, query)
    cos = {mid: cosines[mid] for mid in wanted}
    best_by_vector = max(cos, key=cos.get)
    if backend == "sqlite":
        # Every row matches every query word, so the text side's order is ties broken by the
        # store: BM25's here, ts_rank's and ids' on PostgreSQL (where ranking may differ).
        assert best_by_vector in got[:5]
    else:
        assert best_by_vector in got[:10]


def test_forgotten_memory_leaves_every_search_path(hybrid_mem: Memory):
    mid = hybrid_mem.learn("the gripper slipped on the wet glass bottle", {"task": {"success": False}})["memory_id"]
    hybrid_mem.recall("slippery grasp")  # warm the vector index
    hybrid_mem.forget(mid, "wrong robot")
    assert mid not in _ids(hybrid_mem.recall("gripper slipped"))
    assert mid not in _ids(hybrid_mem.recall("grasp failed on a slippery object"))
    assert mid not in _ids(hybrid_mem.recall("", context_filter={"task.success": False}, min_confidence=0))
    record = hybrid_mem.get(mid)
    assert record["status"] == "forgotten" and record["forget_reason"] == "wrong robot"


def test_updated_memory_is_never_found_by_its_old_text(hybrid_mem: Memory):
    mid = hybrid_mem.learn("the gripper slipped on the wet glass bottle")["memory_id"]
    hybrid_mem.recall("glass bottle")
    hybrid_mem.update(mid, "the conveyor stalled under heavy boxes")
    assert mid not in _ids(hybrid_mem.recall("gripper slipped wet glass bottle"))
    assert _ids(hybrid_mem.recall("conveyor stalled"))[0] == mid
    # A paraphrase is found by meaning alone, below the default min_relevance: ask for every hit.
    assert _ids(hybrid_mem.recall("belt stopped because the load was too heavy", min_relevance=0))[0] == mid


def test_recall_sees_writes_from_another_memory_instance(db_path: Path, clock):
    with Memory(db_path, clock=clock) as reader, Memory(db_path, clock=clock) as writer:
        writer.learn("first note about the lidar")
        assert len(reader.recall("lidar")["results"]) == 1
        writer.learn("second note about the lidar")
        assert len(reader.recall("lidar")["results"]) == 2


@pytest.mark.parametrize("context_filter", [{"task.batch": 3}, {"task.batch": {"$ne": 3}}, {"task.batch": {"$lt": 19}}])
def test_filtered_vector_ranking_is_the_same_on_every_path(db_path: Path, clock, context_filter):
    """sqlite-vec in SQL (cold process), the shortlist check and the candidate set agree."""
    with Memory(db_path, clock=clock) as mem:
        mem.save_perceptions([{"description": f"observation {i}: object {i % 7} moved {i % 11} cm on table {i % 3}",
                               "metadata": {"task": {"batch": i % 20}}} for i in range(400)])
    query = "an object was pushed across the table"
    with Memory(db_path, clock=clock) as cold:
        in_sql = cold.recall(query, n=20, context_filter=context_filter)
    with Memory(db_path, clock=clock) as warm:
        warm.recall(query)  # loads the in-process index
        in_numpy = warm.recall(query, n=20, context_filter=context_filter)
    assert in_sql["mode"] == in_numpy["mode"] == "hybrid"
    assert _ids(in_sql) == _ids(in_numpy)


@pytest.mark.parametrize("query", ["grip_force", "12.5N"])
def test_compound_queries_also_find_prose_with_the_parts(mem: Memory, query):
    prose = mem.learn("set grip force to 12.5 N on the bottle")["memory_id"]
    compact = mem.learn("grip_force=12.5N held")["memory_id"]
    assert set(_ids(mem.recall(query))) == {prose, compact}


def test_a_filter_match_comes_back_even_when_the_query_is_unrelated(mem: Memory):
    mem.save_perceptions([{"description": f"grasp red cube attempt {i}", "metadata": {"task": {"batch": i}}}
                          for i in range(300)])
    lone = mem.learn("battery swapped at the dock", {"task": {"batch": -1}})["memory_id"]
    result = mem.recall("grasp red cube", context_filter={"task.batch": -1}, min_relevance=0)
    assert _ids(result) == [lone] and result["results"][0]["score"] == 0
    # No word shared, no vectors: the relevance of a match of 0 (docs/recall.md), whatever the pick.
    expected = calibrated(0.0, 0.0, fit_for(None), narrowness(1))
    assert result["results"][0]["relevance"] == pytest.approx(expected, abs=1e-4)
    # By default an unrelated filter match is not an answer.
    assert _ids(mem.recall("grasp red cube", context_filter={"task.batch": -1})) == []


def test_unrelated_filter_matches_beyond_a_pick_carry_their_own_relevance(mem: Memory):
    """A filter that leaves many memories (no pick) pads a short answer with its newest matches; each
    carries the relevance of its own pair, as it would as a candidate: here no word shared, none."""
    mem.save_perceptions([{"description": f"battery swap {i} at dock", "metadata": {"robot": {"id": "amr-1"}}}
                          for i in range(150)])
    found = mem.learn("amr-1 grasped the red cube", {"robot": {"id": "amr-1"}})["memory_id"]
    result = mem.recall("red cube", context_filter={"robot.id": "amr-1"}, min_relevance=0, n=5)["results"]
    assert [h["id"] for h in result][0] == found and len(result) == 5
    assert [h["relevance"] for h in result[1:]] == [pytest.approx(calibrated(0.0, 0.0, fit_for(None)), abs=1e-4)] * 4


def test_memories_decayed_below_the_archive_floor_need_min_confidence_zero(mem: Memory, clock):
    mid = mem.learn("an old observation about the drawer")["memory_id"]
    clock.advance(30 * 86_400 * 5)  # 0.8 -> 0.025, below the 0.05 floor, not yet swept by end_session
    assert mem.recall("drawer", min_confidence=0.01)["results"] == []
    assert _ids(mem.recall("drawer", min_confidence=0)) == [mid]


def test_hybrid_hits_report_their_cosine_similarity(hybrid_mem: Memory):
    hybrid_mem.learn("the gripper slipped on the wet glass bottle")
    hybrid_mem.learn("the battery charger LED blinks red")
    hits = hybrid_mem.recall("grasp failed on a slippery object", n=2, min_relevance=0)["results"]
    assert hits[0]["similarity"] > 0.4
    assert all(h["similarity"] is None or h["similarity"] < hits[0]["similarity"] for h in hits[1:])


def test_an_identifier_only_in_the_context_is_found_by_exact_query(mem: Memory):
    part = mem.learn("the wrist force sensor drifted after an hour", context={"hardware": {"part": "RG2-FT-0417"}})
    mem.learn("the wrist force sensor was replaced", context={"hardware": {"part": "RG2-FT-0419"}})
    assert _ids(mem.recall("RG2-FT-0417"))[0] == part["memory_id"]
    updated = mem.update(part["memory_id"], "the wrist force sensor read 2 N high", context={"hardware": {"part": "X-9"}})
    assert updated["status"] == "updated"
    assert part["memory_id"] not in _ids(mem.recall("RG2-FT-0417", min_relevance=0))
    assert _ids(mem.recall("X-9"))[0] == part["memory_id"]


def test_word_coverage_is_the_share_of_the_query_words_a_memory_holds(mem: Memory):
    """"beaker 12.5N": one word and one value, so a memory's word coverage is 1 with "beaker" and 0
    without, whatever their IDF; a memory holding only the value is weighed down against one
    holding both (docs/recall.md's formula, with no vectors: best cosine 0)."""
    both = mem.learn("beaker gripped at 12.5N")["memory_id"]
    value_only = mem.learn("tote lifted at 12.5N")["memory_id"]
    word_only = mem.learn("beaker slipped out of the fingers")["memory_id"]
    question = "beaker 12.5N"
    hits = {h["id"]: h["relevance"] for h in mem.recall(question, min_relevance=0)["results"]}
    for memory_id, share in ((both, 1.0), (value_only, 0.0), (word_only, 1.0)):
        features = pair_features(mem, question, memory_id, None)
        assert features.word_coverage == share
        expected = calibrated(match_score(features), 0.0, features.fit, 0.0, features.quantity_missing,
                              word_coverage=share, value_share=features.query_value_share)
        assert hits[memory_id] == pytest.approx(expected, abs=1e-4)
    assert hits[value_only] < hits[both]
    assert fit_for(None).platt_words > 0


def test_a_chinese_question_is_calibrated_on_its_own_line(mem: Memory):
    """The English model cannot read Chinese, so a Chinese question's match is its shared words
    alone: the calibration gives it its own intercept and slope, in proportion to the question's
    CJK share (docs/recall.md)."""
    answer = mem.learn("机械臂抓取玻璃烧杯时打滑，夹持力太小")["memory_id"]
    other = mem.learn("无人机在大风中悬停不稳")["memory_id"]
    question = "烧杯打滑"
    hits = {h["id"]: h["relevance"] for h in mem.recall(question, min_relevance=0)["results"]}
    assert answer in hits
    for memory_id in (answer, other):
        features = pair_features(mem, question, memory_id, None)
        assert features.query_cjk == 1.0
        expected = calibrated(match_score(features), 0.0, features.fit, 0.0, features.quantity_missing,
                              word_coverage=features.word_coverage, query_cjk=1.0)
        if memory_id in hits:
            assert hits[memory_id] == pytest.approx(expected, abs=1e-4)
    fit = fit_for(None)
    # Same match, English and Chinese: the Chinese line is steeper and starts lower.
    assert fit.platt_chinese < 0 < fit.platt_chinese_match
    assert hits[answer] > calibrated(0.0, 0.0, fit, query_cjk=1.0)


def test_beside_an_exact_value_a_word_counts_in_another_form_or_as_the_key_holding_the_value(mem: Memory):
    """"cap dressing every 200 welds": the memory that "dresses its caps every 200 welds" answers it,
    not the one with the query's very words and 350. "controller firmware 9.4.3": the memory whose
    context holds firmware 9.4.3 answers it, not the one whose text says "controller firmware 5.12.1"."""
    answer = mem.learn("The spot-welding robot dresses its electrode caps every 200 welds.")["memory_id"]
    near = mem.learn("With the cap dressing stretched to every 350 welds, the caps mushroomed.")["memory_id"]
    assert _ids(mem.recall("cap dressing every 200 welds", min_relevance=0))[:2] == [answer, near]
    synced = mem.learn("After the controller update the camera arm's timecode drifted a frame every 10 minutes.",
                       {"software": {"firmware": "9.4.3"}})["memory_id"]
    other = mem.learn("UR5e controller firmware 5.12.1 raised a protective stop on fast wrist rotations.",
                      {"software": {"firmware": "5.12.1"}})["memory_id"]
    assert _ids(mem.recall("controller firmware 9.4.3", min_relevance=0))[:2] == [synced, other]
    assert pair_features(mem, "controller firmware 9.4.3", synced, None).word_coverage == 1.0


def test_without_a_value_a_word_counts_only_as_written(mem: Memory):
    """Stems beside values only: a question in words shares only its own word forms with a memory."""
    written = mem.learn("the caps were dressed")["memory_id"]
    assert pair_features(mem, "dressing caps", written, None).word_coverage < 1.0
    assert pair_features(mem, "dressing caps 200", written, None).word_coverage == 1.0


def test_a_store_that_refuses_access_counts_is_asked_rarely_and_their_memory_is_bounded(
        mem: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    # A read replica refuses every write: recall must not pay a failed write each time, and the
    # counts waiting for it must not grow without bound.
    import robotmem.service as service
    from robotmem.errors import StorageError

    attempts = []

    def refuse(conn, pending, now):
        attempts.append(len(pending))
        raise StorageError("cannot execute UPDATE in a read-only transaction")

    monkeypatch.setattr(mem._db, "flush_access_counts", refuse)
    monkeypatch.setattr(service, "_ACCESS_PENDING_MAX", 4096)
    for first in range(0, 8192, 64):  # 8,192 distinct memories recalled, 64 at a time
        mem._note_access(range(first, first + 64))
    # Each failure doubles the wait for the next try; at the cap the waiting counts are dropped.
    assert attempts == [256, 512, 1024, 2048, 4096, 4096]
    assert mem._access == {} and "the store refuses access counts; 4096 are dropped" in caplog.text
    monkeypatch.undo()
