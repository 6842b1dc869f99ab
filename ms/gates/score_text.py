"""Reading a score out of free text: the 0-100 score a grader's reply states (`parse_score`), where the
backbone's scores come back as text rather than as token probabilities."""

import re

from ms.config.schema import RUBRIC_TOTAL

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_VALUES = {**{w: i for i, w in enumerate(_UNITS)}, **{w: 20 + 10 * i for i, w in enumerate(_TENS)}}
_HUNDRED = r"(?:(?:one|a)[\s-]+)?hundred"
# Alternatives are tried in order at each position, so "one hundred" wins over "one".
_WORD_NUMBER = re.compile(
    rf"\b(?:{_HUNDRED}|(?:{'|'.join(_TENS)})(?:[\s-]+(?:{'|'.join(_UNITS[1:10])}))?|(?:{'|'.join(_UNITS)}))\b",
    re.IGNORECASE,
)
# A sign only counts at the start of a number, so the "-90" of "85-90" is not read as negative.
_DIGIT_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?!\w)")
_DENOMINATOR_AFTER = re.compile(rf"\s*(?:/|out\s+of)\s*(100|10|{_HUNDRED}|ten)\b", re.IGNORECASE)
_DENOMINATOR_BEFORE = re.compile(r"(?:/|out\s+of)\s*$", re.IGNORECASE)
_LABEL_BEFORE = re.compile(
    r"\b(?:score[sd]?|scoring|rating|rated?|grade[sd]?|give|giving|gave|assign(?:ed)?)\b[^\d.!?\n]{0,20}$",
    re.IGNORECASE,
)


def _word_value(words: str) -> float:
    parts = re.split(r"[\s-]+", words.lower())
    if parts[-1] == "hundred":
        return 100.0
    return float(sum(_WORD_VALUES[p] for p in parts))


def parse_score(text: str | None) -> int | None:
    """The 0-100 score a grader's reply states, or None if it states none.

    When several numbers appear, one written as a fraction ("85/100", "8 out of 10", scaled to
    100) wins, then one right after a label such as "score:" or "I'd give it", then the first
    number in digits, then the first in words. The denominator is never itself a candidate.
    A chosen number outside 0-100 means a confused grader, so it reads as no score.
    """
    if not text:
        return None
    candidates = []  # (rank, position, value)
    numbers = [(m, float(m.group())) for m in _DIGIT_NUMBER.finditer(text)]
    words = [(m, _word_value(m.group())) for m in _WORD_NUMBER.finditer(text)]
    for rank_if_plain, found in ((2, numbers), (3, words)):
        for match, value in found:
            before = text[max(0, match.start() - 40) : match.start()]
            if _DENOMINATOR_BEFORE.search(before):
                continue
            fraction = _DENOMINATOR_AFTER.match(text, match.end())
            if fraction:
                denominator = fraction.group(1).lower()
                rank, value = 0, value * (10 if denominator in ("10", "ten") else 1)
            elif _LABEL_BEFORE.search(before):
                rank = 1
            else:
                rank = rank_if_plain
            candidates.append((rank, match.start(), value))
    if not candidates:
        return None
    _, _, value = min(candidates, key=lambda c: c[:2])
    return int(round(value)) if 0 <= value <= RUBRIC_TOTAL else None
