"""When are two texts saying the same thing? The text half of the merge rule.

Two facts are *near-duplicates* when their embedding cosine reaches
``merge_cosine`` OR the Jaccard similarity of their word sets reaches
``merge_text_similarity`` -- and, in both cases, their *guards* agree:

* the numbers in the texts (a multiset, ``5`` equal to ``5.0``), because a merge keeps
  one text and must never lose a number ("lidar sees an obstacle at 1.5 m" vs "at 2.5 m":
  cosine 0.97). Every run of digits counts, wherever it stands: inside a word
  (``turtlebot3``, ``v0.5``, CJK text without spaces), with several separators
  (``1.5.3``, ``192.168.1.10``, compared as written), with a thousands separator
  (``1,000`` is not ``1``), after a Unicode minus (``−5`` is ``-5``);
* the negation words ("use a slow approach for the mug" vs "do not use ...": cosine 0.98),
  and the Chinese negations (不, 没, 无, 未, ...);
* outcome and contrast words (succeeded/failed, left/right, open/closed, increased/decreased,
  ...), compared by their Snowball stem, so every inflection counts; a word with a negating
  prefix (un-, dis-, non-: unsafe, unstable, disabled); the Chinese direction, state and
  outcome characters (左/右, 上/下, 开/关, 成功/失败, ...); and single-letter labels ("bin A"
  vs "bin B"). Sentence embeddings place such pairs close together ("grip force 5N
  succeeded on the mug" vs "... failed on the mug": 0.95).

The guards are deliberately coarse: they may keep two true duplicates apart (a missed
merge costs one extra row), never the reverse (a wrong merge loses knowledge).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from ..context import nfkc_fold
from ..search.stems import is_stemmable, word_stem
from .sized_cache import cache_by_length

__all__ = ["CJK_CONTRAST", "CONTRAST_WORDS", "NEGATIONS", "TextSignature", "jaccard", "signature"]

_WORD_RE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+(?:[.,]\d+)*", re.UNICODE)

#: A run of digits with inner separators: "5", "12,5", "1,000", "1.5.3", "192.168.1.10".
_DIGITS_RE = re.compile(r"\d+(?:[.,]\d+)*")

#: Scripts written without spaces between words: a letter of theirs is not part of an
#: identifier (抓取力5牛 holds the number 5, not a word "抓取力5牛").
_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
#: A word character that can prefix a number inside an identifier (v0.5, x2, A3, force_5).
_IDENT_CHAR_RE = re.compile(f"[^\\W\\d{_CJK}]")

#: Runs of superscript and of subscript digits and signs, which NFKC writes as plain ones: glued to
#: the number before them (10⁶ would be 106, 10⁻³ 10-3).
_SCRIPT_RE = re.compile("[\u2070\u00b9\u00b2\u00b3\u2074-\u207b]+|[\u2080-\u208b]+")


def _spell_scripts(text: str) -> str:
    """Superscripts as an exponent and subscripts as an index, written out: ``10⁶`` as ``10^6``
    (the numbers 10 and 6, as a text that writes it so), ``H₂O`` as ``H_2O``."""
    return _SCRIPT_RE.sub(lambda m: ("_" if m.group() >= "\u2080" else "^") + m.group(), text)


#: Minus signs that NFKC leaves alone, read as ASCII "-": U+2212 minus, figure dash, en dash,
#: heavy minus, modifier minus.
_MINUS = str.maketrans({"\u2212": "-", "\u2012": "-", "\u2013": "-", "\u2796": "-", "\u02d7": "-"})

#: Words that flip a statement. "n't" forms are matched as whole words after folding.
NEGATIONS = frozenset({
    "not", "no", "never", "none", "nor", "neither", "without", "cannot", "can't", "don't", "doesn't",
    "didn't", "won't", "isn't", "aren't", "wasn't", "weren't", "shouldn't", "mustn't", "avoid", "unable",
})

#: Outcome and direction/state words whose swap keeps the embedding close but the meaning opposite.
#: Compared by Snowball stem, so "increased", "increases" and "increasing" are all "increase".
#: Two texts must contain exactly the same set of these (and of NEGATIONS) to merge.
CONTRAST_WORDS = frozenset({
    # outcome
    "success", "successful", "successfully", "succeed", "succeeded", "succeeds", "works", "worked",
    "fail", "failed", "fails", "failure", "failing", "broke", "broken", "dropped", "slipped", "slips",
    "stuck", "missed", "correct", "incorrect", "wrong", "valid", "invalid", "better", "worse",
    # direction and position
    "left", "right", "up", "down", "above", "below", "front", "back", "behind", "inside", "outside",
    "north", "south", "east", "west", "forward", "backward", "clockwise", "counterclockwise",
    "anticlockwise", "top", "bottom", "upper", "inner", "outer", "over", "under", "near", "far",
    "inward", "outward", "upward", "downward", "toward", "away", "horizontal", "vertical", "push", "pull",
    # state and degree
    "open", "opened", "closed", "close", "on", "off", "high", "low", "higher", "lower", "fast", "slow",
    "faster", "slower", "slowly", "quickly", "quick", "gently", "firmly", "more", "less", "increase",
    "decrease", "min", "max", "minimum", "maximum",
    "before", "after", "early", "late", "hot", "cold", "wet", "dry", "full", "empty", "heavy", "light",
    "too", "enough", "raise", "reduce", "enable", "disable", "activate", "deactivate", "active",
    "inactive", "start", "stop", "lock", "unlock", "tight", "tighter", "tightest", "loose", "looser",
    "loosest", "tighten", "loosen", "strong", "stronger", "weak", "weaker", "hard", "harder", "soft",
    "softer", "large", "larger", "small", "smaller", "big", "bigger", "long", "longer", "short",
    "shorter", "wide", "wider", "narrow", "narrower", "thick", "thin", "sharp", "blunt", "rough",
    "smooth", "clean", "dirty", "bright", "dark", "loud", "quiet", "safe", "safer", "dangerous",
    "risky", "stable", "steady", "shaky", "secure", "accurate", "inaccurate", "precise", "imprecise",
    "possible", "impossible", "sufficient", "insufficient", "complete", "incomplete", "consistent",
    "inconsistent", "regular", "irregular", "relevant", "irrelevant", "visible", "invisible",
    "balanced", "imbalanced", "proper", "improper", "mobile", "immobile", "always", "sometimes",
    "rarely", "often", "true", "false", "allowed", "forbidden", "required", "optional",
})

#: Stems of CONTRAST_WORDS (Snowball: "increased" -> "increas"); short words compare as written.
_CONTRAST_STEMS = frozenset(word_stem(w) if is_stemmable(w) else w for w in CONTRAST_WORDS)

#: A word starting with one of these negates the rest ("unsafe", "unstable", "disconnected",
#: "nonslip") ...
_NEGATING_PREFIXES = ("un", "dis", "non")
#: ... unless it begins one of these, where the letters belong to the root (unit, under,
#: until, display, distance, discuss, discover, nonetheless).
_NOT_NEGATING = ("uni", "unde", "until", "unto", "dish", "disk", "discu", "discov", "discr", "discip", "dist",
                 "disp", "nonce", "nonet")

#: CJK characters of negation, direction, state, degree and outcome. Chinese has no spaces, so
#: a text's set of these is compared (a paraphrase that uses other characters for the same thing
#: is a missed merge, not a wrong one): 左/右, 上/下, 前/后, 内/外, 开/关, 高/低, 大/小, 多/少,
#: 快/慢, 增/减, 升/降, 松/紧, 轻/重, 冷/热, 干/湿, 满/空, 强/弱, 长/短, 远/近, 早/晚, 好/坏,
#: 对/错, 正/反, 顺/逆, 进/出, 成功/失败 (功/败/失), 安全/危险 (安/危/险), 稳, 滑 ...
CJK_CONTRAST = frozenset(
    "不没无未别勿非否莫"  # negation
    "左右上下前后内外里顶底东南西北横竖正反顺逆进出入"  # direction and position
    "开关启停禁锁高低大小多少快慢增减加降升松紧"  # state and degree
    "轻重冷热干湿满空强弱长短远近粗细厚薄软硬"
    "早晚先好坏对错真假最更太够"  # time, judgement, degree
    "成功败失胜误危险安稳准偏滑掉碎断卡"  # outcome
)

#: Common words whose CJK_CONTRAST character means nothing of the kind (关于 "about", 进行 "carry
#: out", 正在 "-ing", 安装 "install", 一下 "a bit", 马上 "at once"): removed before the scan, so
#: a paraphrase that adds one still merges.
_CJK_NEUTRAL = re.compile("关于|进行|正在|安装|重新|重复|准备|一下|马上|大约|大家|空间|长度|出现|加上|卡片|东西|真正|"
                          "不断|对于|对象|反应|然后|最终")


@dataclass(frozen=True)
class TextSignature:
    """What the text rule compares, computed once per memory."""

    words: frozenset[str]
    #: each number as (identifier letters written right before it, its value as written or
    #: normalised), sorted: a multiset
    numbers: tuple[tuple[str, str], ...]
    markers: frozenset[str]

    @property
    def guard(self) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
        """Texts can only merge when these agree exactly."""
        return self.numbers, self.markers


def _ascii_digits(run: str) -> str:
    return "".join(c if c in ".," else str(unicodedata.decimal(c)) for c in run)


def _value(run: str) -> str:
    """The comparison key of a digit run (without sign).

    One separator is a decimal point (``12,5`` = ``12.5``, ``5.0`` = ``5``) unless exactly
    three digits follow it after a group of one to three digits not starting with 0: then it
    may be a thousands separator (``1,000``, ``12,500``, ``1.500``) and the run is compared as
    written. So is a run with several separators (``1.5.3``, ``192.168.1.10``, ``1,000,000``).
    """
    separators = sum(c in ".," for c in run)
    if separators == 1:
        whole, fraction = re.split("[.,]", run)
        if not (len(fraction) == 3 and len(whole) <= 3 and whole[0] != "0"):
            return _decimal(f"{whole}.{fraction}")
    elif separators == 0:
        return _decimal(run)
    return "=" + run


def _decimal(text: str) -> str:
    try:
        value = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex only passes digits and one point
        return "=" + text
    return "0" if value == 0 else format(value.normalize(), "f")


def _numbers(folded: str) -> tuple[tuple[str, str], ...]:
    """Every digit run, keyed by the identifier letters written right before it (``v0.5``:
    ``("v", "0.5")``; ``turtlebot3``: ``("turtlebot", "3")``; CJK letters are not identifier
    letters) and its value; a sign only where a minus stands alone (``-5``, ``(−5``; not
    ``arm-2`` or the range ``5-10``)."""
    out = []
    for match in _DIGITS_RE.finditer(folded):
        start, run = match.start(), _ascii_digits(match.group())
        prefix_start = start
        while prefix_start > 0 and _IDENT_CHAR_RE.match(folded[prefix_start - 1]):
            prefix_start -= 1
        prefix = folded[prefix_start:start]
        before = folded[start - 1] if start > 0 else " "
        standalone = start < 2 or not _IDENT_CHAR_RE.match(folded[start - 2]) and not folded[start - 2].isdigit()
        sign = ""
        if not prefix and before == "." and standalone:
            run = "0." + run  # ".5" is 0.5
        elif not prefix and before == "-" and standalone:
            sign = "-"
        value = _value(run)
        out.append((prefix, value if value == "0" else sign + value))
    return tuple(sorted(out))


@lru_cache(maxsize=65_536)
def _word_marker(word: str) -> str | None:
    """The guard entry of one word, if it has one (cached: a store repeats its words)."""
    if word in NEGATIONS or word.endswith("n't"):
        return word
    stem = word_stem(word) if is_stemmable(word) else word
    if stem in _CONTRAST_STEMS:
        return stem
    if len(word) >= 5 and word.startswith(_NEGATING_PREFIXES) and not word.startswith(_NOT_NEGATING):
        return stem
    return None


#: A letter standing alone ("bin A", "zone b", "slot β"): a label, like a number.
_LETTER_RE = re.compile(r"(?<![\w'])[^\W\d_](?![\w'])")
_UPPER_A = re.compile(r"(?<!\w)A(?![\w'])")
_SENTENCE_START_A = re.compile(r"(?:^|[.!?:;]\s+|\n)\s*A(?![\w'])")


def _labels(nfkc: str, folded: str) -> set[str]:
    labels = {f"label:{c}" for c in _LETTER_RE.findall(folded) if c not in "ai" and not _CJK_RE.match(c)}
    # An upper-case "A" is a label ("bin A") unless it starts a sentence (the article).
    uppercase_a = len(_UPPER_A.findall(nfkc)) - len(_SENTENCE_START_A.findall(nfkc))
    if uppercase_a > 0:
        labels.add("label:a")
    return labels


#: What signature() keeps: 65,536 ordinary facts (about 145 MB), fewer long texts (a text's
#: signature is about 30 bytes a character: 200 MB at most).
SIGNATURE_CACHE_ENTRIES = 65_536
SIGNATURE_CACHE_CHARS = 6 << 20


@cache_by_length(SIGNATURE_CACHE_ENTRIES, SIGNATURE_CACHE_CHARS)
def signature(text: str) -> TextSignature:
    """Cached: the same earlier facts are compared at every end_session."""
    # NFKC of the whole text (not normalize_text, which keeps "½" and "①" as they are: here they are
    # the numbers they write), superscripts and subscripts spelled out first.
    spelled = _spell_scripts(text)
    nfkc = unicodedata.normalize("NFKC", spelled).translate(_MINUS)
    folded = nfkc_fold(spelled).replace("\u2019", "'").translate(_MINUS)
    runs = frozenset(_WORD_RE.findall(folded))
    markers = {m for m in map(_word_marker, runs) if m is not None}
    if _CJK_RE.search(folded):
        markers |= {f"cjk:{c}" for c in CJK_CONTRAST.intersection(_CJK_NEUTRAL.sub(" ", folded))}
    markers |= _labels(nfkc, folded)
    return TextSignature(words=frozenset(_compared_words(runs)), numbers=_numbers(folded), markers=frozenset(markers))


def _compared_words(runs: frozenset[str]) -> Iterator[str]:
    """The words Jaccard compares: a run holding CJK letters (a whole clause: CJK is written without
    spaces) as its overlapping character pairs, so that two Chinese notes share words in proportion
    to the text they share instead of only when they are the same sentence."""
    for run in runs:
        if _CJK_RE.search(run) is None:
            yield run
        elif len(run) == 1:
            yield run
        else:
            yield from (run[i : i + 2] for i in range(len(run) - 1))


def jaccard(a: TextSignature, b: TextSignature) -> float:
    if not a.words and not b.words:
        return 1.0
    union = len(a.words | b.words)
    return len(a.words & b.words) / union
