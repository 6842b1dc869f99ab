"""The gate in front of the shared pool, chosen by `gate.name`: what decides which new pairs become
memories. Every gate takes candidates and returns one `Decision` each, so the loop asks no gate
what kind it is.

- rubric: an LLM grades the pair against its rubric (ms.scorer);
- utility: the pair is admitted when it helps its nearest memories' answers as an example (ms.utility);
- both: the rubric first, then utility on what the rubric admits (utility alone cannot tell an
  on-style answer to the wrong question from a right one; DESIGN.md section 6);
- all, random: admission controls that judge nothing (ms.controls).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ms.controls import AllGate, MatchedRandomGate, RandomGate, matched_gate
from ms.scorer import Decision, Scorer
from ms.config import GATES, GateConfig
from ms.utility import Candidate, Utility, UtilityMeter


class RubricGate:
    def __init__(self, scorer: Scorer, rubric_of: Callable[[str], str]):
        self.scorer, self.rubric_of = scorer, rubric_of

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        return self.scorer.score([(c.agent, self.rubric_of(c.agent), c.question, c.answer) for c in candidates])


def utility_verdict(utility: Utility, threshold: float) -> tuple[bool, str]:
    """Admitted or not, and why. A scope with nothing to probe admits: no memory is there to hurt."""
    if utility.u is None:
        return True, "utility unmeasured: no memory in scope to probe with"
    if utility.u > threshold:
        return True, f"utility {utility.u:+.4f} > threshold {threshold:g}"
    return False, f"utility {utility.u:+.4f} <= threshold {threshold:g}"


class UtilityGate:
    def __init__(self, meter: UtilityMeter, threshold: float):
        self.meter, self.threshold = meter, threshold

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        out = []
        for c, utility in zip(candidates, self.meter.measure(candidates)):
            accepted, reason = utility_verdict(utility, self.threshold)
            out.append(Decision(agent=c.agent, question=c.question, answer=c.answer, score=None, accepted=accepted,
                                reason=reason, attempts=0, raw="", read="utility", utility=utility.as_dict()))
        return out


class BothGate:
    """Rubric, then utility on the pairs the rubric admitted; a pair needs both."""

    def __init__(self, rubric: RubricGate, meter: UtilityMeter, threshold: float):
        self.rubric, self.meter, self.threshold = rubric, meter, threshold

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        decisions = self.rubric.judge(candidates)
        passed = [i for i, d in enumerate(decisions) if d.accepted]
        for i, utility in zip(passed, self.meter.measure([candidates[i] for i in passed])):
            accepted, reason = utility_verdict(utility, self.threshold)
            decisions[i] = replace(decisions[i], accepted=accepted, reason=f"{decisions[i].reason}; {reason}",
                                   utility=utility.as_dict())
        return decisions


Gate = RubricGate | UtilityGate | BothGate | AllGate | RandomGate | MatchedRandomGate


def build_gate(cfg: GateConfig, scorer: Scorer, rubric_of: Callable[[str], str],
               meter: Callable[[], UtilityMeter], seed: int = 0) -> Gate:
    """`meter` is called only for the gates that measure utility; `seed` draws the random gate's coins."""
    if cfg.name == "rubric":
        return RubricGate(scorer, rubric_of)
    if cfg.name == "utility":
        return UtilityGate(meter(), cfg.utility_threshold)
    if cfg.name == "both":
        return BothGate(RubricGate(scorer, rubric_of), meter(), cfg.utility_threshold)
    if cfg.name == "all":
        return AllGate()
    if cfg.name == "random":
        return MatchedRandomGate(cfg.match, seed) if cfg.match else RandomGate(cfg.rate, seed)
    raise ValueError(f"unknown gate '{cfg.name}'; choose one of {', '.join(GATES)}")


def gate_record(gate) -> dict:
    """The gate's settings as metrics.json's run record keeps them: nothing for the rubric, so rubric
    runs stay one condition with runs recorded before other gates existed."""
    if gate.name == "rubric":
        return {}
    if gate.name in ("utility", "both"):
        return {"gate": gate.name, "utility_threshold": gate.utility_threshold, "utility_probes": gate.probes}
    if gate.name == "random":
        return {"gate": gate.name, **({"match": gate.match, "matched_gate": matched_gate(gate.match)}
                                      if gate.match else {"rate": gate.rate})}
    return {"gate": gate.name}
