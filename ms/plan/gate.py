"""Plan mode's view of the gate (ms.gates): the share of stream pairs it is assumed to admit, and the
calls it makes for each stream question, as the gate's class says (`Gate.acceptance`,
`Gate.planned_calls`), under `score` (the rubric's grading) and `utility` (two scored prompts per
probe: as retrieval gives it, and with the candidate in place of its last shot). The planner
(ms.plan.planner) turns what a gate asks for into calls and tokens with the helpers here.

Exact: score calls where the grader reads probabilities, and utility calls a gate calls exact while
every scope's seeds alone hold m probes (then each candidate has exactly m). Under gate=both the
utility calls follow the rubric's admissions, so they are estimated like the label calls.
"""

from typing import Optional

from ms.config.parts import GATES
from ms.gates.scorer import SYSTEM_PROMPT, USER_PROMPT, Rubric
from ms.llm.backbones import Backbones
from ms.plan.measured import Measured
from ms.plan.tokens import PER_MESSAGE, tokens


def acceptance(gate_cfg, plan, accept: Optional[float | Measured]) -> tuple[float, str]:
    """The share of stream pairs the gate (`gate_cfg`, its section) is assumed to admit, and the
    assumption in words. `accept`: a rate given by plan_accept, or measured in a finished run
    (plan_from); `plan`: the planner, which the gate's class asks (ms.gates.base.GatePlan)."""
    if isinstance(accept, Measured):
        return accept.rate, accept.said
    if accept is not None:
        return float(accept), f"{accept:.2f} of stream pairs admitted, as given by plan_accept"
    rate, said, assumed = GATES.load(gate_cfg.name).acceptance(gate_cfg, plan)
    if not assumed:
        return rate, said
    # An assumption, and said to be one: the committed offline runs at threshold 15 admitted 0.4 to
    # 0.65 where the uniform assumption gives 0.85. A finished run's measured rate is better.
    return rate, (
        f"{rate:.2f} of stream pairs admitted: {said}; +plan_from=RUN_DIR uses the rate a finished "
        f"run measured, +plan_accept=RATE sets another"
    )


def reads_probabilities(scorer_cfg, backbones: Backbones) -> bool:
    """Whether the grader (`scorer_cfg`, the scorer's section) reads scores from probabilities, as the
    Scorer decides: unless scorer.read=text or its backbone has none."""
    return scorer_cfg.read != "text" and backbones.can(scorer_cfg.backbone, "reads_probabilities")


def grading_tokens(rubric: Rubric, agent: str) -> float:
    """Tokens of the grader's prompt for a pair of `agent` under `rubric`, less the pair's question and answer."""
    user = USER_PROMPT.format(
        title=rubric.title, total=rubric.total, criteria=rubric.render(), agent=agent, question="", answer=""
    )
    return tokens(SYSTEM_PROMPT) + tokens(user) + 2 * PER_MESSAGE
