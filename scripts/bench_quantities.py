"""Cost of relevance's quantity checks per candidate (robotmem.search.quantities).

For a few questions, the time ``states_any`` takes on each memory of the judged set
(datasets/retrieval/memories.jsonl), best of five passes; a count's memo is cleared
before every memory, so each is measured cold. Beside it, in the same run, the check as
it was before counts existed: every kind the memory states (``stated_dimensions``),
intersected with the kinds asked. Then the cost of judging a query's value with its unit in a
memory ("40 A current limit": ``states_value``, then ``states_unit_of``), which coverage pays for
each candidate that holds the number of a query that writes it with a unit; and whether a memory
holds the value asked for or another value of its unit ("12 N·m": ``states_value``, then
``states_unit``), which the ranking's values-first rule pays for every candidate of such a query.

    python scripts/bench_quantities.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from robotmem.search.quantities import (asked_dimensions, stated_counts, stated_dimensions, states_any, states_unit,
                                        states_unit_of, states_value)

MEMORIES = Path(__file__).resolve().parent.parent / "datasets" / "retrieval" / "memories.jsonl"
QUESTIONS = (
    "tank capacity of the sprayer",
    "what does the pill dispenser cost per month",
    "how many flasks fit in the incubator",
    "why did the gripper slip",
)


def per_memory_us(question: str, texts: list[str], every_kind: bool = False, passes: int = 5) -> float:
    asked = asked_dimensions(question)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        for text in texts:
            stated_counts.cache_clear()
            if every_kind:
                bool(asked & stated_dimensions(text))
            else:
                states_any(asked, text)
        best = min(best, time.perf_counter() - start)
    return best / len(texts) * 1e6


def check_us(check: Callable[[str], bool], texts: list[str], passes: int = 5) -> float:
    """Microseconds a memory for ``check``, best of ``passes``."""
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        for text in texts:
            check(text)
        best = min(best, time.perf_counter() - start)
    return best / len(texts) * 1e6


def main() -> None:
    texts = [json.loads(line)["text"] for line in MEMORIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"{len(texts)} memories, best of 5")
    for question in QUESTIONS:
        print(f"{question!r:48} asks {sorted(asked_dimensions(question)) or 'nothing'}: "
              f"{per_memory_us(question, texts):.1f} us a memory "
              f"(every kind matched, then intersected: {per_memory_us(question, texts, every_kind=True):.1f} us)")
    held = check_us(lambda text: states_value(text, "40", "A") or states_unit_of(text, "40"), texts)
    print(f"'40 A current limit': the value with its unit looked for: {held:.1f} us a memory")
    other = check_us(lambda text: states_value(text, "12", "N·m") or states_unit(text, "N·m"), texts)
    print(f"'12 N·m shoulder assist': the value asked for, or another of its unit: {other:.1f} us a memory")


if __name__ == "__main__":
    main()
