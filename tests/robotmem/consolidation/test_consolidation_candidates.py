"""The indexed plan (candidates.py) against the exhaustive one: the same merges on the same stores.

The stores are built with merging switched off, so every earlier fact stays a candidate, and
then every ended session is planned both ways (as ``robotmem consolidate`` would plan it,
without applying anything). The facts are drawn to hit every way a pair can qualify or
not: synonym paraphrases (same vector, few shared words), copies with one heavy extra word
(most words shared, a distant vector), case and punctuation variants, other numbers,
robots, tasks, outcomes and params, and facts stored without a vector.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robotmem import Config, Memory
from robotmem.consolidation import candidates, episode
from robotmem.consolidation.episode import Settings, plan_session
from robotmem.consolidation.plan import Absorption
from robotmem.search.vector_index import VectorIndex

SYNONYMS = [("grasp", "grip", "grab"), ("mug", "cup"), ("gently", "softly", "carefully"),
            ("approach", "reach"), ("bottle", "flask"), ("quickly", "rapidly"), ("lift", "raise"), ("tray", "plate")]
CANONICAL = {w: group[0] for group in SYNONYMS for w in group}
#: Words whose vector outweighs a sentence: adding one keeps the words, not the direction.
HEAVY = {"kitchen": 6.0, "warehouse": 6.0, "outdoors": 6.0}
ACTIONS = ["grasp", "approach", "lift", "rotate", "slide", "release", "push", "pull"]
OBJECTS = ["mug", "bottle", "tray", "drawer", "cable", "valve", "cube", "box", "lid"]
MANNER = ["gently", "quickly", "along the edge", "from the side", "from above", "with the hook", "with two fingers"]
RESULT = ["keeps it stable", "avoids a collision", "needs a second try", "works on the first try",
          "scratches the surface", "takes longer than planned", "slipped once"]


class SynonymEmbedder:
    """Sum of per-word random vectors (synonyms share one; a few words weigh much more), normalised:
    a paraphrase by synonyms has cosine 1 with few shared words, a heavy extra word the reverse."""

    model_id, dim = "test-synonyms/16", 16

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace("!", " ").split():
                word = CANONICAL.get(word, word)
                rng = np.random.default_rng(zlib.crc32(word.encode()))
                out[i] += HEAVY.get(word, 1.0) * rng.standard_normal(self.dim).astype(np.float32)
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out


def _sentence(rnd: random.Random) -> str:
    text = f"{rnd.choice(ACTIONS)} the {rnd.choice(OBJECTS)} {rnd.choice(MANNER)} so it {rnd.choice(RESULT)}"
    if rnd.random() < 0.3:
        text += f" at {rnd.choice([5, 9, 13])} N"
    return text


def _context(rnd: random.Random) -> dict[str, Any]:
    ctx: dict[str, Any] = {"robot": {"id": rnd.choice(["arm-0", "arm-0", "arm-1"])},
                           "task": {"name": rnd.choice(["pick", "pick", "place"])}}
    if rnd.random() < 0.8:
        ctx["task"]["success"] = rnd.random() < 0.7
    if rnd.random() < 0.8:
        ctx["params"] = {"grip_force": rnd.choice([5.0, 5.1, 5.3, 9.0])}
    elif rnd.random() < 0.5:
        ctx["params"] = {"speed": {"value": rnd.choice([0.2, 0.21, 0.5]), "unit": "m/s"}}
    return ctx


def _variant(text: str, rnd: random.Random) -> str:
    roll = rnd.random()
    if roll < 0.35:  # paraphrase: synonyms swapped (same vector, fewer shared words)
        return " ".join(rnd.choice(next(g for g in SYNONYMS if w in g)) if w in CANONICAL else w
                        for w in text.split())
    if roll < 0.55:  # one heavy word more: most words shared, vector elsewhere
        return f"{text} in the {rnd.choice(list(HEAVY))}"
    if roll < 0.75:
        return rnd.choice([text.upper(), text.capitalize() + ".", text + "!"])
    if roll < 0.9:  # another number: the guard keeps them apart
        return text.replace(" N", "0 N") if text.endswith(" N") else text + " at 7 N"
    return text.replace("so it", "so it never") if "so it" in text else text


def build(path: Any, clock: Any, *, sessions: int, facts: int, with_vectors: bool, seed: int) -> None:
    """``sessions`` ended sessions of ``facts`` facts each, nothing merged."""
    off = Config.load(db_path=path, merge_cosine=1.5, merge_text_similarity=1.5)
    rnd = random.Random(seed)
    written: list[tuple[str, dict[str, Any]]] = []
    with Memory(path, clock=clock, config=off, embedder=SynonymEmbedder() if with_vectors else None) as mem, \
            Memory(path, clock=clock, config=off, embedder=None) as plain:
        for _ in range(sessions):
            sid = mem.start_session()["session_id"]
            for _ in range(facts):
                clock.advance(2.0)
                if written and rnd.random() < 0.55:
                    text, ctx = rnd.choice(written)
                    text = _variant(text, rnd)
                    if rnd.random() < 0.3:
                        ctx = _context(rnd)
                else:
                    text, ctx = _sentence(rnd), _context(rnd)
                    written.append((text, ctx))
                writer = plain if with_vectors and rnd.random() < 0.1 else mem  # some facts have no vector
                writer.learn(text, ctx, session_id=sid)
            clock.advance(60.0)
            mem.end_session(sid)


def plans(path: Any, clock: Any, embedder: Any) -> list[tuple[list[Absorption], list[Absorption]]]:
    """(exhaustive, indexed) plan of every ended session, planned as the offline pass would."""
    with Memory(path, clock=clock, embedder=embedder) as mem:
        settings = Settings.of(mem.config, mem.embedder)
        out = []
        with mem.store.read() as conn:
            sessions = conn.execute(
                "SELECT id, collection, ended_at FROM sessions WHERE ended_at IS NOT NULL ORDER BY ended_at, id"
            ).fetchall()
            mirror = (VectorIndex("default", settings.model_id, settings.dim, facts_only=True)
                      if settings.model_id is not None and settings.dim is not None else None)
            for sid, coll, ended_at in sessions:
                out.append((plan_session(conn, sid, coll, float(ended_at), settings, exhaustive=True),
                            plan_session(conn, sid, coll, float(ended_at), settings, mirror)))
        return out


def _reinforcing(found: list[tuple[list[Absorption], list[Absorption]]]) -> int:
    return sum(a.reinforcing for reference, _ in found for a in reference)


@pytest.mark.sqlite_only
def test_indexed_plans_equal_the_exhaustive_ones_with_vectors(tmp_path: Path, clock: Any) -> None:
    path = tmp_path / "oracle.db"
    build(path, clock, sessions=40, facts=60, with_vectors=True, seed=3)
    found = plans(path, clock, SynonymEmbedder())
    assert [indexed for _, indexed in found] == [reference for reference, _ in found]
    assert _reinforcing(found) > 200  # the comparison is not about empty plans


def test_indexed_plans_equal_the_exhaustive_ones_by_words(db_path: Any, clock: Any) -> None:
    build(db_path, clock, sessions=12, facts=40, with_vectors=False, seed=5)
    found = plans(db_path, clock, None)
    assert [indexed for _, indexed in found] == [reference for reference, _ in found]
    assert _reinforcing(found) > 20


@pytest.mark.sqlite_only
def test_indexed_plan_loads_only_candidates_and_end_session_takes_it(
    tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "few.db"
    build(path, clock, sessions=6, facts=30, with_vectors=True, seed=11)
    loaded: list[int] = []
    real = candidates.earlier_facts

    def spy(*args: Any, **kwargs: Any) -> Any:
        pool = real(*args, **kwargs)
        loaded.append(len(pool))
        return pool

    monkeypatch.setattr(candidates, "earlier_facts", spy)
    monkeypatch.setattr(episode, "earlier_facts", lambda *a, **k: pytest.fail("the exhaustive read ran"))
    with Memory(path, clock=clock, embedder=SynonymEmbedder()) as mem:
        sid = mem.start_session()["session_id"]
        mem.learn(*_first_fact(mem), session_id=sid)
        summary = mem.end_session(sid)
    assert summary["reinforced"] == 1
    assert len(loaded) == 1 and 1 <= loaded[0] < 20  # of 180 earlier facts


def _first_fact(mem: Memory) -> tuple[str, dict[str, Any]]:
    """A paraphrase of the first fact about a mug (about a cup: the same vector, not a duplicate)."""
    with mem.store.read() as conn:
        content, context = conn.execute(
            "SELECT content, json(context) FROM memories WHERE type = 'fact' AND content LIKE '% mug %' "
            "ORDER BY id LIMIT 1").fetchone()
    return content.replace(" mug ", " cup "), json.loads(context)


def test_the_word_cache_is_renumbered_whole_when_full(db_path: Any, clock: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    build(db_path, clock, sessions=5, facts=20, with_vectors=False, seed=7)
    monkeypatch.setattr(candidates, "_CACHE_LIMIT", 30)  # cleared before nearly every plan
    found = plans(db_path, clock, None)
    assert [indexed for _, indexed in found] == [reference for reference, _ in found]


def test_the_word_cache_keeps_recent_texts_when_pruned(db_path: Any, clock: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    build(db_path, clock, sessions=5, facts=20, with_vectors=False, seed=7)
    monkeypatch.setattr(candidates, "_PRUNE_AT", 10)
    monkeypatch.setattr(candidates, "_KEEP_PLANS", 1)  # renumbered at nearly every plan
    found = plans(db_path, clock, None)
    assert [indexed for _, indexed in found] == [reference for reference, _ in found]


def test_the_word_cache_lets_go_of_texts_no_plan_asks_for(db_path: Any, clock: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A robot that learns new texts every episode and forgets (or merges away) the old ones: the
    cache holds what recent plans asked for, not every text the process ever saw."""
    for name, fresh in (("_keys", {}), ("_asked", {}), ("_vocabulary", {}), ("_guards", {}),
                        ("_plans", 0), ("_pruned_to", 0)):
        monkeypatch.setattr(candidates, name, fresh)
    prune_at, keep_plans = 20, 4
    monkeypatch.setattr(candidates, "_PRUNE_AT", prune_at)
    monkeypatch.setattr(candidates, "_KEEP_PLANS", keep_plans)
    per_episode, episodes = 5, 60
    ctx = {"robot": {"id": "arm-0"}, "task": {"name": "pick"}}
    with Memory(db_path, clock=clock, embedder=None) as mem:
        previous: list[int] = []
        for e in range(episodes):
            sid = mem.start_session(context=ctx)["session_id"]
            ids = [mem.learn(f"episode {e} lesson {k}: grasp the {OBJECTS[k]} {MANNER[e % len(MANNER)]}", ctx,
                             session_id=sid)["memory_id"] for k in range(per_episode)]
            clock.advance(60.0)
            mem.end_session(sid)  # its plan asks for the texts of the episode before: still live
            for memory_id in previous:
                mem.forget(memory_id, "superseded by practice")
            previous = ids
        with mem.store.read() as conn:
            live = conn.execute("SELECT count(*) FROM memories WHERE type = 'fact' AND status = 'active'").fetchone()[0]
    asked_recently = live + keep_plans * per_episode  # the texts the last plans could ask for
    assert len(candidates._keys) <= 2 * max(prune_at, asked_recently) + per_episode
    assert len(candidates._vocabulary) < per_episode * episodes  # the numbering is pruned too
