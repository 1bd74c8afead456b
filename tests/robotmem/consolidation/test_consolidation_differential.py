"""end_session, end to end on both stores, against an oracle written from the docs.

The oracle below is a plain reading of docs/consolidation.md (steps 1-4, the summary) and
docs/data-model.md (one live copy of a fact, update and forget); it shares no code with
robotmem. Texts are built from a few word lists so word Jaccard is known, and the embedder
gives each text one of four vectors per topic whose cosines lie far from ``merge_cosine``
(1, 0.98·0.95 = 0.931, 0.98, 0.95, 0.9, 0.882, 0.855; other topics 0), so the text rule is
decided exactly. Each example writes a collection of its own: facts of two earlier
sessions, sessionless facts, facts of another collection, exact repeats, updates and
forgets, clock jumps that decay and archive, and then ends the episode twice. After every
end_session each memory's status, superseded_by, absorbed list, evidence count, context and
decayed confidence, and the summary's counts, are judged.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from robotmem import ConflictError, Memory

DAY = 86_400.0
HALF_LIFE_S = 30 * DAY
FLOOR = 0.05
INITIAL = 0.8
STEP = 0.1
CEILING = 0.99
MERGE_COSINE = 0.92
MERGE_JACCARD = 0.85
REL_TOL, ABS_TOL = 0.05, 1e-6
DIM = 32
_MISSING = "<missing>"

TOPICS = (
    "gripper pad holds ceramic mug handle beside tray camera bracket".split(),
    "conveyor belt carries cardboard carton via scanner label printer station".split(),
    "wrist camera sees glass beaker rim by lamp bench shelf".split(),
)
EXTRA = "plastic"
SWAP = ("kettle", "spoon")
COSINES = (1.0, 0.98, 0.95, 0.90)


@dataclass(frozen=True)
class Spec:
    topic: int
    words: int  # 0 the topic's words, 1 one word more (Jaccard 10/11), 2 two words swapped (8/12)
    number: int | None
    negated: bool

    def text(self) -> str:
        words = list(TOPICS[self.topic])
        if self.words == 1:
            words.append(EXTRA)
        elif self.words == 2:
            words[-2:] = SWAP
        if self.negated:
            words.insert(1, "not")
        if self.number is not None:
            words.append(str(self.number))
        return " ".join(words)


def vector_of(text: str) -> np.ndarray:
    """Topic axis plus a variant axis chosen by the text's hash: cosines are products of COSINES."""
    topic = next(i for i, words in enumerate(TOPICS) if text.removeprefix("seen: ").split()[0] == words[0])
    variant = hashlib.sha1(text.encode()).digest()[0] % len(COSINES)
    v = np.zeros(DIM, dtype=np.float64)
    v[4 * topic] = COSINES[variant]
    if variant:
        v[4 * topic + variant] = math.sqrt(1 - COSINES[variant] ** 2)
    return (v / np.linalg.norm(v)).astype(np.float32)


class TopicVectors:
    model_id = "test-topics/32"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([vector_of(t) for t in texts])


# ---- the oracle -----------------------------------------------------------------------

def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+|[0-9]+", text.lower()))


def guard(text: str) -> tuple[tuple[str, ...], bool]:
    ws = text.lower().split()
    return tuple(sorted(w for w in ws if w.isdigit())), "not" in ws


def cosine(a: str, b: str) -> float:
    va, vb = vector_of(a).astype(np.float64), vector_of(b).astype(np.float64)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def jaccard(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb)


def text_rule(a: str, b: str) -> bool:
    near = cosine(a, b) >= MERGE_COSINE or jaccard(a, b) >= MERGE_JACCARD
    return near and guard(a) == guard(b)


def _get(ctx: dict[str, Any], *path: str) -> Any:
    node: Any = ctx
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _leaves_agree(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(_leaves_agree(a[k], b[k]) for k in a))
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, numbers) and isinstance(b, numbers)):
        return type(a) is type(b) and a == b
    return abs(a - b) <= max(ABS_TOL, REL_TOL * max(abs(a), abs(b)))


def context_rule(a: dict[str, Any], b: dict[str, Any]) -> bool:
    for path in (("robot", "id"), ("task", "name"), ("task", "success")):
        x, y = _get(a, *path), _get(b, *path)
        if x is _MISSING or y is _MISSING:
            if x is not y:
                return False
        elif type(x) is not type(y) or x != y:
            return False
    pa, pb = _get(a, "params"), _get(b, "params")
    if pa is _MISSING or pb is _MISSING:
        return pa is pb
    return _leaves_agree(pa, pb)


def attach_outcome(ctx: dict[str, Any], score: float) -> None:
    """Step 1: ``episode.outcome``, unless ``episode`` holds something that is no object or
    holds an ``outcome`` already (the caller's own, whatever its value)."""
    episode = ctx.setdefault("episode", {})
    if isinstance(episode, dict) and "outcome" not in episode:
        episode["outcome"] = float(score)


def protected(ctx: dict[str, Any]) -> bool:
    return ctx.get("category") in ("constraint", "safety") or ctx.get("protected") is True


@dataclass
class Fact:
    id: int
    collection: str
    session: str | None
    text: str
    given: dict[str, Any]  # the context as the caller gave it (what the hash is of)
    context: dict[str, Any]  # as stored: with episode.outcome once its session ended with a score
    learned: float
    kind: str = "fact"
    c0: float = INITIAL
    reinforced_at: float = 0.0
    status: str = "active"
    evidence: int = 1
    absorbed: list[int] = field(default_factory=list)
    superseded_by: int | None = None

    def confidence(self, now: float) -> float:
        if protected(self.context):
            return self.c0
        return self.c0 * 2.0 ** (-max(0.0, now - self.reinforced_at) / HALF_LIFE_S)

    @property
    def live(self) -> bool:
        return self.status in ("active", "archived")

    def key(self) -> tuple[str, str, str]:
        return self.collection, " ".join(self.text.lower().split()), json.dumps(self.given, sort_keys=True)


class Oracle:
    def __init__(self) -> None:
        self.facts: dict[int, Fact] = {}
        self.ended: dict[str, float | None] = {}  # session -> score
        self.summaries: dict[str, dict[str, Any]] = {}

    def live_copy(self, collection: str, text: str, ctx: dict[str, Any]) -> Fact | None:
        key = Fact(0, collection, None, text, ctx, ctx, 0.0).key()
        return next((f for f in self.facts.values() if f.kind == "fact" and f.live and f.key() == key), None)

    def reinforce(self, target: Fact, absorbed: list[Fact], now: float) -> None:
        c_new = max(f.confidence(now) for f in absorbed)
        evidence = sum(f.evidence for f in absorbed)
        target.c0 = min(CEILING, max(target.confidence(now), c_new) + STEP * evidence)
        target.reinforced_at = max(target.reinforced_at, now)
        target.evidence += evidence
        for f in absorbed:
            target.absorbed += [f.id, *f.absorbed]
            for inner in [f, *(self.facts[i] for i in f.absorbed)]:
                inner.status, inner.superseded_by = "superseded", target.id
        if target.status == "archived":
            target.status = "active"

    def end_session(self, sid: str, collection: str, score: float | None, now: float) -> dict[str, int]:
        mine = [f for f in self.facts.values() if f.session == sid]
        if score is not None:
            for f in mine:
                attach_outcome(f.context, score)
        order = sorted((f for f in mine if f.kind == "fact" and f.status == "active" and not protected(f.context)),
                       key=lambda f: (f.learned, f.id))
        groups: list[list[Fact]] = []
        for f in order:
            fits = [g for g in groups if text_rule(f.text, g[0].text) and context_rule(f.context, g[0].context)]
            if fits:
                max(fits, key=lambda g: (cosine(f.text, g[0].text), -groups.index(g))).append(f)
            else:
                groups.append([f])
        earlier = sorted((f for f in self.facts.values()
                          if f.collection == collection and f.kind == "fact" and f.live and not protected(f.context)
                          and (f.session is None or f.session in self.ended) and f.session != sid),
                         key=lambda f: (f.learned, f.id))
        into: dict[int, list[Fact]] = {}
        for group in groups:
            fits = [e for e in earlier if text_rule(group[0].text, e.text)
                    and all(context_rule(m.context, e.context) for m in group)]
            if fits:
                best = max(fits, key=lambda e: (cosine(group[0].text, e.text), -earlier.index(e)))
                into.setdefault(best.id, []).extend(group)  # the whole group, members straight
            elif len(group) > 1:
                self.reinforce(group[0], group[1:], now)
        # Every member beyond its group's survivor, also in a group that an earlier fact absorbs.
        merged = sum(len(group) - 1 for group in groups)
        for target, absorbed in into.items():
            self.reinforce(self.facts[target], absorbed, now)
        archived = 0
        for f in self.facts.values():
            if f.collection != collection or protected(f.context):
                continue
            if f.status == "active" and f.confidence(now) < FLOOR:
                f.status = "archived"
                archived += 1
            elif f.status == "archived" and f.confidence(now) >= FLOOR:
                f.status = "active"
        decayed = sum(1 for f in self.facts.values() if f.collection == collection and f.status == "active"
                      and not protected(f.context) and f.c0 - f.confidence(now) > 0.01)
        self.ended[sid] = score
        kept = [f.kind for f in mine if f.status != "forgotten"]
        return {"memories": kept.count("fact"), "perceptions": kept.count("perception"),
                "merged": merged, "reinforced": len(into), "decayed": decayed, "archived": archived}


# ---- generated episodes ---------------------------------------------------------------

# Weighted towards repeats and near-duplicates, so most episodes merge or reinforce something.
SPECS = st.builds(Spec, topic=st.sampled_from((0, 0, 0, 1, 2)), words=st.sampled_from((0, 0, 1, 1, 2)),
                  number=st.sampled_from((None, None, None, 5, 9)), negated=st.sampled_from((False,) * 4 + (True,)))


@st.composite
def contexts(draw: st.DrawFn) -> dict[str, Any]:
    task: dict[str, Any] = {"name": draw(st.sampled_from(("pick",) * 5 + ("place",)))}
    success = draw(st.sampled_from((True,) * 5 + (False, _MISSING)))
    if success is not _MISSING:
        task["success"] = success
    ctx: dict[str, Any] = {"robot": {"id": draw(st.sampled_from(("arm-1",) * 5 + ("arm-2",)))}, "task": task}
    force = draw(st.sampled_from((_MISSING,) * 3 + (5.0,) * 3 + (5.2, 5.4, 9, "5")))
    if force is not _MISSING:
        ctx["params"] = {"force": force}
    trial = draw(st.sampled_from((_MISSING,) * 4 + (1, 2)))
    if trial is not _MISSING:
        ctx["trial"] = trial
    if draw(st.integers(0, 12)) == 0:
        ctx["category"] = "constraint"
    if draw(st.integers(0, 8)) == 0:
        # The caller's own outcome: other than any score, equal to one (0.4, 1), or null.
        ctx["episode"] = draw(st.sampled_from(("warmup", {"trial": 4}, {"outcome": 0.25}, {"outcome": 0.4},
                                               {"outcome": 1}, {"outcome": None, "trial": 4})))
    return ctx


WHERE = st.sampled_from(("E",) * 5 + ("S0", "S0", "S1", "none", "other"))


@st.composite
def episodes(draw: st.DrawFn) -> list[Any]:
    """Operations that pick their texts and contexts from small pools of the example's own, so
    repeats, near-duplicates and agreeing contexts are common."""
    base = draw(SPECS)
    variants = st.builds(Spec, topic=st.just(base.topic), words=st.integers(0, 2),
                         number=st.sampled_from((base.number,) * 3 + (5, None)),
                         negated=st.sampled_from((base.negated,) * 3 + (True,)))
    specs = [base, *draw(st.lists(st.one_of(variants, variants, variants, SPECS), min_size=1, max_size=4))]
    first = draw(contexts())
    ctxs = [first, *draw(st.lists(st.one_of(st.just(dict(first, trial=3)), contexts()), max_size=2))]
    spec, ctx = st.sampled_from(specs), st.sampled_from(ctxs)
    kinds = {
        "learn": st.tuples(st.just("learn"), spec, ctx, WHERE),
        "end": st.tuples(st.just("end"), st.sampled_from(("S0", "S1")), st.sampled_from((None, 0.0, 1.0, 0.4))),
        "advance": st.tuples(st.just("advance"), st.sampled_from((10.0, 5 * DAY, 200 * DAY))),
        "update": st.tuples(st.just("update"), st.integers(0, 30), spec, st.one_of(st.none(), ctx)),
        "forget": st.tuples(st.just("forget"), st.integers(0, 30)),
        "perceive": st.tuples(st.just("perceive"), spec, ctx, WHERE),
    }
    weighted = ("learn",) * 10 + ("perceive",) * 2 + ("end", "end", "advance", "advance", "update", "forget")
    return [draw(kinds[kind]) for kind in draw(st.lists(st.sampled_from(weighted), min_size=6, max_size=24))]


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, Clock]]:
    path: Any = (request.getfixturevalue("module_postgres_url") if request.param == "postgresql"
                 else tmp_path_factory.mktemp("consolidation-differential") / "memory.db")
    clock = Clock()
    with Memory(path, embedder=TopicVectors(), clock=clock) as mem:
        yield mem, clock


_collections = (f"cons{i}" for i in itertools.count())


def _check(mem: Memory, oracle: Oracle, now: float, where: str) -> None:
    for f in oracle.facts.values():
        got = mem.get(f.id)
        want = {"status": f.status, "superseded_by": f.superseded_by, "absorbed": f.absorbed,
                "evidence_count": f.evidence, "context": f.context}
        have = {k: got[k] for k in want}
        assert have == want, f"{where}: memory {f.id} ({f.text!r}): got {have}, expected {want}"
        assert got["confidence"] == pytest.approx(f.confidence(now), abs=2e-6), (
            f"{where}: memory {f.id} confidence {got['confidence']}, expected {f.confidence(now)}")


def _pick(oracle: Oracle, collection: str, index: int, kinds: tuple[str, ...] = ("fact",)) -> Fact | None:
    live = [f for f in oracle.facts.values() if f.live and f.collection == collection and f.kind in kinds]
    return live[index % len(live)] if live else None


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=episodes(), score=st.sampled_from((None, 0.0, 0.9, 1.0)))
def test_end_session_does_exactly_what_the_docs_say(store: tuple[Memory, Clock], ops: list[Any],
                                                    score: float | None) -> None:
    mem, clock = store
    clock.now += 1000 * DAY  # every example in a present of its own
    collection, other = next(_collections), next(_collections)
    oracle = Oracle()
    sessions = {name: mem.start_session(collection=collection)["session_id"] for name in ("E", "S0", "S1")}
    started = clock.now
    for op in ops:
        clock.now += 10.0
        if op[0] == "learn":
            _, spec, ctx, where = op
            text = spec.text()
            sid = sessions.get(where)
            if sid in oracle.ended:
                sid, where = None, "none"
            coll = other if where == "other" else collection
            result = mem.learn(text, json.loads(json.dumps(ctx)), collection=coll, session_id=sid)
            existing = oracle.live_copy(coll, text, ctx)
            if existing is not None:
                assert (result["memory_id"], result["status"]) == (existing.id, "duplicate")
                existing.c0 = min(CEILING, max(existing.confidence(clock.now), INITIAL) + STEP)
                existing.reinforced_at = max(existing.reinforced_at, clock.now)
                existing.evidence += 1
                existing.status = "active"  # a repeated archived fact is live for recall at once
            else:
                mid = result["memory_id"]
                oracle.facts[mid] = Fact(mid, coll, sid, text, json.loads(json.dumps(ctx)),
                                         json.loads(json.dumps(ctx)), clock.now, reinforced_at=clock.now)
        elif op[0] == "perceive":
            _, spec, ctx, where = op
            sid = sessions.get(where)
            if sid in oracle.ended:
                sid, where = None, "none"
            coll = other if where == "other" else collection
            text = "seen: " + spec.text()  # the same words: a perception is still never merged
            mid = mem.save_perception(text, metadata=json.loads(json.dumps(ctx)), collection=coll,
                                      session_id=sid)["memory_id"]
            oracle.facts[mid] = Fact(mid, coll, sid, text, json.loads(json.dumps(ctx)), json.loads(json.dumps(ctx)),
                                     clock.now, kind="perception", reinforced_at=clock.now)
        elif op[0] == "end":
            sid = sessions[op[1]]
            if sid in oracle.ended:
                continue
            summary = mem.end_session(sid, outcome_score=op[2])
            want = oracle.end_session(sid, collection, op[2], clock.now)
            assert {k: summary[k] for k in want} == want, f"end {op[1]}: {summary}"
            _check(mem, oracle, clock.now, f"after ending {op[1]}")
        elif op[0] == "advance":
            clock.now += op[1]
        elif op[0] == "update":
            _, index, spec, ctx = op
            target = _pick(oracle, collection, index)
            if target is None:
                continue
            text = spec.text()
            new_given = target.given if ctx is None else json.loads(json.dumps(ctx))
            copy = oracle.live_copy(collection, text, new_given)
            if copy is not None and copy.id != target.id:
                with pytest.raises(ConflictError):
                    mem.update(target.id, text, ctx)
                continue
            mem.update(target.id, text, None if ctx is None else json.loads(json.dumps(ctx)))
            target.text, target.given = text, new_given
            if ctx is not None:  # without one the stored context stays, episode.outcome and all
                target.context = json.loads(json.dumps(new_given))
                session_score = oracle.ended.get(target.session) if target.session else None
                if session_score is not None:
                    attach_outcome(target.context, session_score)
        elif op[0] == "forget":
            target = _pick(oracle, collection, op[1], ("fact", "perception"))
            if target is not None:
                mem.forget(target.id, "differential test")
                target.status = "forgotten"
    clock.now += 10.0
    summary = mem.end_session(sessions["E"], outcome_score=score)
    want = oracle.end_session(sessions["E"], collection, score, clock.now)
    assert summary["status"] == "ended"
    assert {k: summary[k] for k in want} == want, f"end E: {summary}"
    for name in ("merged", "reinforced", "archived"):
        event(f"end E {name}: {min(want[name], 2)}")
    assert summary["duration_s"] == pytest.approx(clock.now - started)
    assert summary["outcome_score"] == score
    _check(mem, oracle, clock.now, "after ending E")
    clock.now += 10.0
    again = mem.end_session(sessions["E"], outcome_score=None if score else 0.5)
    assert again == {**summary, "status": "already_ended"}
    _check(mem, oracle, clock.now, "after ending E again")

