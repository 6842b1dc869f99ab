"""gate=utility: a pair joins the pool when it helps its nearest memories' answers as an example
(ms.gates.replay): u > gate.utility_threshold, in nats per token, over gate.probes probes; with
gate.decide_on=lower, the lower bound of u's interval over the probes must exceed it instead."""

import math
from dataclasses import asdict
from statistics import stdev
from typing import Iterator, Optional, Sequence

from ms.gates.base import Acceptance, Backbones, Gate, GateParts, GatePlan, decision, unable_to_score
from ms.gates.decisions import Decision
from ms.gates.replay import Candidate, Utility, UtilityMeter

# Nothing is known of utilities before they are measured: plan mode assumes half fall above the threshold.
UTILITY_ACCEPT = 0.5
UTILITY_SAID = (
    f"{UTILITY_ACCEPT:.2f} of measured pairs pass the utility gate (an even split around "
    f"gate.utility_threshold, assumed)"
)


def lower_bound(deltas: Sequence[float]) -> Optional[float]:
    """The lower bound gate.decide_on=lower holds against the threshold: the mean delta less one standard
    error (sample standard deviation / sqrt(m)) over the m probes; None with fewer than 2 (no spread).

    One standard error rather than the other bounds at hand: the bootstrap interval a Utility keeps
    (`lo`) cannot reach below the smallest delta, so with the default 3 probes it is hardly a bound; a
    one-sided 95% t bound at 3 probes lies 2.92 standard errors below the mean and refuses nearly every
    pair whose probes disagree at all. One standard error (the familiar one-standard-error rule;
    one-sided about 79% under normality at 3 probes, 84% at many) refuses a pair whose help rests on one
    probe against the others, is exact and deterministic, and needs no distribution's quantile."""
    if len(deltas) < 2:
        return None
    return sum(deltas) / len(deltas) - stdev(deltas) / math.sqrt(len(deltas))


def utility_verdict(utility: Utility, threshold: float, decide_on: str = "mean") -> tuple[bool, str]:
    """Admitted or not, and why. A scope with nothing to probe admits: no memory is there to hurt.
    `decide_on`: mean (u must exceed the threshold) or lower (u's lower bound must: `lower_bound`; with
    one probe there is no spread, and u is judged)."""
    if utility.u is None:
        return True, "utility unmeasured: no memory in scope to probe with"
    value, said = utility.u, f"utility {utility.u:+.4f}"
    if decide_on == "lower":
        bound = lower_bound(utility.deltas)
        if bound is None:
            said += " (one probe: no spread to bound, u judged)"
        else:
            value, said = bound, f"{said}, lower bound {bound:+.4f} (mean - 1 SE over {len(utility.deltas)} probes)"
    if value > threshold:
        return True, f"{said} > threshold {threshold:g}"
    return False, f"{said} <= threshold {threshold:g}"


def utility_record(cfg) -> dict:
    """decide_on only where it is lower, so mean runs stay one condition with runs made before it existed."""
    return {
        "gate": cfg.name,
        "utility_threshold": cfg.utility_threshold,
        "utility_probes": cfg.probes,
        **({"utility_decide_on": cfg.decide_on} if cfg.decide_on != "mean" else {}),
    }


class MeasuringGate(Gate):
    """What the gates that admit by measured utility (utility, both) share: the checks their settings
    need, the record they keep, and the verdict on each measurement."""

    measures_utility = True
    meter: UtilityMeter
    threshold: float
    decide_on: str

    def verdict(self, utility: Utility) -> tuple[bool, str]:
        return utility_verdict(utility, self.threshold, self.decide_on)

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        """Utility scores probe answers on each agent's backbone, so each must score given text."""
        yield from unable_to_score(cfg.name, backbones)

    @classmethod
    def record(cls, cfg) -> dict:
        return utility_record(cfg)


class UtilityGate(MeasuringGate):
    name = "utility"
    checked_by = ("utility",)
    check_missing = math.inf  # the utility gate admits a pair it could not measure (nothing to probe)

    def __init__(self, meter: UtilityMeter, threshold: float, decide_on: str = "mean"):
        self.meter, self.threshold, self.decide_on = meter, threshold, decide_on

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "UtilityGate":
        return cls(parts.meter(cfg.probes), cfg.utility_threshold, cfg.decide_on)

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        return [
            decision(c, *self.verdict(utility), "utility", asdict(utility))
            for c, utility in zip(candidates, self.meter.measure(candidates))
        ]

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        return Acceptance(UTILITY_ACCEPT, UTILITY_SAID)

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        # Exact while the seeds alone hold m probes in every scope (the planner knows the pool): then
        # each candidate has exactly m.
        plan.measure_utility(agent, in_scope, cfg.probes, 1.0, exact=True)

    @classmethod
    def check_scores(
        cls, decisions: Optional[Sequence[Decision]], utilities: Optional[Sequence[Utility]]
    ) -> list[Optional[float]]:
        return [m.u for m in utilities]
