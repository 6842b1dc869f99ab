"""Gate sanity (`ms-data gate-check`): can a gate tell good pairs from broken ones?

Each agent's seed pairs are judged as they are and as four corrupted copies: the answer swapped for
another agent's answer, the answer of another of the same agent's questions (on style, off topic:
what a measure of usefulness as an example can miss), the answer cut to its first line, and an
empty-looking answer. Where the rubric that grades the pair is handed in, three grader-directed copies
too (ms.data.grader_directed): the answer replaced by a claim that it meets the rubric, its first line
followed by such a claim, and the real answer followed by an instruction to the grader. They are pooled
apart ("grader-directed": the first two; the instruction, which keeps the real answer, alone), never in
`all`, whose meaning stays that of the four ordinary corruptions. Each gate gives every pair a score: the rubric's grade, the utility gate's u,
and for `both` the pair's place in the order (rubric admits, u). The per-agent ROC AUC (good above
corrupted) with a 95% bootstrap CI, over all corruptions and per corruption, says whether a gate
separates them: 0.5 is chance, 1.0 a perfect separation.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

import numpy as np
from scipy import stats

from ms.common.errors import UserError
from ms.common.stats import CONFIDENCE, RESAMPLES, SEED
from ms.config.parts import GATES
from ms.data import Example
from ms.data.grader_directed import (
    ANSWER_PLUS_ASSESSMENT,
    SELF_ASSESSMENT,
    RubricText,
    grader_directed,
)
from ms.data.grader_directed import KINDS as GRADER_DIRECTED
from ms.gates.replay import Utility
from ms.gates.scorer import Decision, Scorer, rubric_for

GOOD = "good"
CORRUPTIONS = ("swapped", "other_question", "truncated", "empty")
ALL = "all"  # every ordinary corruption together
GRADER_POOL = "grader-directed"  # the two that replace the answer's substance with a claim about it
GRADER_POOLED = (SELF_ASSESSMENT, ANSWER_PLUS_ASSESSMENT)
KINDS = (*CORRUPTIONS, *GRADER_DIRECTED)
EMPTY_ANSWER = "N/A"


def checked_gates() -> list[str]:
    """The gates the gate check measures (ms.config.parts.GATES): those whose class names the
    measurements it takes (`Gate.checked_by`); the admission controls judge nothing to check."""
    return [name for name, cls in GATES.loaded().items() if cls.checked_by]


def missing_score(gate: str) -> float:
    """Which score a pair gets where its gate read none (`Gate.check_missing`): the rubric rejects an
    unscored pair, and the utility gate admits one it could not measure (its scope held nothing to probe)."""
    return GATES.load(gate).check_missing


class Job(NamedTuple):
    """One pair to judge: a seed pair's question with its own answer (`kind` good) or a corrupted one."""

    agent: str
    kind: str
    example: Example
    answer: str


def truncated(answer: str) -> str:
    """The first line; an answer of one line keeps its first third of words, so it still changes."""
    lines = answer.strip().splitlines()
    if len(lines) > 1:
        return lines[0]
    words = answer.split()
    return " ".join(words[: max(1, len(words) // 3)])


def corrupted_copies(
    seeds: dict[str, list[Example]], rubrics: Optional[dict[str, RubricText]] = None, seed: int = 0
) -> list[Job]:
    """Every seed pair as it is and in each corruption. The swapped answer comes from the next agent
    in the list, so it is always another agent's; the other question's answer from the agent's next
    seed pair, so it is always the same agent's (an agent with one pair has none to give). With
    `rubrics` (agent -> the rubric grading its pairs), the grader-directed copies too, their wording
    drawn by `seed` and the pair."""
    agents = list(seeds)
    out = []
    for i, agent in enumerate(agents):
        own = seeds[agent]
        donor = seeds[agents[(i + 1) % len(agents)]] if len(agents) > 1 else []
        for j, example in enumerate(own):
            out.append(Job(agent, GOOD, example, example.answer))
            if donor:
                out.append(Job(agent, "swapped", example, donor[j % len(donor)].answer))
            if len(own) > 1:
                out.append(Job(agent, "other_question", example, own[(j + 1) % len(own)].answer))
            out.append(Job(agent, "truncated", example, truncated(example.answer)))
            out.append(Job(agent, "empty", example, EMPTY_ANSWER))
            if rubrics:
                out += [
                    Job(agent, kind, example, grader_directed(kind, example.answer, rubrics[agent], seed, example.id))
                    for kind in GRADER_DIRECTED
                ]
    return out


class Checked(NamedTuple):
    """What `ms-data gate-check` judges and on which backbones, from the config alone (its plan too)."""

    agents: dict  # name -> ms.agents.Agent
    splits: dict  # agent -> its data splits
    jobs: list[Job]
    rubric: bool  # whether the rubric grades the jobs (a gate checked by it: --gate rubric or both)
    utility: bool  # whether the utility gate measures them (--gate utility or both)
    backbone_of: dict[str, str]  # agent -> the backbone it answers (and its utility is scored) on


def what_to_check(cfg, per_agent: int, gates: Sequence[str]) -> Checked:
    """Up to `per_agent` seed pairs per agent and their corrupted copies, and which measurements the
    gates take of them (`Gate.checked_by`)."""
    from ms.agents import agents_from
    from ms.data import load_splits
    from ms.llm.backbones import Backbones

    agents = agents_from(cfg.agents)
    splits = load_splits(cfg.data, agents)
    measured = {m for gate in gates for m in GATES.load(gate).checked_by}
    rubric, utility = "rubric" in measured, "utility" in measured
    # The grader-directed copies speak the rubric that grades the pair (the Single pool's, there).
    rubrics = {agent: rubric_for(agents[agent], cfg.pool.mode).quoted() for agent in splits}
    jobs = corrupted_copies({agent: parts.seed[:per_agent] for agent, parts in splits.items()}, rubrics, cfg.seed)
    backbones = Backbones(cfg.backbone)
    backbone_of = {agent: backbones.resolve(agents[agent].backbone) for agent in splits}
    for agent, name in backbone_of.items():
        if utility and not backbones.can(name, "scores_text"):
            raise UserError(
                f"--gate {','.join(gates)}: backbone '{name}' of agent {agent} cannot score given "
                f"text; use an hf backbone, or backbone.prompt_logprobs=echo"
            )
    return Checked(agents, splits, jobs, rubric, utility, backbone_of)


def grade(scorer: Scorer, jobs: Sequence[Job], rubric_of: dict[str, str], batch: int = 16) -> list[Decision]:
    """The rubric gate's decision on every job. `rubric_of`: agent -> the rubric's name."""
    from tqdm.auto import tqdm

    decisions: list[Decision] = []
    for start in tqdm(range(0, len(jobs), batch), desc="gate-check rubric", unit="batch"):
        decisions += scorer.score(
            [(j.agent, rubric_of[j.agent], j.example.question, j.answer) for j in jobs[start : start + batch]]
        )
    return decisions


def gate_scores(
    gates: Sequence[str], decisions: Optional[Sequence[Decision]], utilities: Optional[Sequence[Utility]]
) -> dict[str, list[Optional[float]]]:
    """gate -> each job's score (None where the gate read none), from the measurements taken once
    (`Gate.check_scores`): `both` is derived from the other two, never measured again."""
    return {gate: GATES.load(gate).check_scores(decisions, utilities) for gate in gates}


def auc(good: Sequence[float], bad: Sequence[float], axis: int = -1) -> np.ndarray:
    """P(a good pair outscores a corrupted one), ties counting half: the Mann-Whitney U over n1*n2."""
    good, bad = np.asarray(good, float), np.asarray(bad, float)
    u = stats.mannwhitneyu(good, bad, axis=axis, alternative="two-sided").statistic
    return u / (good.shape[axis] * bad.shape[axis])


def auc_with_ci(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float | None, float | None]:
    point = float(auc(good, bad))
    if len(good) < 2 or len(bad) < 2:
        return point, None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a perfect separation makes every resample 1.0: BCa degenerates
        ci = stats.bootstrap(
            (np.asarray(good, float), np.asarray(bad, float)),
            auc,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method="percentile",
            random_state=SEED,
            vectorized=True,
        ).confidence_interval
    return point, float(ci.low), float(ci.high)


@dataclass
class Separation:
    """Good against one corruption (or all of them) for one agent under one gate."""

    auc: float
    lo: float | None
    hi: float | None
    n_good: int
    n_corrupted: int
    mean_corrupted: float | None

    @property
    def near_chance(self) -> bool:
        """The CI covers 0.5 (no CI: too few pairs to tell)."""
        return self.lo is None or self.lo <= 0.5 <= self.hi


@dataclass
class AgentAUC:
    agent: str
    missing: int  # pairs the gate read no score for, counted as its missing_score
    mean_good: float | None
    by_kind: dict[str, Separation]  # ALL and each corruption present

    @property
    def overall(self) -> Separation:
        return self.by_kind[ALL]


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def kind_groups(by_kind: dict[str, list]) -> dict[str, list]:
    """ALL (the ordinary corruptions), each of them, and where present the grader-directed pool and kinds."""
    groups = {
        ALL: [v for kind in CORRUPTIONS for v in by_kind.get(kind, [])],
        **{kind: by_kind[kind] for kind in CORRUPTIONS if kind in by_kind},
    }
    if any(kind in by_kind for kind in GRADER_POOLED):
        groups[GRADER_POOL] = [v for kind in GRADER_POOLED for v in by_kind.get(kind, [])]
    groups.update({kind: by_kind[kind] for kind in GRADER_DIRECTED if kind in by_kind})
    return groups


def summarize(rows: Sequence[tuple[str, str, Optional[float]]], missing_as: float = 0.0) -> list[AgentAUC]:
    """rows: (agent, kind, score); a missing score counts as `missing_as`."""
    out = []
    for agent in dict.fromkeys(a for a, _, _ in rows):
        by_kind: dict[str, list[float]] = {}
        for a, kind, score in rows:
            if a == agent:
                by_kind.setdefault(kind, []).append(missing_as if score is None else float(score))
        good = by_kind.get(GOOD, [])
        groups = kind_groups(by_kind)
        separations = {
            kind: Separation(*auc_with_ci(good, bad), len(good), len(bad), _mean(bad)) for kind, bad in groups.items()
        }
        out.append(AgentAUC(agent, sum(s is None for a, _, s in rows if a == agent), _mean(good), separations))
    return out


def write_results(
    out,
    jobs: Sequence[Job],
    decisions: Optional[Sequence[Decision]],
    utilities: Optional[Sequence[Utility]],
    results: dict[str, list[AgentAUC]],
) -> None:
    """gate_check_decisions.jsonl (every pair, each measurement) and gate_check.csv (one row per
    gate, agent and corruption) in folder `out`."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "gate_check_decisions.jsonl").open("w", encoding="utf-8") as f:
        for i, job in enumerate(jobs):
            row = {
                "agent": job.agent,
                "kind": job.kind,
                "seed_id": job.example.id,
                "question": job.example.question,
                "answer": job.answer,
            }
            if decisions is not None:
                row.update(decisions[i].as_dict())
            if utilities is not None:
                row["utility"] = utilities[i].as_dict()
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / "gate_check.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "gate",
                "agent",
                "corruption",
                "auc",
                "ci_lo",
                "ci_hi",
                "n_good",
                "n_corrupted",
                "missing",
                "mean_good",
                "mean_corrupted",
            ]
        )
        for gate, agents in results.items():
            for r in agents:
                for kind, s in r.by_kind.items():
                    writer.writerow(
                        [
                            gate,
                            r.agent,
                            kind,
                            s.auc,
                            s.lo,
                            s.hi,
                            s.n_good,
                            s.n_corrupted,
                            r.missing,
                            r.mean_good,
                            s.mean_corrupted,
                        ]
                    )


def mean_auc(agents: Sequence[AgentAUC], kind: str) -> float | None:
    """The mean over agents of the AUC against `kind` (ALL or a corruption)."""
    values = [r.by_kind[kind].auc for r in agents if kind in r.by_kind]
    return float(np.mean(values)) if values else None


def format_results(results: dict[str, list[AgentAUC]], header: str) -> str:
    """A summary (mean AUC over agents per gate and corruption, and the agents whose CI covers 0.5),
    then one table per gate: each agent's AUC with its CI against all corruptions and each one, and
    the mean score of each kind (not for a gate whose score is a rank, as `both`'s)."""

    def cell(s: Separation | None) -> str:
        if s is None:
            return f"{'–':>18}"
        ci = f"[{s.lo:.2f}, {s.hi:.2f}]" if s.lo is not None else "–"
        return f"{s.auc:5.2f} {ci:>12}"

    def num(v: float | None) -> str:
        return f"{'–':>9}" if v is None else f"{v:9.3g}"

    present = {k for agents in results.values() for r in agents for k in r.by_kind}
    kinds = tuple(k for k in (ALL, *CORRUPTIONS, GRADER_POOL, *GRADER_DIRECTED) if k in present)
    corruptions = [k for k in KINDS if k in present]
    lines = [
        header,
        "",
        "Mean AUC over agents (good vs corrupted); near chance: agents whose 95% CI covers 0.5",
        f"{'gate':<8}" + "".join(f" {k:>14}" for k in kinds) + "  near chance (all corruptions)",
    ]
    for gate, agents in results.items():
        means = [mean_auc(agents, k) for k in kinds]
        near = [r.agent for r in agents if r.overall.near_chance]
        lines.append(
            f"{gate:<8}"
            + "".join(f" {'–' if m is None else f'{m:.2f}':>14}" for m in means)
            + f"  {', '.join(near) or 'none'}"
        )
    for gate, agents in results.items():
        lines += [
            "",
            f"gate {gate}: AUC [95% CI] of good vs corrupted",
            f"{'agent':<11} {'n good/bad':>10} {'missing':>7}" + "".join(f" {k:>18}" for k in kinds),
        ]
        for r in agents:
            lines.append(
                f"{r.agent:<11} {f'{r.overall.n_good}/{r.overall.n_corrupted}':>10} {r.missing:>7}"
                + "".join(f" {cell(r.by_kind.get(k))}" for k in kinds)
            )
        if not GATES.load(gate).check_ranks:  # a rank has no mean worth showing
            lines += [
                f"gate {gate}: mean score",
                f"{'agent':<11} {GOOD:>9}" + "".join(f" {k:>14}" for k in corruptions),
            ]
            for r in agents:
                lines.append(
                    f"{r.agent:<11} {num(r.mean_good)}"
                    + "".join(
                        f" {num(r.by_kind[k].mean_corrupted if k in r.by_kind else None):>14}" for k in corruptions
                    )
                )
    return "\n".join(lines)


def youden_threshold(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float]:
    """(t, J): the threshold with the largest Youden's J = P(good admitted) - P(corrupted admitted)
    for a gate that admits when score > t, trying 0 and every score seen (closest to 0 on a tie)."""
    good, bad = np.asarray(good, float), np.asarray(bad, float)
    tried = sorted({0.0, *good[np.isfinite(good)], *bad[np.isfinite(bad)]}, key=abs)
    j = [float((good > t).mean() - (bad > t).mean()) for t in tried]
    best = int(np.argmax(j))
    return tried[best], j[best]


def threshold_report(kinds: Sequence[str], u: Sequence[Optional[float]]) -> str:
    """What `gate.utility_threshold` would admit, pooled over agents: the spread of u of good pairs,
    and the share of each kind admitted at 0 and at the Youden threshold."""
    by_kind: dict[str, list[float]] = {}
    for kind, value in zip(kinds, u):
        if value is not None:
            by_kind.setdefault(kind, []).append(value)
    good = by_kind.get(GOOD, [])
    bad = [v for kind in CORRUPTIONS for v in by_kind.get(kind, [])]
    if not good or not bad:
        return ""
    t, j = youden_threshold(good, bad)
    q = np.quantile(good, [0, 0.25, 0.5, 0.75, 1])
    lines = [
        "",
        "utility threshold, pooled over agents (admit when u > t)",
        "u of good pairs (nats/token): min {:+.4f}, q25 {:+.4f}, median {:+.4f}, q75 {:+.4f}, max {:+.4f}".format(*q),
        f"{'t':>9} {'J':>6}" + "".join(f" {k:>14}" for k in (GOOD, *KINDS)) + "   (share admitted)",
    ]
    for threshold, label in ((0.0, None), (t, f"J = {j:.2f} best")):
        shares = [np.mean(np.asarray(by_kind[k]) > threshold) if k in by_kind else None for k in (GOOD, *KINDS)]
        jt = float(np.mean(np.asarray(good) > threshold) - np.mean(np.asarray(bad) > threshold))
        lines.append(
            f"{threshold:+9.4f} {jt:6.2f}"
            + "".join(f" {'–' if s is None else f'{s:.2f}':>14}" for s in shares)
            + (f"   {label}" if label else "")
        )
    return "\n".join(lines)
