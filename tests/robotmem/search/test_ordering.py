"""How decayed confidence orders hits (robotmem.search.fusion.order_score): it breaks ties of the
match, and only ties."""

from __future__ import annotations

from pathlib import Path

from robotmem import Memory
from robotmem.search.fusion import order_score

DAY = 86_400.0


def test_a_slightly_better_match_keeps_its_place_whatever_the_confidences():
    # Decayed confidence spans about 0.3 (archived below) to 0.8 (fresh). At a 5 % weight a fresh
    # memory passed one with a 1.5 % better match, a difference of 0.005 in cosine, and on the
    # blind splits that reordered near-ties against the judged answer (docs/recall.md, eleventh pass).
    better, worse = 0.200, 0.197
    assert order_score(better, 0.3) > order_score(worse, 0.8)


def test_of_two_memories_with_the_same_match_the_fresher_comes_first(tmp_path: Path):
    # The same note from two robots (contexts differ, so both are kept): same words, same cosine.
    now = [1_800_000_000.0]
    text = "Suction cup lost grip on the wet carton"
    with Memory(tmp_path / "m.db", clock=lambda: now[0], embedder="auto") as mem:
        older = mem.learn(text, context={"robot": {"id": "arm-1"}})["memory_id"]
        now[0] += 20 * DAY
        newer = mem.learn(text, context={"robot": {"id": "arm-2"}})["memory_id"]
        hits = mem.recall("suction cup grip on a wet carton", n=2, min_relevance=0)["results"]
    assert [h["id"] for h in hits] == [newer, older]
    assert hits[0]["relevance"] == hits[1]["relevance"]
