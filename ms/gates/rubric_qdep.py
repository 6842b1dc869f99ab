"""gate=rubric_qdep: the rubric first (ms.gates.scorer, its defence included), then the question-dependence
test (ms.gates.question_dependence) on the pairs the rubric admits; a pair needs both. The rubric can be
flattered by an answer that praises itself in plain words; the test reads no words, and an answer that
is no likelier after its own question than after others fails it whatever it says."""

from dataclasses import asdict, replace
from typing import Iterator, Optional, Sequence

from ms.gates.base import Acceptance, Backbones, Decisions, Gate, GateParts, GatePlan, Utilities, unable_to_score
from ms.gates.decisions import Decision
from ms.gates.question_dependence import ContrastTest, Dependence
from ms.gates.replay import Candidate
from ms.gates.rubric import RubricGate, rubric_acceptance

# Nothing is known of the test's verdicts before they are measured: plan mode assumes the rubric's
# admissions pass it (the test's passes are counted for all of them, so the calls are not undercounted).
QDEP_SAID = "every pair the rubric admits passes the question-dependence test (assumed)"


def defended(decision: Decision, measured: Dependence, field: str = "question_test") -> Decision:
    """The rubric's decision after the test: refused where the test fails, its measurement kept in `field`."""
    return replace(
        decision,
        accepted=decision.accepted and measured.passed,
        reason=f"{decision.reason}; {measured.why}",
        **{field: asdict(measured)},
    )


class RubricQdepGate(Gate):
    name = "rubric_qdep"
    # The gate check grades every pair and tests every pair; a pair's score is the rubric's where the test
    # passes and 0 where it fails, as the screen's rejections score 0 (ms.gates.scorer).
    checked_by = ("rubric", "question")
    check_missing = 0.0
    field = "question_test"  # where a decision keeps the test's measurement
    assumed = QDEP_SAID  # what plan mode assumes of the test's verdicts

    def __init__(self, rubric: RubricGate, test: ContrastTest):
        self.rubric, self.test = rubric, test

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "RubricQdepGate":
        return cls(RubricGate.build(cfg, parts), parts.question_test(cfg.others, cfg.margin, cfg.seed))

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        decisions = self.rubric.judge(candidates)
        passed = [i for i, d in enumerate(decisions) if d.accepted]
        measured = self.test.measure(
            [(candidates[i].agent, candidates[i].question, candidates[i].answer) for i in passed]
        )
        for i, m in zip(passed, measured):
            decisions[i] = defended(decisions[i], m, self.field)
        return decisions

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        """The test scores answers on each agent's backbone, so each must score given text."""
        yield from unable_to_score(cfg.name, backbones)

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        rate, why = rubric_acceptance(plan.scorer.threshold)
        return Acceptance(rate, f"{why}; {cls.assumed}")

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        plan.grade(agent, question, reply)
        # The test follows the rubric's admissions, so its passes are estimated like the utility gate's under both.
        plan.test_question(agent, reply, cfg.others, rubric_acceptance(plan.scorer.threshold)[0])

    @classmethod
    def record(cls, cfg) -> dict:
        return {
            "gate": cfg.name,
            "question_others": cfg.others,
            "question_margin": cfg.margin,
            "question_seed": cfg.seed,
        }

    @classmethod
    def check_scores(cls, decisions: Decisions, utilities: Utilities) -> list[Optional[float]]:
        return [d.score if (getattr(d, cls.field) or {}).get("passed") else 0.0 for d in decisions]
