"""gate=utility: a pair joins the pool when it helps its nearest memories' answers as an example
(ms.gates.replay): u > gate.utility_threshold, in nats per token, over gate.probes probes."""

from __future__ import annotations

import math
from typing import Iterator, Optional, Sequence

from ms.gates.base import Acceptance, Backbones, Gate, GateParts, GatePlan
from ms.gates.replay import Candidate, Utility, UtilityMeter
from ms.gates.scorer import Decision

# Nothing is known of utilities before they are measured: plan mode assumes half fall above the threshold.
UTILITY_ACCEPT = 0.5
UTILITY_SAID = (
    f"{UTILITY_ACCEPT:.2f} of measured pairs pass the utility gate (an even split around "
    f"gate.utility_threshold, assumed)"
)


def utility_verdict(utility: Utility, threshold: float) -> tuple[bool, str]:
    """Admitted or not, and why. A scope with nothing to probe admits: no memory is there to hurt."""
    if utility.u is None:
        return True, "utility unmeasured: no memory in scope to probe with"
    if utility.u > threshold:
        return True, f"utility {utility.u:+.4f} > threshold {threshold:g}"
    return False, f"utility {utility.u:+.4f} <= threshold {threshold:g}"


def measuring_problems(cfg, backbones: Backbones) -> Iterator[str]:
    """A gate that measures utility scores probe answers on each agent's backbone, so each must score given text."""
    for name, provider, whose in backbones.unable("scores_text"):
        yield (
            f"invalid setting gate={cfg.name}: backbone '{name}' (provider {provider}) cannot score given "
            f"text{whose}; use a backbone that can (hf), or backbone.prompt_logprobs=echo "
            f"on a server that returns prompt log-probs"
        )


def utility_record(cfg) -> dict:
    return {"gate": cfg.name, "utility_threshold": cfg.utility_threshold, "utility_probes": cfg.probes}


class UtilityGate(Gate):
    name = "utility"
    measures_utility = True
    checked_by = ("utility",)
    check_missing = math.inf  # the utility gate admits a pair it could not measure (nothing to probe)

    def __init__(self, meter: UtilityMeter, threshold: float):
        self.meter, self.threshold = meter, threshold

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "UtilityGate":
        return cls(parts.meter(), cfg.utility_threshold)

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        out = []
        for c, utility in zip(candidates, self.meter.measure(candidates)):
            accepted, reason = utility_verdict(utility, self.threshold)
            out.append(
                Decision(
                    agent=c.agent,
                    question=c.question,
                    answer=c.answer,
                    score=None,
                    accepted=accepted,
                    reason=reason,
                    attempts=0,
                    raw="",
                    read="utility",
                    utility=utility.as_dict(),
                )
            )
        return out

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        return measuring_problems(cfg, backbones)

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        return Acceptance(UTILITY_ACCEPT, UTILITY_SAID)

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        # Exact while the seeds alone hold m probes in every scope (the planner knows the pool): then
        # each candidate has exactly m.
        plan.measure_utility(agent, in_scope, cfg.probes, 1.0, exact=True)

    @classmethod
    def record(cls, cfg) -> dict:
        return utility_record(cfg)

    @classmethod
    def check_scores(
        cls, decisions: Optional[Sequence[Decision]], utilities: Optional[Sequence[Utility]]
    ) -> list[Optional[float]]:
        return [m.u for m in utilities]
