"""The merge planner on its own: grouping order, no chaining of tolerances, chunked scoring."""

from __future__ import annotations

import json

import pytest

from robotmem.config import Config
from robotmem.consolidation import plan
from robotmem.consolidation.plan import MergeRules, group_episode, match_earlier
from robotmem.consolidation.pool import FactPool

RULES = MergeRules.from_config(Config())


def pool(facts: list[tuple[int, str, dict]]) -> FactPool:
    """Facts as the store would return them, without vectors (the word rule decides)."""
    rows = [(mid, text, json.dumps(ctx), 1, float(mid), float(mid), None) for mid, text, ctx in facts]
    return FactPool.from_db_rows(rows, dim=None)


def force(value: float) -> dict:
    return {"params": {"grip_force": value}}


def as_ids(p: FactPool, groups: list[plan.Group]) -> list[tuple[int, list[int]]]:
    return [(p.rows[g.survivor].id, [p.rows[m].id for m in g.members]) for g in groups]


def test_tolerances_do_not_chain_through_absorbed_members():
    # 5.2 is within 5 % of 5.0 and 5.4 within 5 % of 5.2, but 5.4 is 8 % from the survivor 5.0.
    p = pool([(1, "grip the cup gently", force(5.0)), (2, "grip the cup gently", force(5.2)),
              (3, "grip the cup gently", force(5.4))])
    assert as_ids(p, group_episode(p, RULES)) == [(1, [2]), (3, [])]


def test_the_survivor_is_the_earliest_fact_whatever_the_input_order():
    p = pool([(9, "the cup is on the shelf", {}), (4, "The cup is on the shelf.", {}), (7, "the cup is on the shelf!", {})])
    assert as_ids(p, group_episode(p, RULES)) == [(4, [7, 9])]


def test_chunked_scoring_gives_the_same_groups(monkeypatch: pytest.MonkeyPatch):
    texts = ["open the drawer slowly", "Open the drawer slowly.", "the drawer sticks at the end",
             "open the drawer slowly!", "The drawer sticks at the end.", "close the lid"]
    p = pool([(i + 1, t, {}) for i, t in enumerate(texts)])
    whole = as_ids(p, group_episode(p, RULES))
    monkeypatch.setattr(plan, "_CELLS", 5)  # one row of scores at a time
    monkeypatch.setattr(plan, "_BATCH_ROWS", 2)
    assert as_ids(p, group_episode(p, RULES)) == whole == [(1, [2, 4]), (3, [5]), (6, [])]


def test_an_earlier_fact_absorbs_a_group_only_if_every_member_agrees_with_it():
    episode = pool([(10, "grip the cup gently", force(5.2)), (11, "grip the cup gently", force(5.4))])
    groups = group_episode(episode, RULES)
    assert as_ids(episode, groups) == [(10, [11])]
    close_to_both = pool([(1, "grip the cup gently", force(5.3))])
    assert match_earlier(episode, groups, close_to_both, RULES) == {0: 0}
    close_to_survivor_only = pool([(1, "grip the cup gently", force(5.0))])  # 5.4 is 8 % away
    assert match_earlier(episode, groups, close_to_survivor_only, RULES) == {}
