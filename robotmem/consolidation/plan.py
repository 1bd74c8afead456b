"""Deciding what merges into what. Pure functions over :class:`FactPool`; no SQL.

Facts are only compared within a bucket (see pool.py).

1. Inside the episode, facts are visited oldest first; each joins the most similar
   existing *survivor* it is a near-duplicate of (text rule) with an agreeing context
   (context rule), or becomes a survivor itself. Comparing with the survivor only, not
   with every member, keeps tolerances from chaining (5.0 ~ 5.2 ~ 5.4 but 5.0 !~ 5.4).
2. Each resulting group is then matched against facts of earlier episodes: the most
   similar qualifying earlier fact absorbs the whole group, provided every member's
   context agrees with it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import Config
from ..search.relevance import fit_for
from .context_rule import Tolerance, contexts_agree
from .pool import FactPool, pair_scores

__all__ = ["Absorption", "Group", "MergeRules", "absorptions", "group_episode", "match_earlier"]


@dataclass(frozen=True)
class MergeRules:
    cosine: float
    text_similarity: float
    tolerance: Tolerance
    #: whether the model reads Chinese: without it the cosine of a mostly-CJK fact is not evidence
    reads_cjk: bool = True

    @classmethod
    def from_config(cls, config: Config, model_id: str | None = None) -> MergeRules:
        """``merge_cosine`` is on the English model's scale, where unrelated sentences sit near 0;
        a model whose unrelated sentences sit higher (RelevanceFit.cosine_floor) is held to the same
        point of its own scale: 0.92 is 0.98 for multilingual-e5-small, whose distinct memories of
        the judged set reach 0.965 (MiniLM's: 0.919)."""
        floor = fit_for(model_id).cosine_floor
        return cls(
            cosine=floor + config.merge_cosine * (1.0 - floor),
            text_similarity=config.merge_text_similarity,
            tolerance=Tolerance(relative=config.param_rel_tolerance, absolute=config.param_abs_tolerance),
            reads_cjk=fit_for(model_id).multilingual,
        )


@dataclass
class Group:
    """A survivor and the facts of the same episode merged into it (indices into the episode pool)."""

    survivor: int
    members: list[int] = field(default_factory=list)


#: Inside the episode, buckets are packed into batches of about this many facts (few
#: matrix products); against earlier facts, at most _CELLS pairs are scored at once.
_BATCH_ROWS = 1500
_CELLS = 4_000_000


def _time_order(pool: FactPool, indices: list[int]) -> list[int]:
    return sorted(indices, key=lambda i: (pool.rows[i].first_seen, pool.rows[i].id))


def _batches(pool: FactPool) -> list[list[int]]:
    """Whole buckets packed into batches (scored together; pair_scores masks other buckets out)."""
    batches: list[list[int]] = [[]]
    for members in pool.buckets.values():
        if batches[-1] and len(batches[-1]) + len(members) > _BATCH_ROWS:
            batches.append([])
        batches[-1].extend(members)
    return [_time_order(pool, b) for b in batches if b]


def group_episode(pool: FactPool, rules: MergeRules) -> list[Group]:
    groups: list[Group] = []
    for batch in _batches(pool):
        groups.extend(_group_batch(pool, batch, rules))
    groups.sort(key=lambda g: g.survivor)
    return groups


def _group_batch(pool: FactPool, order: list[int], rules: MergeRules) -> list[Group]:
    """Oldest first, each fact joins its best qualifying survivor or becomes one.

    Scores are computed for a chunk of rows at a time (against the whole batch), so a
    single huge bucket costs time, not memory.
    """
    is_survivor = np.zeros(len(order), dtype=bool)
    groups: dict[int, Group] = {}
    chunk = max(1, _CELLS // len(order))
    for start in range(0, len(order), chunk):
        qualifies, similarity = pair_scores(pool, order[start : start + chunk], pool, order,
                                            cosine=rules.cosine, text=rules.text_similarity,
                                            reads_cjk=rules.reads_cjk)
        for row in range(qualifies.shape[0]):
            pos, index = start + row, order[start + row]
            best = _best_partner(pool, index, pool, order, qualifies[row] & is_survivor, similarity[row], rules)
            if best is None:
                is_survivor[pos] = True
                groups[pos] = Group(index)
            else:
                groups[best].members.append(index)
    return list(groups.values())


def _best_partner(
    a: FactPool, a_index: int, b: FactPool, b_indices: list[int], qualifies: np.ndarray, similarity: np.ndarray,
    rules: MergeRules,
) -> int | None:
    """The position (in ``b_indices``) of the most similar qualifying partner whose context agrees."""
    positions = np.flatnonzero(qualifies)
    for pos in positions[np.argsort(-similarity[positions], kind="stable")]:
        if contexts_agree(a.rows[a_index].context, b.rows[b_indices[pos]].context, rules.tolerance):
            return int(pos)
    return None


def match_earlier(episode: FactPool, groups: list[Group], earlier: FactPool, rules: MergeRules) -> dict[int, int]:
    """For each group (by position in ``groups``) the index in ``earlier`` that absorbs it.

    Scored bucket by bucket: earlier facts outnumber the episode's, so packing buckets
    together (as inside the episode) would mostly compute pairs that are masked out.
    """
    by_bucket: dict[object, list[int]] = {}
    for g, group in enumerate(groups):
        by_bucket.setdefault(episode.bucket_keys[group.survivor], []).append(g)
    matches: dict[int, int] = {}
    for key, positions in by_bucket.items():
        targets = earlier.buckets.get(key)
        if targets:
            matches.update(_match_bucket(episode, groups, positions, earlier, targets, rules))
    return matches


def _match_bucket(
    episode: FactPool, groups: list[Group], positions: list[int], earlier: FactPool, targets: list[int],
    rules: MergeRules,
) -> dict[int, int]:
    matches: dict[int, int] = {}
    chunk = max(1, _CELLS // len(targets))
    for start in range(0, len(positions), chunk):
        rows = positions[start : start + chunk]
        survivors = [groups[g].survivor for g in rows]
        qualifies, similarity = pair_scores(
            episode, survivors, earlier, targets, cosine=rules.cosine, text=rules.text_similarity,
            reads_cjk=rules.reads_cjk,
        )
        for row, g in enumerate(rows):
            best = _best_partner(episode, survivors[row], earlier, targets, qualifies[row], similarity[row], rules)
            if best is None:
                continue
            target = targets[best]
            if all(contexts_agree(episode.rows[m].context, earlier.rows[target].context, rules.tolerance)
                   for m in groups[g].members):
                matches[g] = target
    return matches


@dataclass(frozen=True)
class Absorption:
    """``sources`` (memory ids) merge into ``target``; ``reinforcing`` when the target is from an earlier episode.

    ``basis``: (memory id, writes.fact_basis) of each memory as the plan read it; the write
    phase drops what changed since (episode.plan_session fills it in).
    """

    target: int
    sources: tuple[int, ...]
    reinforcing: bool
    basis: tuple[tuple[int, str], ...] = ()


def absorptions(episode: FactPool, groups: list[Group], matches: dict[int, int], earlier: FactPool) -> list[Absorption]:
    out: list[Absorption] = []
    for g, group in enumerate(groups):
        members = tuple(episode.rows[m].id for m in group.members)
        if g in matches:
            survivor = episode.rows[group.survivor].id
            out.append(Absorption(earlier.rows[matches[g]].id, (survivor, *members), reinforcing=True))
        elif members:
            out.append(Absorption(episode.rows[group.survivor].id, members, reinforcing=False))
    return out
