"""How well one memory answers one query, as a calibrated number in [0, 1].

A control loop needs to tell "here is what you did last time" from "here is something
vaguely similar", so relevance is an estimated probability that the hit is relevant,
from two signals of the query and the memory alone (never of the other hits, so the
same pair scores the same in every answer and an empty answer is possible):

* ``meaning``: the embedding cosine, with a ``trust`` in it: how far both texts are in
  a script the model was trained on (all-MiniLM-L6-v2 is English: unrelated Chinese
  pairs score 0.5-0.8, so for Chinese text the cosine is noise); no vectors, no trust;
* ``coverage``: the share of the query's information that the memory contains: its
  informative words weighted by IDF, exact values (tokens with a digit: 12.5n, 3.2.1,
  -0417) counting double, so that for "grip_force=12.5N" the memory with 12 N covers
  less than half of what the one with 12.5 N covers and ranks below it. A bare number
  (0.4, 2.5, 18000) counts double only where the memory also has a word next to it in the
  query, its unit or parameter name: "0.4" in a note about "±0.4 m" is not "0.4 Nm", nor
  "heading_kp=2.5" "depth_kp=2.5" (a memory in another language keeps the double weight:
  no English word finds its unit). A number the query writes with a unit ("40 A current
  limit") is held only where the memory gives it with the same unit: "a 40 cm box jump" is
  another quantity.

The signals are mixed convexly, ``match = w * meaning' + (1 - w) * coverage ** p``
(coverage squared so that one shared word out of five says little; where the request ranks
among NARROW_ROWS memories or more, a question without values counts coverage below a floor as
none: one word of a long question is what many unrelated memories share), where
``meaning' = trust * cosine + (1 - trust) * NEUTRAL_COSINE * coverage``: where the model
cannot judge (a Chinese query or memory, a store without vectors) the memory is taken to
mean as much as a typical answer, in proportion to the words it shares, instead of the
cosine's noise deciding (language-aware weighting). The meaning weight ``w`` shrinks with
the share of the query's information held by exact values (``w = MEANING_WEIGHT * (1 -
VALUE_DAMPING * value share)``): for "grip_force=12.5N" the words decide more than the
cosine, which cannot tell 12.5 N from 12 N, while a paraphrase is judged mostly by meaning.
The mix orders the hits. Relevance adds one signal of the query as a whole, its *best
cosine*: the highest trusted cosine among the query's candidates (0 where the model cannot
judge). The model's cosines sit higher for some queries than for others (0.3 is the best a
vague query gets, an unrelated memory reaches 0.5 for a specific one), so the same cosine
means less where the best is high. And one signal of the request, its *narrowness*: how few
rows the caller's own filter (or session) left, ``ln(NARROW_ROWS / rows)`` when fewer than
NARROW_ROWS are left, else 0. A caller who narrows a store to a dozen memories of one robot
and asks "what went wrong when grasping" is asking about those memories: in the judged set
such vague questions reach cosines of only 0.25-0.35 with their answers, and without the
filter's evidence every answer of them sat below the default threshold. It is counted in rows,
not as a share of the store, so that it means the same at 300 memories as at a million. The
pick is evidence in proportion to the match: it lifts a memory that relates to the question
a little, never one that shares neither words nor meaning with it (a filter that leaves one
memory does not make it an answer to any question). Two more signals of the pair: whether
the query asks for a kind of quantity the memory states none of (robotmem.search.quantities),
and its *word coverage*, the share of the query's word information (not its values) the
memory holds: a memory that holds "12.5 N" but not "beaker" shares a number, not a subject.
A Chinese query gets its own calibration line (intercept and slope, in proportion to its CJK
share): the English model cannot read it, so its match is words shared alone, on another
scale. It is calibrated by Platt scaling, ``relevance = sigmoid(a * (match - w * min(best, cap)
+ w * max(0, cosine - cap)) + d * narrowness * match + q * missing + v * words + cjk * (h + k *
match) + u * value share + b)``: the best cosine tied to minus the query's meaning weight w times the match's
weight (the best candidate does not lose relevance as its cosine rises), cap the 95th
percentile of the tuning queries' best cosine (``RelevanceFit.best_cap``), above which, where
the fit has no data, the memory's own cosine counts twice (a restatement is an answer).
The mix is chosen for ranking
quality (nDCG@5 per category) and the calibration's weights by logistic regression, both on the tuning splits
of the judged set in datasets/retrieval (scripts/fit_relevance.py); docs/recall.md
explains them. The constants belong to the embedding model whose cosines they weigh
(``RelevanceFit``, chosen by ``fit_for(model_id)``): multilingual-e5-small puts unrelated
sentences at cosine 0.75-0.85, so its ``meaning`` is the cosine rescaled from a floor of
0.75, and, trained on many languages, it is trusted for Chinese text too.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import apsw

from ..embeddings.cache import MODEL_NAME
from ..embeddings.multilingual import MULTILINGUAL_MODEL
from ..models import DEFAULT_MIN_RELEVANCE
from ..store.backend import dialect_of
from ..store.connection import scalar
from ..store.tokens import identifier_key_words, is_bare_number, query_tokens, token_parts
from .count_cache import CountCache, store_stamp
from .quantities import asked_dimensions, states_any, states_unit, states_unit_of, states_value, value_units
from .stems import is_stemmable, word_stem

__all__ = [
    "DEFAULT_MIN_RELEVANCE",
    "STOPWORDS",
    "MatchFeatures",
    "KEYWORD_FIT",
    "NARROW_ROWS",
    "QueryTerms",
    "RelevanceFit",
    "VALUE_HELD",
    "VALUE_NONE",
    "VALUE_OTHER",
    "calibrated",
    "cjk_share",
    "counted_coverage",
    "document_frequencies",
    "effective_meaning",
    "fit_for",
    "informative_tokens",
    "match_features",
    "match_score",
    "narrowness",
    "query_terms",
    "relevance",
    "trusted_cosine",
]


@dataclass(frozen=True)
class RelevanceFit:
    """The mix and its calibration for one embedding model (its cosines have their own scale:
    multilingual-e5-small puts unrelated sentences at 0.75-0.85, where MiniLM puts them near 0.1),
    fitted on the tuning splits by scripts/fit_relevance.py; see the module docstring."""

    meaning_weight: float
    value_damping: float
    coverage_power: float
    neutral_cosine: float
    #: The calibration's weight of the match less the query's meaning weight times its best cosine
    #: (``calibrated``): the best cosine's own weight is tied to minus the meaning weight times this.
    platt_a: float
    platt_b: float
    #: The calibration's weight of the request's narrowness (``narrowness``) times the match.
    platt_narrow: float = 0.0
    #: The calibration's weight of "asks for a kind of quantity the memory states none of" (0 or 1).
    platt_quantity: float = 0.0
    #: The calibration's weight of the memory's word coverage (MatchFeatures.word_coverage).
    platt_words: float = 0.0
    #: Chinese queries' own calibration line: added to the intercept and to the match's slope in
    #: proportion to the query's CJK share (the English model cannot read them, so their match is
    #: on another scale: words shared, not meaning).
    platt_chinese: float = 0.0
    platt_chinese_match: float = 0.0
    #: The calibration's weight of the query's share of exact values (QueryTerms.value_share): a
    #: question of values and one of words have their own base rates.
    platt_values: float = 0.0
    #: The model was trained on many languages: its cosine is trusted for Chinese text too.
    multilingual: bool = False
    #: The cosine of unrelated sentences, about: ``meaning`` is the cosine rescaled from it to 1.
    cosine_floor: float = 0.0
    #: The best cosine is weighed up to this (the 95th percentile of the tuning queries' best): above
    #: it, where the fit has almost no data, a memory's own cosine counts twice (a restatement of the
    #: question at cosine 0.9 is an answer, whether or not it shares the question's words).
    best_cap: float = 1.0
    #: In a request that ranks among NARROW_ROWS memories or more, a question without exact values
    #: counts coverage below this as none (rescaled so that full coverage stays 1): one shared word of a
    #: long question is what many unrelated memories have, and it let such memories pass an answer
    #: found by meaning alone; among a few memories (a narrow filter, a small store), and beside a
    #: value, one shared word is evidence and counts in full.
    coverage_floor: float = 0.0


# The English model's: also used for vectors of any other model (stand-ins in tests and benchmarks).
ENGLISH_FIT = RelevanceFit(0.50, 1.0, 2.0, 0.2, 18.17, -2.70, platt_narrow=11.40, platt_quantity=-4.70,
                           platt_words=2.55, platt_chinese=-4.66, platt_chinese_match=34.57, platt_values=-3.87,
                           best_cap=0.67, coverage_floor=0.15)
MULTILINGUAL_FIT = RelevanceFit(0.70, 1.0, 2.0, 0.2, 17.71, -3.09, platt_narrow=12.44, platt_quantity=-3.24,
                                platt_words=3.39, platt_chinese=-8.95, platt_chinese_match=18.60, platt_values=-3.60,
                                best_cap=0.78,
                                multilingual=True,
                                cosine_floor=0.75)
# Recall without cosines (no model installed, a recall given no query vector): the match is the words
# shared alone, and no best cosine says how high the model's cosines sit for the query.
KEYWORD_FIT = RelevanceFit(0.50, 0.5, 2.0, 0.2, 13.16, -4.50, platt_narrow=21.45, platt_quantity=-3.67,
                           platt_words=3.15, platt_chinese=-3.09, platt_chinese_match=26.43, platt_values=-1.75)
_FITS = {MODEL_NAME: ENGLISH_FIT, MULTILINGUAL_MODEL: MULTILINGUAL_FIT}


#: A filter (or session) that leaves fewer rows than this is evidence that its rows are what the caller
#: asks about (``narrowness``); one that leaves more is no evidence.
NARROW_ROWS = 100


def narrowness(rows: int | None) -> float:
    """``ln(NARROW_ROWS / rows)`` for a request whose filter or session left ``rows`` memories, 0 for one
    that left NARROW_ROWS or more or was not narrowed (None)."""
    if rows is None or rows >= NARROW_ROWS:
        return 0.0
    return math.log(NARROW_ROWS / max(1, rows))


def fit_for(model_id: str | None) -> RelevanceFit:
    """The fit for vectors of ``model_id`` (``family/numerics``), the English model's for any other
    model, KEYWORD_FIT for None (no cosines)."""
    if model_id is None:
        return KEYWORD_FIT
    return _FITS.get(model_id.split("/")[0], ENGLISH_FIT)

#: Words that say nothing about which memory is meant, whatever the size of the store.
#: Dropped from the keyword query (and from coverage) unless the query has nothing else.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "get", "got", "did", "done", "went", "go", "goes", "going", "keep", "keeps", "kept", "still", "also", "again", "的", "了", "是", "在", "和", "与", "吗", "呢", "吧", "啊", "就", "也", "都", "很", "要", "时", "会", "着", "过", "个", "这", "那", "么"]
)

_DIGIT = re.compile(r"\d")
_VALUE_WEIGHT = 2.0


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF


def cjk_share(text: str) -> float:
    """The share of the letters of ``text`` that are CJK (0.0 for English, about 1.0 for Chinese)."""
    if text.isascii():
        return 0.0
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for c in letters if _is_cjk(c)) / len(letters)


def informative_tokens(text: str) -> list[str]:
    """Query tokens without stopwords; all of them when every one is a stopword."""
    tokens = query_tokens(text)
    kept = [t for t in tokens if t not in STOPWORDS]
    return kept or tokens


@dataclass(frozen=True)
class QueryTerms:
    """A query's informative tokens; what follows from them alone is computed once per query,
    not once per candidate it is matched with."""

    tokens: tuple[str, ...]
    weights: tuple[float, ...]  # IDF x (2 for exact values): each token's share of the query's information
    cjk: float
    fit: RelevanceFit = ENGLISH_FIT
    #: The kinds of quantity the query asks for (robotmem.search.quantities.asked_dimensions).
    asked: frozenset[str] = frozenset()
    #: The request ranks among NARROW_ROWS memories or more (its filter's or session's rows, else the
    #: store's): there one shared word of a long question is what many unrelated memories have.
    wide: bool = True
    #: For each bare number written with a unit in the query ("40 A", "58 %"), the number as written
    #: and its unit; None for every other token (robotmem.search.quantities.value_units).
    units: tuple[tuple[str, str] | None, ...] = ()

    @cached_property
    def total(self) -> float:
        return sum(self.weights)

    @cached_property
    def word_total(self) -> float:
        """The query's information held by words (tokens without a digit)."""
        return sum(w for t, w in zip(self.tokens, self.weights) if not _DIGIT.search(t))

    @cached_property
    def value_share(self) -> float:
        """The share of the query's information held by exact values (tokens with a digit)."""
        total = self.total
        return sum(w for t, w in zip(self.tokens, self.weights) if _DIGIT.search(t)) / total if total > 0 else 0.0

    @cached_property
    def coverage_floor(self) -> float:
        """Coverage below this counts as none (RelevanceFit.coverage_floor): only in a wide request,
        for a question without exact values."""
        return self.fit.coverage_floor if self.wide and self.value_share == 0 else 0.0

    @cached_property
    def meaning_weight(self) -> float:
        return self.fit.meaning_weight * (1.0 - self.fit.value_damping * self.value_share)

    @cached_property
    def anchors(self) -> tuple[tuple[int, ...], ...]:
        """For each bare number (``0.4``, ``2.5``, ``18000``), the words next to it in the query (its
        unit or parameter name: ``Nm``, ``depth_kp``); () for every other token."""
        bare = [is_bare_number(t) for t in self.tokens]
        return tuple(
            tuple(j for j in (i - 1, i + 1) if 0 <= j < len(self.tokens) and not _DIGIT.search(self.tokens[j]))
            if bare[i] else () for i in range(len(self.tokens)))

    @cached_property
    def stems(self) -> tuple[str | None, ...]:
        """Each English word's stem (robotmem.search.stems); None for values, identifiers, CJK."""
        return tuple(word_stem(t) if is_stemmable(t) else None for t in self.tokens)

    @cached_property
    def parts(self) -> tuple[tuple[str, ...], ...]:
        """Each token's parts (robotmem.store.tokens.token_parts)."""
        return tuple(tuple(token_parts(t)) for t in self.tokens)


def query_terms(conn: apsw.Connection, text: str, fit: RelevanceFit = ENGLISH_FIT,
                narrowed_to: int | None = None) -> QueryTerms:
    """The query's informative tokens with their IDF in the store's full-text index; ``fit``:
    the embedding model's (fit_for); ``narrowed_to``: how many memories the request's filter or
    session left (None: not narrowed, the store's memories compete)."""
    tokens = informative_tokens(text)
    asked = asked_dimensions(text)
    # max(id) counts deleted rows too; it is an index lookup, where count(*) scans.
    n = max(1, int(scalar(conn, "SELECT coalesce(max(id), 0) FROM memories")))
    wide = (n if narrowed_to is None else narrowed_to) >= NARROW_ROWS
    if not tokens:
        return QueryTerms((), (), cjk_share(text), fit, asked, wide)
    df = document_frequencies(conn, tokens)
    weights = tuple(_idf(df.get(t, 0), n) * (_VALUE_WEIGHT if _DIGIT.search(t) else 1.0) for t in tokens)
    return QueryTerms(tuple(tokens), weights, cjk_share(text), fit, asked, wide, _units_of(text, tokens))


def _units_of(text: str, tokens: list[str]) -> tuple[tuple[str, str] | None, ...]:
    """Each bare-number token's number as written and its unit, where the query writes one after it."""
    written = {}
    for number, unit in value_units(text).items():
        as_token = query_tokens(number)
        if len(as_token) == 1:
            written[as_token[0]] = (number, unit)
    return tuple(written.get(t) if is_bare_number(t) else None for t in tokens)


def document_frequencies(conn: Any, tokens: list[str]) -> dict[str, int]:
    """How many searchable (active or archived) memories hold each token: FTS5's vocabulary table,
    or PostgreSQL's GIN index of those memories. Superseded and forgotten memories count on
    neither store: FTS5 holds no others, and PostgreSQL counts the rows it would search."""
    if dialect_of(conn) == "postgresql":
        return _postgres_document_frequencies(conn, tokens)
    return _sqlite_document_frequencies(conn, tokens)


#: One count per word, in one statement (a round trip each cost 4-9 ms on a loaded server), each a
#: bitmap scan of the partial GIN index ``memories_fulltext_live`` (PostgreSQL migration 5): the
#: statuses are the index's predicate, written as constants so that the planner matches it.
_PG_DOCUMENT_FREQUENCIES = (
    "SELECT w.i, (SELECT count(*) FROM memories m WHERE m.search_tsv @@ w.q::tsquery "
    "AND m.status IN ('active', 'archived')) FROM unnest(?::text[]) WITH ORDINALITY AS w(q, i)"
)


def _postgres_document_frequencies(conn: Any, tokens: list[str]) -> dict[str, int]:
    """Counted once per read snapshot (PgConnection.snapshot_counts): a recall's full-text plan and
    its relevance ask for the same words."""
    from ..store.postgres.sql import tsquery_literal

    memo: dict[Any, int] | None = getattr(conn, "snapshot_counts", None)
    known = {} if memo is None else {t: memo[("df", t)] for t in tokens if ("df", t) in memo}
    missing = list(dict.fromkeys(t for t in tokens if t not in known))
    if missing:
        queries = [tsquery_literal([t], lambda _: []) for t in missing]
        counts = {int(i): int(n) for i, n in conn.execute(_PG_DOCUMENT_FREQUENCIES, (queries,))}
        for i, token in enumerate(missing, 1):
            known[token] = counts[i]
            if memo is not None:
                memo[("df", token)] = counts[i]
    return {t: known[t] for t in tokens}


_TERM_COUNTS: CountCache[int] = CountCache()


def _sqlite_document_frequencies(conn: apsw.Connection, tokens: list[str]) -> dict[str, int]:
    """Per term (``term = ?``): FTS5's vocabulary table counts a term's documents by reading its
    whole posting list, and ``term IN (...)`` reads every term's; reused while the store is nearly
    the same (robotmem.search.count_cache)."""
    stamp = store_stamp(conn)
    df: dict[str, int] = {}
    for token in tokens:
        cached = _TERM_COUNTS.get(stamp, ("term", token))
        if cached is None:
            row = conn.execute("SELECT doc FROM memories_fts_vocab WHERE term = ?", (token,)).fetchone()
            cached = int(row[0]) if row else 0
            _TERM_COUNTS.put(stamp, ("term", token), cached)
        df[token] = cached
    return df


def _idf(df: int, n: int) -> float:
    """BM25's IDF, floored so that a word in every memory still counts a little."""
    return max(0.05, math.log((n - df + 0.5) / (df + 0.5) + 1.0))


def _contains(token: str, parts: tuple[str, ...], doc: set[str]) -> bool:
    """The memory has the token, or all of its parts (12.5n as "12.5 N", grip_force as "grip force")."""
    if token in doc:
        return True
    return bool(parts) and all(p in doc for p in parts)


@dataclass(frozen=True)
class MatchFeatures:
    meaning: float  # the cosine (0 without vectors)
    trust: float  # how far the cosine can be believed for this pair, 0..1
    coverage: float
    meaning_weight: float = ENGLISH_FIT.meaning_weight  # the query's (QueryTerms.meaning_weight)
    fit: RelevanceFit = ENGLISH_FIT  # the embedding model's (QueryTerms.fit)
    #: The query asks for a kind of quantity (a time, a weight, ...) the memory states no value of.
    quantity_missing: bool = False
    #: The share of the query's word information (its tokens without a digit) the memory holds; 0 for
    #: a query of values alone.
    word_coverage: float = 0.0
    #: The query's CJK share (QueryTerms.cjk).
    query_cjk: float = 0.0
    #: Coverage below this counts as none (QueryTerms.coverage_floor).
    coverage_floor: float = 0.0
    #: The share of the query's information held by exact values (QueryTerms.value_share).
    query_value_share: float = 0.0
    #: Of the numbers the query writes with a unit ("12 N·m"), the memory's text gives one with that
    #: unit (``VALUE_HELD``), gives the unit only with other numbers ("8 N·m": ``VALUE_OTHER``, a
    #: near-duplicate), or neither (``VALUE_NONE``); the ranking puts a holder above its
    #: near-duplicates (robotmem.search.fusion).
    value: int = 0


#: MatchFeatures.value
VALUE_NONE, VALUE_HELD, VALUE_OTHER = 0, 1, -1


def match_features(terms: QueryTerms, search_text: str, content: str, cosine: float | None,
                   context: str | None = None) -> MatchFeatures:
    """The signals of one (query, memory) pair; ``cosine`` is None without vectors; ``context``: the
    memory's context as JSON text (None: not read)."""
    doc = set(search_text.split())
    matched = [_contains(t, parts, doc) for t, parts in zip(terms.tokens, terms.parts)]
    if terms.value_share > 0 and any(stem is not None and not hit for stem, hit in zip(terms.stems, matched)):
        matched = _named_beside_values(terms, doc, context, matched)
    total = terms.total
    content_cjk = cjk_share(content)
    # A unit or parameter name can only be found in the query's own language ("firmware" is not in
    # a Chinese note about firmware 3.2.1).
    bind = abs(terms.cjk - content_cjk) < 0.5
    with_unit = _values_with_units(terms, content, matched) if bind and any(terms.units) else {}
    held = sum(w if with_unit.get(i) else _held_weight(w, anchors, matched) if bind else w
               for i, (w, hit, anchors) in enumerate(zip(terms.weights, matched, terms.anchors))
               if with_unit.get(i, hit))
    coverage = held / total if total > 0 else 0.0
    words = sum(w for t, w, hit in zip(terms.tokens, terms.weights, matched) if hit and not _DIGIT.search(t))
    word_coverage = words / terms.word_total if terms.word_total > 0 else 0.0
    fit = terms.fit
    if cosine is None:
        meaning, trust = 0.0, 0.0
    else:
        meaning = max(0.0, (cosine - fit.cosine_floor) / (1.0 - fit.cosine_floor))
        trust = 1.0 if fit.multilingual else (1.0 - terms.cjk) * (1.0 - content_cjk)
    missing = bool(terms.asked) and not states_any(terms.asked, content)
    return MatchFeatures(meaning=meaning, trust=trust, coverage=coverage, meaning_weight=terms.meaning_weight, fit=fit,
                         quantity_missing=missing, word_coverage=word_coverage, query_cjk=terms.cjk,
                         coverage_floor=terms.coverage_floor, query_value_share=terms.value_share,
                         value=_asked_value(terms, content) if bind else VALUE_NONE)


def _values_with_units(terms: QueryTerms, content: str, matched: list[bool]) -> dict[int, bool]:
    """For each number the query writes with a unit ("40 A current limit"), whether the memory holds
    that value: only where its text gives the number with the same unit. With another unit it is
    another quantity ("a 40 cm box jump"), not held, whatever words sit beside it; a memory whose
    text gives the number with no unit (or only in its context) is left to the word rule
    (``_held_weight``). Among near-duplicates ("45 A", "10 g" for "20 g") this is what ranks the
    memory with the value asked for first."""
    decided: dict[int, bool] = {}
    for i, written in enumerate(terms.units):
        if written is None or not matched[i]:
            continue
        number, unit = written
        if states_value(content, number, unit):
            decided[i] = True
        elif states_unit_of(content, number):
            decided[i] = False
    return decided


def _asked_value(terms: QueryTerms, content: str) -> int:
    """Whether the memory's text gives a number the query writes with a unit with that unit
    (VALUE_HELD), or gives the unit only with other numbers (VALUE_OTHER: "8 N·m of assist" for
    "12 N·m shoulder assist", another value of the quantity asked for)."""
    written = [w for w in terms.units if w is not None]
    if any(states_value(content, number, unit) for number, unit in written):
        return VALUE_HELD
    return VALUE_OTHER if any(states_unit(content, unit) for _, unit in written) else VALUE_NONE


def _named_beside_values(terms: QueryTerms, doc: set[str], context: str | None, matched: list[bool]) -> list[bool]:
    """Beside an exact value the query's words name its parameter or part, and a memory names it
    in another form ("cap dressing every 200 welds", "dresses its caps every 200 welds") or as the
    context key that holds the value ("firmware 9.4.3", ``{"software": {"firmware": "9.4.3"}}``).
    Without a value, stems would only let more near-topic memories share a paraphrase's words
    (docs/recall.md, ninth pass)."""
    words = doc | identifier_key_words(json.loads(context)) if context else doc
    stems = {word_stem(t) for t in words if is_stemmable(t)}
    return [hit or (stem is not None and (token in words or stem in stems))
            for token, stem, hit in zip(terms.tokens, terms.stems, matched)]


def _held_weight(weight: float, anchors: tuple[int, ...], matched: list[bool]) -> float:
    """A bare number counts as an exact value (double) only beside its unit or parameter name:
    "0.4" in a firmware note is not "0.4 Nm"."""
    if not anchors or any(matched[j] for j in anchors):
        return weight
    return weight / _VALUE_WEIGHT


def effective_meaning(features: MatchFeatures) -> float:
    """The cosine as far as it can be trusted, else a neutral cosine in proportion to the words shared."""
    neutral = features.fit.neutral_cosine
    return features.trust * features.meaning + (1.0 - features.trust) * neutral * features.coverage


def counted_coverage(features: MatchFeatures) -> float:
    """Coverage as the mix counts it: below the query's floor as none, rescaled so that full
    coverage stays 1 (RelevanceFit.coverage_floor)."""
    floor = features.coverage_floor
    if floor <= 0.0:
        return features.coverage
    return max(0.0, features.coverage - floor) / (1.0 - floor)


def match_score(features: MatchFeatures) -> float:
    """The convex mix of the signals that ranks hits (before calibration)."""
    w = features.meaning_weight
    coverage = counted_coverage(features)
    return w * effective_meaning(features) + (1.0 - w) * math.pow(coverage, features.fit.coverage_power)


def calibrated(match: float, best_cosine: float, fit: RelevanceFit = ENGLISH_FIT, narrow: float = 0.0,
               quantity_missing: bool = False, *, word_coverage: float = 0.0, query_cjk: float = 0.0,
               meaning_weight: float | None = None, cosine: float = 0.0, value_share: float = 0.0) -> float:
    """The probability that a memory answers the query (Platt scaling), given the highest
    trusted cosine among the query's candidates, the request's ``narrowness``, whether the
    memory lacks the kind of quantity the query asks for, the share of the query's words it
    holds, the query's CJK share, its meaning weight (QueryTerms.meaning_weight; None: the
    fit's, a question without values), the memory's own trusted cosine and the query's share of
    exact values.

    The best cosine is weighed at minus the meaning weight times the match's weight: the match
    holds the cosine at that weight, so the best candidate keeps its relevance as its cosine
    rises. Above ``best_cap``, where the fit has no data, a memory's cosine counts twice (once in
    the match, once here): MiniLM puts a restatement in other words at 0.85-0.95, and it is an
    answer whether or not it shares the question's words."""
    w = fit.meaning_weight if meaning_weight is None else meaning_weight
    beyond = max(0.0, cosine - fit.best_cap)
    logit = (fit.platt_a * (match - w * min(best_cosine, fit.best_cap) + w * beyond) + fit.platt_narrow * narrow * match
             + fit.platt_quantity * quantity_missing + fit.platt_words * word_coverage
             + query_cjk * (fit.platt_chinese + fit.platt_chinese_match * match) + fit.platt_values * value_share
             + fit.platt_b)
    return 1.0 / (1.0 + math.exp(-logit))


def trusted_cosine(features: MatchFeatures) -> float:
    return features.trust * features.meaning


def relevance(features: MatchFeatures, best_cosine: float, narrow: float = 0.0) -> float:
    """The calibrated relevance of one candidate, given the highest trusted cosine among its query's
    candidates and the request's ``narrowness``."""
    return calibrated(match_score(features), best_cosine, features.fit, narrow, features.quantity_missing,
                      word_coverage=features.word_coverage, query_cjk=features.query_cjk,
                      meaning_weight=features.meaning_weight, cosine=trusted_cosine(features),
                      value_share=features.query_value_share)
