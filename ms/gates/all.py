"""gate=all, an admission control: every candidate joins the pool (what a pool grows to with no gate
at all); no grader is asked."""

from typing import Sequence

from ms.gates.base import Acceptance, Gate, GateParts, GatePlan, decision
from ms.gates.decisions import Decision
from ms.gates.replay import Candidate


class AllGate(Gate):
    name = "all"

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "AllGate":
        return cls()

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        return [decision(c, True, "gate=all admits every candidate", "all") for c in candidates]

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        return Acceptance(1.0, "every stream pair admitted: gate=all", assumed=False)
