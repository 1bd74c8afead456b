"""FTS5's BM25 order for a query of one term, without counting the term's matches first.

FTS5's ``bm25()`` computes each query phrase's IDF by walking the phrase's whole doclist
(``xQueryPhrase``) before it scores the first row. Full-text recall scores only the newest
matches of a word found nearly everywhere (robotmem.search.fulltext), but that walk still
read every match: at 1,000,000 memories, 33 ms for the 2,000 newest matches of a word in
829,000 of them, against 1.3 ms to list them. With one term the IDF is one positive factor
shared by every row, so the order is that of the rest of the formula, which needs only the
row's own term count and length: this function. It runs in Python, about 1 us a row slower
than bm25() in C, so full text uses it only where the count would cost more
(robotmem.search.fulltext ``TERM_RANK_FROM``).
"""

from __future__ import annotations

from typing import Any

import apsw

__all__ = ["MEAN_ROW_LENGTH", "TERM_RANK", "register_term_rank", "term_score"]

#: The auxiliary function's name in SQL: ``ORDER BY robotmem_term_rank(memories_fts)``.
TERM_RANK = "robotmem_term_rank"
#: The table's mean row length in tokens, as bm25() reads it (any matching row gives it).
MEAN_ROW_LENGTH = "robotmem_mean_row_length"
# FTS5's own bm25() constants.
_K1 = 1.2
_B = 0.75


def term_score(frequency: int, length: int, average: float) -> float:
    """``bm25()`` divided by the term's IDF, for a query of one term (lower is better, as ``rank``):
    ``frequency`` times in a row of ``length`` tokens, the table's rows ``average`` tokens long."""
    return -(frequency * (_K1 + 1.0)) / (frequency + _K1 * (1.0 - _B + _B * length / max(average, 1e-9)))


def _mean_row_length(api: apsw.FTS5ExtensionApi, *_: Any) -> float:
    return float(api.column_total_size(-1)) / max(api.row_count, 1)


def _term_rank(api: apsw.FTS5ExtensionApi, *_: Any) -> float:
    average: float | None = api.aux_data  # once per query, as bm25() does
    if average is None:
        average = _mean_row_length(api)
        api.aux_data = average
    return term_score(api.inst_count, api.column_size(-1), average)


def register_term_rank(conn: apsw.Connection) -> None:
    conn.register_fts5_function(TERM_RANK, _term_rank)
    conn.register_fts5_function(MEAN_ROW_LENGTH, _mean_row_length)
