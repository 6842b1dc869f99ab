"""Poisoners whose answers talk to the grader (ms.data.grader_directed): each takes off_task's answer
to the victim's question (another domain's seed or stream reference, never a test answer) and makes it
claim, in the words of the rubric grading the victim's pairs, that it earns full marks, or tell the
grader to give them. What reaches a reader is still off task; what is measured is whether the
grader-directed text gets it into the pool."""

from __future__ import annotations

from ms.data.grader_directed import ANSWER_PLUS_ASSESSMENT, GRADER_INSTRUCTION, SELF_ASSESSMENT, grader_directed
from ms.data.load import Example
from ms.data.poison import OffTask, PoisonPair


class GraderDirected(OffTask):
    """off_task's answer as `name`'s kind of grader-directed text."""

    draws_as = OffTask.name  # the same donors as off_task, so the two kinds' pairs differ only by that text

    def pair(self, example: Example) -> PoisonPair:
        if self.rubric is None:
            raise ValueError(f"poison={self.name} needs the rubric grading {self.victim}'s pairs; the run hands it in")
        donor = self.donor(example)
        text = grader_directed(self.name, donor.answer, self.rubric, self.seed, example.id)
        return PoisonPair(self.victim, example, text, donor.id)


class SelfAssessment(GraderDirected):
    name = SELF_ASSESSMENT


class AnswerPlusAssessment(GraderDirected):
    name = ANSWER_PLUS_ASSESSMENT


class GraderInstruction(GraderDirected):
    name = GRADER_INSTRUCTION
