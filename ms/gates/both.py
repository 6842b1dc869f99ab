"""gate=both: the rubric first, then utility on the pairs the rubric admits; a pair needs both."""

from dataclasses import asdict, replace
from typing import Optional, Sequence

from ms.gates.base import Acceptance, Decisions, GateParts, GatePlan, Utilities
from ms.gates.decisions import Decision
from ms.gates.replay import Candidate, UtilityMeter
from ms.gates.rubric import RubricGate, rubric_acceptance
from ms.gates.utility import UTILITY_ACCEPT, UTILITY_SAID, MeasuringGate, UtilityGate


def both_order(admitted: Sequence[bool], u: Sequence[float]) -> list[float]:
    """`both` as a score: each pair's rank in the order (rubric admits, u), so a pair the rubric
    rejects ranks below every pair it admits, and u orders the pairs within each side."""
    keys = list(zip(admitted, u))
    rank = {key: float(i) for i, key in enumerate(sorted(set(keys)))}
    return [rank[key] for key in keys]


class BothGate(MeasuringGate):
    name = "both"
    checked_by = ("rubric", "utility")  # derived from the other two's measurements, never measured again
    check_missing = 0.0
    check_ranks = True

    def __init__(self, rubric: RubricGate, meter: UtilityMeter, threshold: float, decide_on: str = "mean"):
        self.rubric, self.meter, self.threshold, self.decide_on = rubric, meter, threshold, decide_on

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "BothGate":
        return cls(RubricGate.build(cfg, parts), parts.meter(cfg.probes), cfg.utility_threshold, cfg.decide_on)

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        decisions = self.rubric.judge(candidates)
        passed = [i for i, d in enumerate(decisions) if d.accepted]
        for i, utility in zip(passed, self.meter.measure([candidates[i] for i in passed])):
            accepted, reason = self.verdict(utility)
            decisions[i] = replace(
                decisions[i], accepted=accepted, reason=f"{decisions[i].reason}; {reason}", utility=asdict(utility)
            )
        return decisions

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        rubric, why = rubric_acceptance(plan.scorer.threshold)
        return Acceptance(rubric * UTILITY_ACCEPT, f"{why}; {UTILITY_SAID}")

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        plan.grade(agent, question, reply)
        # The utility calls follow the rubric's admissions, so they are estimated like the label calls.
        plan.measure_utility(agent, in_scope, cfg.probes, rubric_acceptance(plan.scorer.threshold)[0], exact=False)

    @classmethod
    def check_scores(cls, decisions: Decisions, utilities: Utilities) -> list[Optional[float]]:
        filled = [UtilityGate.check_missing if m.u is None else m.u for m in utilities]
        return both_order([d.accepted for d in decisions], filled)
