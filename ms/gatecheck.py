"""Gate sanity (`ms-data gate-check`): can the grader tell good pairs from broken ones?

Each agent's seed pairs are graded as they are and as three corrupted copies: the answer swapped
for another agent's answer, the answer cut to its first line, and an empty-looking answer. The
per-agent ROC AUC (good above corrupted) with a 95% bootstrap CI says whether a backbone can grade
at all: 0.5 is chance, 1.0 a perfect separation.
"""

from __future__ import annotations

import csv
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from ms.data import Example
from ms.scorer import Decision, Scorer, load_rubric
from ms.stats import CONFIDENCE, RESAMPLES, SEED

CORRUPTIONS = ("swapped", "truncated", "empty")
EMPTY_ANSWER = "N/A"


def truncated(answer: str) -> str:
    """The first line; an answer of one line keeps its first third of words, so it still changes."""
    lines = answer.strip().splitlines()
    if len(lines) > 1:
        return lines[0]
    words = answer.split()
    return " ".join(words[:max(1, len(words) // 3)])


def corrupted_copies(seeds: dict[str, list[Example]]) -> list[tuple[str, str, Example, str]]:
    """(agent, kind, example, answer) for every seed pair as it is and in each corruption. The
    swapped answer comes from the next agent in the list, so it is always another agent's."""
    agents = list(seeds)
    out = []
    for i, agent in enumerate(agents):
        donor = seeds[agents[(i + 1) % len(agents)]] if len(agents) > 1 else []
        for j, example in enumerate(seeds[agent]):
            out.append((agent, "good", example, example.answer))
            if donor:
                out.append((agent, "swapped", example, donor[j % len(donor)].answer))
            out.append((agent, "truncated", example, truncated(example.answer)))
            out.append((agent, "empty", example, EMPTY_ANSWER))
    return out


def auc(good: Sequence[float], bad: Sequence[float], axis: int = -1) -> np.ndarray:
    """P(a good pair outscores a corrupted one), ties counting half: the Mann-Whitney U over n1*n2."""
    good, bad = np.asarray(good, float), np.asarray(bad, float)
    u = stats.mannwhitneyu(good, bad, axis=axis, alternative="two-sided").statistic
    return u / (good.shape[axis] * bad.shape[axis])


@dataclass
class AgentAUC:
    agent: str
    auc: float
    lo: float | None
    hi: float | None
    n_good: int
    n_corrupted: int
    unscored: int
    mean_good: float | None
    mean_by_kind: dict[str, float | None]


def auc_with_ci(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float | None, float | None]:
    point = float(auc(good, bad))
    if len(good) < 2 or len(bad) < 2:
        return point, None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a perfect separation makes every resample 1.0: BCa degenerates
        ci = stats.bootstrap((np.asarray(good, float), np.asarray(bad, float)), auc, confidence_level=CONFIDENCE,
                             n_resamples=RESAMPLES, method="percentile", random_state=SEED,
                             vectorized=True).confidence_interval
    return point, float(ci.low), float(ci.high)


def summarize(decisions: Sequence[tuple[str, str, Decision]]) -> list[AgentAUC]:
    """decisions: (agent, kind, decision). An unscored pair counts as score 0: the gate rejects it."""
    def score(d: Decision) -> float:
        return 0.0 if d.score is None else float(d.score)

    out = []
    for agent in dict.fromkeys(a for a, _, _ in decisions):
        by_kind: dict[str, list[float]] = {}
        for a, kind, d in decisions:
            if a == agent:
                by_kind.setdefault(kind, []).append(score(d))
        good = by_kind.get("good", [])
        bad = [v for kind in CORRUPTIONS for v in by_kind.get(kind, [])]
        point, lo, hi = auc_with_ci(good, bad)
        unscored = sum(d.score is None for a, _, d in decisions if a == agent)
        out.append(AgentAUC(agent, point, lo, hi, len(good), len(bad), unscored,
                            float(np.mean(good)) if good else None,
                            {kind: float(np.mean(by_kind[kind])) for kind in CORRUPTIONS if kind in by_kind}))
    return out


def run_gate_check(scorer: Scorer, seeds: dict[str, list[Example]], rubric_of: Mapping[str, str],
                   out: Path, batch: int = 16) -> list[AgentAUC]:
    """`rubric_of`: agent -> the rubric its pairs are graded with (ms.scorer.rubric_ref)."""
    from tqdm.auto import tqdm

    jobs = corrupted_copies(seeds)
    decisions = []
    for start in tqdm(range(0, len(jobs), batch), desc="gate-check", unit="batch"):
        part = jobs[start:start + batch]
        graded = scorer.score([(agent, load_rubric(rubric_of[agent]).name, e.question, answer)
                               for agent, _, e, answer in part])
        decisions += [(agent, kind, d) for (agent, kind, _, _), d in zip(part, graded)]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "gate_check_decisions.jsonl").open("w", encoding="utf-8") as f:
        for (agent, kind, d), (_, _, e, _) in zip(decisions, jobs):
            f.write(json.dumps({"kind": kind, "seed_id": e.id, **d.as_dict()}, ensure_ascii=False) + "\n")
    results = summarize(decisions)
    with (out / "gate_check.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["agent", "auc", "ci_lo", "ci_hi", "n_good", "n_corrupted", "unscored", "mean_good",
                         *(f"mean_{k}" for k in CORRUPTIONS)])
        for r in results:
            writer.writerow([r.agent, r.auc, r.lo, r.hi, r.n_good, r.n_corrupted, r.unscored, r.mean_good,
                             *(r.mean_by_kind.get(k) for k in CORRUPTIONS)])
    return results


def format_results(results: Sequence[AgentAUC], header: str) -> str:
    def num(v):
        return "–" if v is None else f"{v:.1f}"

    lines = [header, f"{'agent':<11} {'AUC':>5} {'95% CI':>13} {'n good/bad':>10} {'unscored':>8} | mean score: "
             f"{'good':>5}" + "".join(f" {k:>9}" for k in CORRUPTIONS)]
    for r in results:
        ci = f"[{r.lo:.2f}, {r.hi:.2f}]" if r.lo is not None else "–"
        lines.append(f"{r.agent:<11} {r.auc:5.2f} {ci:>13} {f'{r.n_good}/{r.n_corrupted}':>10} {r.unscored:>8} | "
                     f"{'':>12}{num(r.mean_good):>5}" + "".join(f" {num(r.mean_by_kind.get(k)):>9}" for k in CORRUPTIONS))
    return "\n".join(lines)

