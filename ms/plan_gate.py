"""Plan mode's view of the gate (ms.gate): the share of stream pairs it is assumed to admit, and the
calls it makes for each stream question, under `score` (the rubric's grading) and `utility` (two
scored prompts per probe: as retrieval gives it, and with the candidate in place of its last shot).

Exact: score calls where the grader reads probabilities, and utility calls under gate=utility while
every scope's seeds alone hold m probes (then each candidate has exactly m). Under gate=both the
utility calls follow the rubric's admissions, so they are estimated like the label calls.
"""

from __future__ import annotations

from typing import Optional

from omegaconf import DictConfig

from ms.backbones import can
from ms.controls import matched_counts
from ms.plan_measured import Measured
from ms.plan_tokens import PER_MESSAGE, tokens
from ms.schedule import stream_k
from ms.scorer import SYSTEM_PROMPT, USER_PROMPT, Rubric, rubric_for

# Nothing is known of utilities before they are measured: the plan assumes half fall above the threshold.
UTILITY_ACCEPT = 0.5


def rubric_acceptance(cfg: DictConfig) -> tuple[float, str]:
    threshold = float(cfg.scorer.threshold)
    if threshold == 0:
        return 1.0, "every pair the grader scores passes the rubric: scorer.threshold=0"
    rate = 1 - threshold / 100
    return rate, (f"{rate:.2f} of pairs pass the rubric, assumed: as if scores were uniform on 0-100 "
                  f"(scorer.threshold={threshold:g})")


def acceptance(cfg: DictConfig, accept: Optional[float | Measured]) -> tuple[float, str]:
    """The share of stream pairs the gate is assumed to admit, and the assumption in words.
    `accept`: a rate given by plan_accept, or measured in a finished run (plan_from)."""
    if isinstance(accept, Measured):
        return accept.rate, accept.said
    if accept is not None:
        return float(accept), f"{accept:.2f} of stream pairs admitted, as given by plan_accept"
    rubric, why = rubric_acceptance(cfg)
    utility = (f"{UTILITY_ACCEPT:.2f} of measured pairs pass the utility gate (an even split around "
               f"gate.utility_threshold, assumed)")
    if cfg.gate.name == "all":
        return 1.0, "every stream pair admitted: gate=all"
    if cfg.gate.name == "random" and cfg.gate.match:
        counts = [n for agents in matched_counts(cfg.gate.match).values() for n in agents.values()]
        rate = sum(a for _, a in counts) / max(sum(n for n, _ in counts), 1)
        return rate, f"{rate:.2f} of stream pairs admitted, as the matched run {cfg.gate.match} admitted"
    if cfg.gate.name == "random":
        return float(cfg.gate.rate), f"{cfg.gate.rate:.2f} of stream pairs admitted: gate.rate"
    rate = {"rubric": rubric, "utility": UTILITY_ACCEPT, "both": rubric * UTILITY_ACCEPT}[cfg.gate.name]
    said = {"rubric": why, "utility": utility, "both": f"{why}; {utility}"}[cfg.gate.name]
    # An assumption, and said to be one: the committed offline runs at threshold 15 admitted 0.4 to
    # 0.65 where the uniform assumption gives 0.85. A finished run's measured rate is better.
    return rate, (f"{rate:.2f} of stream pairs admitted: {said}; +plan_from=RUN_DIR uses the rate a finished "
                  f"run measured, +plan_accept=RATE sets another")


def reads_probabilities(cfg: DictConfig) -> bool:
    """Whether the grader reads scores from probabilities, as the Scorer decides: unless scorer.read=text
    or its backbone has none."""
    return cfg.scorer.read != "text" and can(cfg, cfg.scorer.backbone, "reads_probabilities")


def grading_tokens(rubric: Rubric, agent: str) -> float:
    """Tokens of the grader's prompt for a pair of `agent` under `rubric`, less the pair's question and answer."""
    return (tokens(SYSTEM_PROMPT) + tokens(USER_PROMPT.format(
        title=rubric.title, total=rubric.total, criteria=rubric.render(), agent=agent, question="", answer=""))
        + 2 * PER_MESSAGE)


def plan_gate(planner, agent: str, question: float, reply: float, in_scope: float) -> None:
    """The gate's calls for one stream pair of `agent` (`question` and `reply` in tokens), with
    `in_scope` memories in its scope when it is judged. `planner` is ms.plan's planner."""
    cfg = planner.cfg
    if cfg.gate.name in ("rubric", "both"):
        probabilities = planner.scorer_reads_probabilities()
        grading = grading_tokens(rubric_for(planner.agents[agent], cfg.pool.mode), agent) + question + reply
        planner.row("score", cfg.scorer.backbone).add(
            1, grading, 0.0 if probabilities else cfg.scorer.max_new_tokens,
            exact=probabilities, cached_exact=not cfg.use_cache)
    if cfg.gate.name in ("utility", "both"):
        scope = planner.scope[agent]
        probes = min(cfg.gate.probes, in_scope)
        shots = min(max(1, stream_k(cfg)), max(in_scope - 1, 0))
        memory = planner.memory_tokens[scope]
        # A probe's prompt: the template with its shots and question, then its answer to score.
        prompt = (planner.system(agent) + tokens(planner.template.with_examples.format(examples="", query=""))
                  + shots * memory + memory + PER_MESSAGE)
        passes = 1.0 if cfg.gate.name == "utility" else rubric_acceptance(cfg)[0]
        exact = (cfg.gate.name == "utility" and planner.seeds[scope] >= cfg.gate.probes
                 and cfg.memory.policy == "plain")
        planner.row("utility", planner.agents[agent].backbone).add(
            passes * 2 * probes, prompt, 0.0, exact=exact, cached_exact=not cfg.use_cache)
