"""Deciding what merges into what. Pure functions over :class:`FactPool`; no SQL.

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
from .context_rule import Tolerance, contexts_agree
from .pool import FactPool, pair_scores

__all__ = ["Absorption", "Group", "MergeRules", "absorptions", "group_episode", "match_earlier"]


@dataclass(frozen=True)
class MergeRules:
    cosine: float
    text_similarity: float
    tolerance: Tolerance

    @classmethod
    def from_config(cls, config: Config) -> MergeRules:
        return cls(
            cosine=config.merge_cosine,
            text_similarity=config.merge_text_similarity,
            tolerance=Tolerance(relative=config.param_rel_tolerance, absolute=config.param_abs_tolerance),
        )


@dataclass
class Group:
    """A survivor and the facts of the same episode merged into it (indices into the episode pool)."""

    survivor: int
    members: list[int] = field(default_factory=list)


def group_episode(pool: FactPool, rules: MergeRules) -> list[Group]:
    groups: list[Group] = []
    for members in pool.buckets.values():
        groups.extend(_group_bucket(pool, members, rules))
    groups.sort(key=lambda g: g.survivor)
    return groups


def _group_bucket(pool: FactPool, bucket: list[int], rules: MergeRules) -> list[Group]:
    if len(bucket) == 1:
        return [Group(bucket[0])]
    order = sorted(bucket, key=lambda i: (pool.rows[i].first_seen, pool.rows[i].id))
    qualifies, similarity = pair_scores(pool, order, pool, order, cosine=rules.cosine, text=rules.text_similarity)
    survivors: list[int] = []  # positions in ``order``
    groups: dict[int, Group] = {}
    for pos, index in enumerate(order):
        best = _best_partner(pool, pool, index, order, survivors, qualifies[pos], similarity[pos], rules)
        if best is None:
            survivors.append(pos)
            groups[pos] = Group(index)
        else:
            groups[best].members.append(index)
    return list(groups.values())


def _best_partner(
    a: FactPool, b: FactPool, a_index: int, b_indices: list[int], candidates: list[int],
    qualifies: np.ndarray, similarity: np.ndarray, rules: MergeRules,
) -> int | None:
    """The position (in ``b_indices``) of the most similar qualifying candidate whose context agrees."""
    if not candidates:
        return None
    positions = np.asarray(candidates, dtype=np.int64)
    positions = positions[qualifies[positions]]
    for pos in positions[np.argsort(-similarity[positions], kind="stable")]:
        if contexts_agree(a.rows[a_index].context, b.rows[b_indices[pos]].context, rules.tolerance):
            return int(pos)
    return None


def match_earlier(episode: FactPool, groups: list[Group], earlier: FactPool, rules: MergeRules) -> dict[int, int]:
    """For each group (by position in ``groups``) the index in ``earlier`` that absorbs it."""
    matches: dict[int, int] = {}
    by_bucket: dict[object, list[int]] = {}
    for g, group in enumerate(groups):
        by_bucket.setdefault(episode.bucket_keys[group.survivor], []).append(g)
    for key, group_positions in by_bucket.items():
        targets = earlier.buckets.get(key)
        if not targets:
            continue
        survivors = [groups[g].survivor for g in group_positions]
        qualifies, similarity = pair_scores(
            episode, survivors, earlier, targets, cosine=rules.cosine, text=rules.text_similarity
        )
        everyone = list(range(len(targets)))
        for row, g in enumerate(group_positions):
            best = _best_partner(episode, earlier, survivors[row], targets, everyone, qualifies[row],
                                 similarity[row], rules)
            if best is None:
                continue
            target = targets[best]
            if all(contexts_agree(episode.rows[m].context, earlier.rows[target].context, rules.tolerance)
                   for m in groups[g].members):
                matches[g] = target
    return matches


@dataclass(frozen=True)
class Absorption:
    """``sources`` (memory ids) merge into ``target``; ``reinforcing`` when the target is from an earlier episode."""

    target: int
    sources: tuple[int, ...]
    reinforcing: bool


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
