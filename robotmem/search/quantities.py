"""Which kind of quantity a question asks for, and which kinds a memory states.

"How often are the suspension ropes replaced" asks for a time; a memory about the same
robot that states no time (only that a rope frayed) shares the question's topic, not its
answer. Bi-encoder cosines put such near-topic memories as high as real answers, so
relevance also asks whether a memory states a quantity of the kind asked for (question
answer-type matching, as in classic question answering). Hand-written because no offline
library classifies the answer type of English and Chinese questions; the lexicon covers
what robots measure (time, length, mass, volume, speed, force, sound, temperature, pressure,
concentration, frequency, rates such as seeds per second) and errs towards asking nothing: a question that states a value of the
kind itself ("fry oil at 175 °C") asks for none.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["asked_dimensions", "stated_dimensions"]

#: Units by the dimension they measure, as written right after a number ("12 N", "3.5h", "40 分钟").
_UNITS = {
    "time": r"ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|秒|分钟|小时|天|周|个月|年",
    "length": r"nm|µm|um|mm|cm|m|km|inch|inches|ft|feet|毫米|厘米|米|公里",
    "mass": r"mg|g|kg|t|tons?|tonnes?|lbs?|克|千克|公斤|吨",
    "volume": r"ml|l|litres?|liters?|gal|gallons?|m3|m³|毫升|升",
    "speed": r"m/s|mm/s|cm/s|km/h|kmh|mph|knots?|kn|deg/s|°/s|rpm|米/秒|公里/小时",
    "force": r"n|kn|newtons?|牛",
    "torque": r"nm|n·m|n\.m|n-m",
    "sound": r"db|dba|db\(a\)|分贝",
    "temperature": r"°c|℃|c|°f|k|度",
    "pressure": r"pa|kpa|mpa|bar|mbar|psi|mmhg|帕",
    "electric": r"v|mv|kv|a|ma|w|kw|mah|ah|wh|kwh",
    "concentration": r"ppm|ppb|%|percent",
    "frequency": r"hz|khz|mhz|ghz",
    "angle": r"deg|degrees?|°|rad",
}
#: Units written as words, which may follow the number after one more word ("600 operating hours").
_WORD_UNITS = {
    "time": r"seconds?|minutes?|hours?|days?|weeks?|months?|years?|cycles?",
    "length": r"millimetres?|millimeters?|centimetres?|centimeters?|metres?|meters?|kilometres?|kilometers?",
    "mass": r"grams?|kilograms?|tonnes?|tons?|pounds?",
    "volume": r"litres?|liters?|gallons?",
    "sound": r"decibels?",
    "temperature": r"degrees?",
}
_NUMBER = r"[-+±]?\d+(?:[.,]\d+)?"
_STATED = {dim: re.compile(rf"{_NUMBER}\s*(?:{units})(?![a-z])"
                           + (rf"|{_NUMBER}\s+(?:[a-z-]+\s+)?(?:{_WORD_UNITS[dim]})\b" if dim in _WORD_UNITS else ""),
                           re.IGNORECASE) for dim, units in _UNITS.items()}
# A rate: so many per unit of time ("40 picks a minute", "3,000 seeds/s", "每小时 120 盘").
_STATED["rate"] = re.compile(
    rf"{_NUMBER}\s*(?:[a-z-]+\s*){{0,2}}(?:per\s|an?\s|/)\s*(?:s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|shifts?)\b"
    r"|每(?:小时|分钟|秒|天)[^\d]{0,6}\d|\d[\d,.]*\s*\S{0,4}/(?:小时|分钟|秒|天)", re.IGNORECASE)

#: Words that ask for a quantity of a dimension (English as whole words, Chinese as written).
_CUES = {
    # "How long" asks for a time ("how long the drawers stay unlocked", "how long to bake"), except
    # in "how long is/are/was/were ...", which may ask for a length: that asks nothing.
    "time": ["how long(?! (?:is|are|was|were)\\b)", "interval", "duration", "lifetime", "life ?span",
             "how often", "cycle time", "多久", "间隔", "寿命", "多长时间", "周期"],
    # Not "distance": robots complain about one ("the distance estimate is off") more than they ask for it.
    "length": ["how (?:high|deep|far|tall|wide)", "highest", "deepest", "farthest", "furthest", "tallest",
               "height", "depth", "width", "clearance", "高度", "深度", "距离", "宽度", "多高", "多远"],
    "mass": ["how heavy", "heaviest", "weight", "weighs?", "mass", "payload", "重量", "多重", "载重"],
    "volume": ["capacity", "volume of", "tank size", "容量", "容积", "用水量"],
    "speed": ["how fast", "fastest", "speed", "velocity", "速度", "多快"],
    # Not a bare "force": "the hold-down force was too low" is a complaint, not a question.
    "force": ["(?:how much|what|which|maximum|max|minimum|rated) force", "tension", "thrust", "拉力", "张力", "推力"],
    "frequency": ["frequency", "频率"],
    # Narrow on purpose: "after an hour the battery died" asks for no rate.
    "rate": [r"how (?:many|much)\b.{0,60}\b(?:per|an?|each|every) (?:second|minute|hour|day|shift)", "throughput",
             "每(?:小时|分钟|秒|天).{0,6}多少", "多少.{0,6}每(?:小时|分钟|秒|天)"],
    "sound": ["noise", "loud", "loudness", "sound level", "decibels?", "噪音", "噪声", "分贝"],
    "temperature": ["temperature", "how hot", "how cold", "温度"],
    "pressure": ["pressure", "压力(?!表)", "气压"],
    "concentration": ["concentration", "ppm", "浓度", "含量"],
}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ASKED = {dim: re.compile("|".join(cue if _CJK.search(cue) else rf"\b(?:{cue})\b" for cue in cues), re.IGNORECASE)
          for dim, cues in _CUES.items()}


@lru_cache(maxsize=1024)
def asked_dimensions(question: str) -> frozenset[str]:
    """The kinds of quantity the question asks for without stating a value of that kind itself."""
    return frozenset(dim for dim, cue in _ASKED.items() if cue.search(question) and not _STATED[dim].search(question))


def stated_dimensions(text: str) -> frozenset[str]:
    """The kinds of quantity the text states a value of (a number with its unit)."""
    return frozenset(dim for dim, stated in _STATED.items() if stated.search(text))
