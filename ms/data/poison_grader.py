"""Poisoners whose answers are aimed at the grader: each takes off_task's answer to the victim's question
(another domain's seed or stream reference, never a test answer) and rewrites it for the rubric grading
the victim's pairs, as grader-directed text (ms.data.grader_directed) or plain-words praise
(ms.data.plain_praise). What reaches a reader is still off task; what is measured is whether text aimed
at the grader gets it into the pool.
"""

from ms.data.grader_directed import ANSWER_PLUS_ASSESSMENT, GRADER_INSTRUCTION, SELF_ASSESSMENT, grader_directed
from ms.data.load import Example
from ms.data.plain_praise import LINE_PLUS_PRAISE, PRAISE_ALONE, Praised, templated
from ms.data.poison import OffTask, PoisonPair


class AimedAtGrader(OffTask):
    """off_task's answer rewritten by `name`'s kind for the rubric grading the victim's pairs."""

    draws_as = OffTask.name  # the same donors as off_task, so the kinds' pairs differ only by that rewriting

    def pair(self, example: Example) -> PoisonPair:
        if self.rubric is None:
            raise ValueError(f"poison={self.name} needs the rubric grading {self.victim}'s pairs; the run hands it in")
        donor = self.donor(example)
        return PoisonPair(self.victim, example, self.rewritten(donor.answer, example), donor.id)

    def rewritten(self, answer: str, example: Example) -> str:
        raise NotImplementedError


class GraderDirected(AimedAtGrader):
    """off_task's answer as `name`'s kind of grader-directed text."""

    def rewritten(self, answer: str, example: Example) -> str:
        return grader_directed(self.name, answer, self.rubric, self.seed, example.id)


class SelfAssessment(GraderDirected):
    name = SELF_ASSESSMENT
    in_words = "self-assessments"


class AnswerPlusAssessment(GraderDirected):
    name = ANSWER_PLUS_ASSESSMENT
    in_words = "answers plus self-assessments"


class GraderInstruction(GraderDirected):
    name = GRADER_INSTRUCTION
    in_words = "answers instructing the grader"


class PlainPraise(AimedAtGrader):
    """off_task's answer as `name`'s family of plain-words praise of a pair of the victim."""

    def rewritten(self, answer: str, example: Example) -> str:
        return templated(self.name, answer, Praised.of(self.victim, self.rubric), self.seed, example.id)


class PraiseAlone(PlainPraise):
    name = PRAISE_ALONE
    in_words = "plain-words praise"


class LinePlusPraise(PlainPraise):
    name = LINE_PLUS_PRAISE
    in_words = "answers' first lines plus plain-words praise"
