"""Which kind of quantity a question asks for, and which kinds a memory states.

"How often are the suspension ropes replaced" asks for a time; a memory about the same
robot that states no time (only that a rope frayed) shares the question's topic, not its
answer. Bi-encoder cosines put such near-topic memories as high as real answers, so
relevance also asks whether a memory states a quantity of the kind asked for (question
answer-type matching, as in classic question answering). Hand-written because no offline
library classifies the answer type of English and Chinese questions; the lexicon covers
what robots measure (time, length, mass, volume, speed, force, sound, temperature, pressure,
concentration, frequency, electric quantities, area, cost, rates such as seeds per second) and errs towards asking nothing: a question that states a value of the
kind itself ("fry oil at 175 °C") asks for none.

A count is a kind of its own for each thing counted: "how many flasks fit in the incubator" asks
for ``count:flask``, which a memory states only with a number beside that thing ("20 flasks", "six
flasks"), not with a number of anything else ("the 1,008 spindles of a ring frame" states no
count of frames).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .stems import is_stemmable, word_stem

__all__ = ["asked_dimensions", "stated_counts", "stated_dimensions", "states_any", "states_unit", "states_unit_of",
           "states_value", "value_units"]

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
    # Amperes only as a capital A ("40 A", "16A"): in "gate 3 a little late" it is an article.
    "electric": r"v|mv|kv|(?-i:A)|ma|w|kw|mw|mah|ah|wh|kwh|瓦|千瓦|伏|度电",
    "area": r"m²|m2|km²|cm²|sq\.? ?m|ha|acres?|hectares?|亩|平方米|平米|公顷",
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
    "area": r"square (?:metres?|meters?|feet|foot|kilometres?|kilometers?)",
    "electric": r"watts?|kilowatts?|volts?|amps?|amperes?|kilowatt-hours?",
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
    "length": ["how (?:high|deep|far|tall|wide|thick)", "highest", "deepest", "farthest", "furthest", "tallest",
               "height", "depth", "width", "clearance", "diameter", "radius", "thickness",
               "高度", "深度", "距离", "宽度", "多高", "多远", "直径", "半径", "厚度", "多厚"],
    "mass": ["how heavy", "heaviest", "weight", "weighs?", "mass", "payload", "重量", "多重", "载重"],
    # Not a battery's capacity: that is a charge (electric).
    "volume": ["(?<!battery )capacity", "volume of", "tank size", "容量", "容积", "用水量"],
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
    "electric": ["power (?:consumption|draw|rating|use)", "how much (?:power|energy|electricity)", "wattage",
                 "voltage", "current draw", "battery capacity", "energy (?:use|consumption)", "功率", "电压", "耗电",
                 "用电量"],
    # Not a bare "area": "the loading area" is a place.
    "area": ["how much (?:floor |ground |land |surface )?area", "surface area", "floor area",
             "how many (?:square|hectares|acres)", "面积", "多少亩", "几亩", "多少平方"],
    # Not a bare "cost": "the fault cost us a shift" is a complaint.
    "cost": [r"(?:what|how much)\b.{0,60}\bcosts?", "price", "cost (?:of|per)", "多少钱", "价格", "费用", "成本"],
}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ASKED = {dim: re.compile("|".join(cue if _CJK.search(cue) else rf"\b(?:{cue})\b" for cue in cues), re.IGNORECASE)
          for dim, cues in _CUES.items()}


# Money: a currency sign before the number or a currency after it.
_STATED["cost"] = re.compile(
    rf"[$€£¥]\s?\d|{_NUMBER}\s*(?:k\s*)?(?:usd|eur|gbp|chf|cny|rmb|dollars?|euros?|cents?|元|美元|欧元|块钱)(?![a-z])",
    re.IGNORECASE)

#: "How many <things>" or "number of <things>": the thing counted is the last word of the phrase
#: (English noun phrases end in their head: "how many twistlock cones does the bin hold" counts cones).
_HOW_MANY = re.compile(r"\b(?:how many|number of)\s+((?:[a-z][a-z-]*\s*){1,4})", re.IGNORECASE)
#: Words that end the counted phrase ("how many flasks fit in ...", "how many frames can ...").
_PHRASE_END = frozenset(
    "a an the of in on at to for per from with by into onto each every one can could do does did is are was were "
    "will would should must may might has have had fit fits get gets go goes there it they we you that which".split())
_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
                 "hundred|hundreds|thousand|thousands|dozen|dozens|a pair of|a few|several")
#: A number (digits or words) and the words after it, one of which may be the thing it counts.
_COUNTED = re.compile(rf"(?:\d[\d,.]*|\b(?:{_NUMBER_WORDS}))\s+((?:[a-z][a-z-]*\s+){{0,2}}[a-z][a-z-]*)", re.IGNORECASE)
#: Chinese counts: 多少/几 + a measure word asks; a numeral + the same measure word states.
_MEASURE_WORDS = "个台只次张块件箱盘根片瓶袋包支辆头条层排套盒"
_CHINESE_COUNT_ASKED = re.compile(rf"(?:多少|几)([{_MEASURE_WORDS}])")
_CHINESE_COUNT_STATED = re.compile(rf"[\d一二三四五六七八九十百千万两]\s*([{_MEASURE_WORDS}])")


#: Any unit, longest first, for a number written with its unit ("40 A", "58 %", "0.6 mm/s").
_ANY_UNIT = "|".join(sorted({unit for units in _UNITS.values() for unit in units.split("|")}, key=len, reverse=True))
#: Written as the tokenizer writes numbers (robotmem.store.tokens): digits, with dots or commas between.
_VALUE_WITH_UNIT = re.compile(rf"(?<![\w.,])(\d+(?:[.,]\d+)*)\s*({_ANY_UNIT})(?![a-z0-9])", re.IGNORECASE)


def value_units(text: str) -> dict[str, str]:
    """Each number written with a unit right after it ("40 A", "58 %", "0.6 mm/s"), by the number as
    written, to that unit as written (the first when a number recurs)."""
    units: dict[str, str] = {}
    for match in _VALUE_WITH_UNIT.finditer(text):
        units.setdefault(match.group(1), match.group(2))
    return units


@lru_cache(maxsize=8192)
def _value_pattern(number: str, unit: str) -> re.Pattern[str]:
    # Amperes only as a capital A, as in _UNITS (value_units finds no other); every other unit in
    # any case ("58 %", "20 G").
    written = "(?-i:A)" if unit == "A" else re.escape(unit)
    return re.compile(rf"(?<![\w.,]){re.escape(number)}\s*{written}(?![a-z0-9])", re.IGNORECASE)


def states_value(text: str, number: str, unit: str) -> bool:
    """Whether the text gives ``number`` with ``unit`` ("45 A" does not state 40 A; "40 cm" does not)."""
    return _value_pattern(number, unit).search(text) is not None


@lru_cache(maxsize=8192)
def _number_pattern(number: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.,]){re.escape(number)}\s*(?:{_ANY_UNIT})(?![a-z0-9])", re.IGNORECASE)


def states_unit(text: str, unit: str) -> bool:
    """Whether the text gives some number with ``unit`` ("8 N·m" for N·m; "0.6 mm/s" is not mm)."""
    return any(written == unit if unit == "A" else written.lower() == unit.lower()
               for _, written in _VALUE_WITH_UNIT.findall(text))


def states_unit_of(text: str, number: str) -> bool:
    """Whether the text gives ``number`` with some unit ("a 40 cm box jump" for 40)."""
    return _number_pattern(number).search(text) is not None


@lru_cache(maxsize=1024)
def asked_dimensions(question: str) -> frozenset[str]:
    """The kinds of quantity the question asks for without stating a value of that kind itself."""
    asked = {dim for dim, cue in _ASKED.items() if cue.search(question) and not _STATED[dim].search(question)}
    if "rate" not in asked:  # "how many crates an hour" asks for a rate, not a count
        asked |= _asked_counts(question) - stated_counts(question)
    return frozenset(asked)


def _asked_counts(question: str) -> set[str]:
    counted: set[str] = set()
    for match in _HOW_MANY.finditer(question):
        words = []
        for word in match.group(1).lower().split():
            if word in _PHRASE_END:
                break
            words.append(word)
        if words and is_stemmable(words[-1]):
            counted.add("count:" + word_stem(words[-1]))
    counted |= {"count:" + m.group(1) for m in _CHINESE_COUNT_ASKED.finditer(question)}
    return counted


@lru_cache(maxsize=4096)
def stated_counts(text: str) -> frozenset[str]:
    """``count:<stem>`` for every thing the text gives a number of ("20 flasks", "six frames", "3 台")."""
    counted = {"count:" + word_stem(word.lower()) for m in _COUNTED.finditer(text)
               for word in m.group(1).split() if is_stemmable(word) and word.lower() not in _PHRASE_END}
    counted |= {"count:" + m.group(1) for m in _CHINESE_COUNT_STATED.finditer(text)}
    return frozenset(counted)


def stated_dimensions(text: str) -> frozenset[str]:
    """The kinds of quantity the text states a value of (a number with its unit)."""
    return frozenset(dim for dim, stated in _STATED.items() if stated.search(text))


def states_any(asked: frozenset[str], text: str) -> bool:
    """Whether the text states a value of any kind in ``asked`` (asked_dimensions): a measured one, or
    a number of a thing counted."""
    if any(not dim.startswith("count:") and _STATED[dim].search(text) for dim in asked):
        return True
    return any(dim.startswith("count:") for dim in asked) and bool(asked & stated_counts(text))
