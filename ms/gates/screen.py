"""Sentences of an answer that speak to its grader rather than to its reader, found by a rule one can
state and check (scorer.defence=strip and reject, ms.gates.scorer):

A sentence is grader-directed when it
  (a) names the grading itself: a rubric, a criterion (not "your criteria": the asker's), a grader, an
      evaluator, assessor or examiner, full marks; or
  (b) claims a score: a score word (score, points or N points, marks, rating, grade) beside a reference to the
      answer itself (this answer, this response, this pair, the answer above), a fraction of a
      maximum ("95/100", "20 out of 20"), or the name of a criterion of the rubric grading the pair; or
  (c) addresses whoever scores it: "whoever grades this", "you evaluate", "score it", "rate this".

A pair shown to readers as an example has no reason to do either; an answer that does is asking to be
admitted, not teaching anything. The rule reads words, never a particular wording, so the gate check's
own templates (ms.data.grader_directed) are only one of the phrasings it catches.
"""

import re
from typing import Iterable

# "your criteria" is the asker's wishes, not a grader's: an answer may well say it fits them.
_GRADING = re.compile(
    r"\b(rubric|(?<!your )criteri(?:on|a)|grader|grading|evaluator|assessor|examiner|full marks)\b", re.IGNORECASE
)
# "point" alone is everyday ("point of view"); points, or a number of points, is a score.
_SCORE_WORD = re.compile(r"\b(score[sd]?|points|\d+\s*points?|marks?|rating|rated|grade[sd]?)\b", re.IGNORECASE)
_SELF = re.compile(
    r"\b(this|the above|my|our)\s+(answer|response|reply|pair|submission|text|entry|output)\b|"
    r"\bthe (answer|response) above\b",
    re.IGNORECASE,
)
_ADDRESS = re.compile(
    r"\b(whoever|anyone who|you)\s+(grade|score|rate|evaluate|judge|review)s?\b|"
    r"\b(grade|score|rate|mark)\s+(it|this|me)\b",
    re.IGNORECASE,
)
_FRACTION = re.compile(r"\b\d+\s*(?:/|out of)\s*\d+\b", re.IGNORECASE)
# Sentence ends: after . ! ? or a line break; a bracketed note counts as its own sentence.
_SENTENCE = re.compile(r"[^.!?\n\[\]]+(?:[.!?]+|$)|\[[^\]]*\]", re.MULTILINE)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def grader_directed(sentence: str, criteria: Iterable[str] = ()) -> bool:
    """Whether `sentence` is grader-directed by the rule above; `criteria`: the grading rubric's
    criterion names (they count beside a score word: alone, a name such as "Form" is an everyday word)."""
    if _GRADING.search(sentence) or _ADDRESS.search(sentence):
        return True
    names = any(re.search(rf"\b{re.escape(name)}\b", sentence, re.IGNORECASE) for name in criteria if name)
    return bool(_SCORE_WORD.search(sentence) and (_SELF.search(sentence) or _FRACTION.search(sentence) or names))


def flagged(answer: str, criteria: Iterable[str] = ()) -> list[str]:
    """The answer's grader-directed sentences, in order."""
    criteria = list(criteria)
    return [s for s in sentences(answer) if grader_directed(s, criteria)]


def stripped(answer: str, criteria: Iterable[str] = ()) -> str:
    """The answer without its grader-directed sentences; line breaks of the rest are kept."""
    criteria = list(criteria)
    kept_lines = []
    for line in answer.splitlines():
        parts = [s for s in sentences(line) if not grader_directed(s, criteria)]
        if parts or not line.strip():
            kept_lines.append(" ".join(parts))
    return "\n".join(kept_lines).strip()
