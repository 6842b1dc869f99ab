"""The learned access rule against `open` (access.md): each run under a learned rule (run.access.learned)
is scored only on the half of the test questions its rule was not learned on, beside the open
Single-pool run it was learned from and that run's Domain-pool twin, paired question by question.
Where the rules of both halves ran, their held-out halves together cover every test question once
(cross-fitted: each question scored under a rule that never saw it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Optional, Sequence

from ms.report.access_rule import CREDIT, question_halves
from ms.report.runs import Item, Run, metric_label
from ms.common.stats import Estimate, mean_ci

FILE = "access.md"


def learned_of(run: Run) -> Optional[dict]:
    """The `learned` record of the rule the run retrieved under; None for open or hand-written rules."""
    learned = (run.fields.get("access") or {}).get("learned")
    return learned if isinstance(learned, dict) and "scored_on" in learned else None


def _twin(runs: Sequence[Run], run: Run, **changed) -> Optional[Run]:
    """The run whose fields equal `run`'s but for its access rule (open) and `changed`; the newest."""
    want = {**{k: v for k, v in run.fields.items() if k not in ("access", "seed")}, **changed}
    found = [r for r in runs if not r.fields.get("access") and r.data == run.data
             and {k: v for k, v in r.fields.items() if k != "seed"} == want]
    return max(found, key=lambda r: r.finished) if found else None


@dataclass
class Comparison:
    label: str  # which learned run(s), and the questions scored
    values: dict[str, dict[Item, float]]  # condition -> the scored questions' values

    def estimate(self, condition: str) -> Estimate:
        return mean_ci(list(self.values[condition].values()))

    def difference(self, a: str, b: str) -> Estimate:
        shared = self.values[a].keys() & self.values[b].keys()
        return mean_ci([self.values[a][q] - self.values[b][q] for q in sorted(shared)])


LEARNED, OPEN, DOMAIN = "learned rule, Single-pool", "open, Single-pool", "open, Domain-pool"


def comparisons(runs: Sequence[Run], metric: str) -> list[Comparison]:
    """One comparison per learned run on its held-out half, and a cross-fitted one per pair of
    learned runs of complementary halves over the same open run."""
    out, by_open = [], {}
    for run in runs:
        learned = learned_of(run)
        if learned is None or run.predictions is None:
            continue
        single = _twin(runs, run)
        if single is None:
            continue
        domain = _twin(runs, run, pool="domain")
        fill = run.last_fill
        mine = run.values(metric, fill) or {}
        halves = question_halves(mine)
        scored = {q for q, h in halves.items() if h == learned["scored_on"]}
        values = {LEARNED: {q: v for q, v in mine.items() if q in scored},
                  OPEN: {q: v for q, v in (single.values(metric, fill) or {}).items() if q in scored}}
        if domain is not None:
            values[DOMAIN] = {q: v for q, v in (domain.values(metric, fill) or {}).items() if q in scored}
        out.append(Comparison(f"`{run.name}` (learned on half {learned['half']}), scored on half "
                              f"{learned['scored_on']}", values))
        by_open.setdefault((single.name, domain.name if domain else None), {})[learned["scored_on"]] = out[-1]
    for pair in by_open.values():
        if set(pair) == {0, 1}:
            merged = {c: {q: v for half in (0, 1) for q, v in pair[half].values.get(c, {}).items()}
                      for c in pair[0].values}
            out.append(Comparison("cross-fitted: every question scored under the rule learned on the other half",
                                  merged))
    return out


def access_markdown(found: Sequence[Comparison], metric: str) -> str:
    lines = ["# The learned access rule against open", "",
             "Each learned rule grants reader r writer w's memories only where r's retrievals of w's stream memories "
             "came with a gain whose 95% CI lies above 0 on one half of the test questions (`ms-data learn-access`); "
             f"it is scored here on the other half only. {CREDIT[0].upper() + CREDIT[1:]}. Values: "
             f"{metric_label(metric)} per test question; differences are paired over the same questions, with 95% "
             "bootstrap CIs.", ""]
    for c in found:
        conditions = [k for k in (LEARNED, OPEN, DOMAIN) if k in c.values]
        lines += [f"## {c.label}", "", "| condition | mean [95% CI] n |", "|---|---|"]
        lines += [f"| {k} | {c.estimate(k).text()} |" for k in conditions]
        pairs = [(LEARNED, OPEN), (LEARNED, DOMAIN), (OPEN, DOMAIN)]
        lines += ["", "| difference | mean [95% CI] n |", "|---|---|"]
        lines += [f"| {a} minus {b} | {c.difference(a, b).text()} |" for a, b in pairs if b in c.values]
        lines.append("")
    return "\n".join(lines)


def write_access(runs: Sequence[Run], out: Path, metric: str) -> str:
    """access.md where some run retrieved under a learned rule; returns a line for summary.md."""
    (out / FILE).unlink(missing_ok=True)  # a rerun into the same --out must not keep an old one
    found = comparisons(runs, metric)
    if not found:
        return ""
    (out / FILE).write_text(access_markdown(found, metric), encoding="utf-8")
    best = found[-1]
    gap = best.difference(LEARNED, OPEN)
    return (f"Learned access rule minus open, Single-pool ({best.label}): {gap.text()} ({FILE}). "
            f"Mean withheld per prediction: {_withheld(runs):.1f}.")


def _withheld(runs: Sequence[Run]) -> float:
    counts = [row.get("withheld", 0) for run in runs if learned_of(run) and run.predictions
              for row in run.predictions.get(run.last_fill, {}).values()]
    return fmean(counts) if counts else 0.0
