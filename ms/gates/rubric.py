"""gate=rubric (the default): an LLM grades each pair against its rubric (ms.gates.scorer); a pair scoring
at least scorer.threshold joins the pool."""

from typing import Callable, Optional, Sequence

from ms.gates.base import Acceptance, Decisions, Gate, GateParts, GatePlan, Utilities
from ms.gates.replay import Candidate
from ms.gates.scorer import Decision, Scorer


def rubric_acceptance(threshold: float) -> tuple[float, str]:
    """The share of pairs assumed to pass the rubric at `threshold`, and the assumption in words."""
    threshold = float(threshold)
    if threshold == 0:
        return 1.0, "every pair the grader scores passes the rubric: scorer.threshold=0"
    rate = 1 - threshold / 100
    return rate, (
        f"{rate:.2f} of pairs pass the rubric, assumed: as if scores were uniform on 0-100 "
        f"(scorer.threshold={threshold:g})"
    )


class RubricGate(Gate):
    name = "rubric"
    checked_by = ("rubric",)
    check_missing = 0.0  # the rubric rejects a pair it read no score for

    def __init__(self, scorer: Scorer, rubric_of: Callable[[str], str]):
        self.scorer, self.rubric_of = scorer, rubric_of

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "RubricGate":
        return cls(parts.scorer, parts.rubric_of)

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        return self.scorer.score([(c.agent, self.rubric_of(c.agent), c.question, c.answer) for c in candidates])

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        return Acceptance(*rubric_acceptance(plan.scorer.threshold))

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        plan.grade(agent, question, reply)

    @classmethod
    def record(cls, cfg) -> dict:
        """Nothing: rubric runs stay one condition with runs recorded before other gates existed."""
        return {}

    @classmethod
    def check_scores(cls, decisions: Decisions, utilities: Utilities) -> list[Optional[float]]:
        return [d.score for d in decisions]
