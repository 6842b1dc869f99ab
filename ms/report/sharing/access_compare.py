"""Access rules against `open` (access.md): each run under a learned rule (run.access.learned)
is scored only on the half of the test questions its rule was not learned on, beside the open
Single-pool run it was learned from and that run's Domain-pool twin, paired question by question.
Where the rules of both halves ran, their held-out halves together cover every test question once
(cross-fitted: each question scored under a rule that never saw it). A run under a hand-written rule
(a rule file no run's numbers chose) is scored on every test question beside its open twin. Every run
under a rule is listed with its grants, compared or not, since runs.md points here for all of them.
"""

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Optional, Sequence

from ms.common.stats import Estimate, mean_ci
from ms.report.common.render import markdown_grid
from ms.report.common.runs import Item, Run, metric_label
from ms.report.sharing.access_rule import CREDIT, question_halves
from ms.report.sharing.grants import Grants

FILE = "access.md"


def learned_of(run: Run) -> Optional[dict]:
    """The `learned` record of the rule the run retrieved under; None for open or hand-written rules."""
    learned = run.record.access.learned if run.record.access is not None else None
    return learned if isinstance(learned, dict) and "scored_on" in learned else None


def _twin(runs: Sequence[Run], run: Run, **changed) -> Optional[Run]:
    """The run whose fields equal `run`'s but for its access rule (open) and `changed`; the newest."""
    want = {**run.record.without("access", "seed"), **changed}
    found = [r for r in runs if r.record.access is None and r.data == run.data and r.record.without("seed") == want]
    return max(found, key=lambda r: r.finished) if found else None


@dataclass
class Comparison:
    label: str  # which run(s) under a rule, and the questions scored
    values: dict[str, dict[Item, float]]  # condition -> the scored questions' values
    runs: tuple[str, ...] = ()  # the runs under a rule it scores

    def estimate(self, condition: str) -> Estimate:
        return mean_ci(list(self.values[condition].values()))

    def difference(self, a: str, b: str) -> Estimate:
        shared = self.values[a].keys() & self.values[b].keys()
        return mean_ci([self.values[a][q] - self.values[b][q] for q in sorted(shared)])


LEARNED, OPEN, DOMAIN = "learned rule, Single-pool", "open, Single-pool", "open, Domain-pool"
RULE, OPEN_TWIN = "hand-written rule", "open, same run fields"
CONDITIONS = (LEARNED, OPEN, DOMAIN, RULE, OPEN_TWIN)
DIFFERENCES = ((LEARNED, OPEN), (LEARNED, DOMAIN), (OPEN, DOMAIN), (RULE, OPEN_TWIN))


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
        values = {
            LEARNED: {q: v for q, v in mine.items() if q in scored},
            OPEN: {q: v for q, v in (single.values(metric, fill) or {}).items() if q in scored},
        }
        if domain is not None:
            values[DOMAIN] = {q: v for q, v in (domain.values(metric, fill) or {}).items() if q in scored}
        out.append(
            Comparison(
                f"`{run.name}` (learned on half {learned['half']}), scored on half {learned['scored_on']}",
                values,
                (run.name,),
            )
        )
        by_open.setdefault((single.name, domain.name if domain else None), {})[learned["scored_on"]] = out[-1]
    for pair in by_open.values():
        if set(pair) == {0, 1}:
            merged = {
                c: {q: v for half in (0, 1) for q, v in pair[half].values.get(c, {}).items()} for c in pair[0].values
            }
            out.append(
                Comparison(
                    "cross-fitted: every question scored under the rule learned on the other half",
                    merged,
                    pair[0].runs + pair[1].runs,
                )
            )
    return out


def handwritten(runs: Sequence[Run], metric: str) -> list[Comparison]:
    """One comparison per run under a hand-written rule with predictions: every test question at its last
    fill, beside its open twin's (the same run fields but the rule), where the runs given hold one."""
    out = []
    for run in runs:
        if run.record.access is None or learned_of(run) is not None or run.predictions is None:
            continue
        values = {RULE: run.values(metric, run.last_fill) or {}}
        twin = _twin(runs, run)
        if twin is not None:
            values[OPEN_TWIN] = twin.values(metric, twin.last_fill) or {}
        against = f"beside `{twin.name}`" if twin is not None else "no open run of the same fields among those given"
        out.append(
            Comparison(
                f"`{run.name}` (hand-written rule, {run.record.pool} pool), every test question; {against}",
                values,
                (run.name,),
            )
        )
    return out


def _rule_runs(runs: Sequence[Run], compared: set[str]) -> list[str]:
    """One entry per run under a rule: which rule, each reader's grants, and whether a section compares it."""
    lines = ["## Every run under an access rule", ""]
    for run in runs:
        if run.record.access is None:
            continue
        grants = Grants(run.record.access)
        readers = "; ".join(f"{reader}: {grants.text(reader)}" for reader in (run.record.agents or grants.table))
        status = (
            "Compared above"
            if run.name in compared
            else "Not compared: its folder holds no predictions.jsonl"
            if run.predictions is None
            else "Not compared: no open run of the same fields among those given"
        )
        lines.append(f"- `{run.name}`: {grants.describe()}. Grants: {readers or 'none listed'}. {status}.")
    return [*lines, ""]


def access_markdown(
    found: Sequence[Comparison], metric: str, runs: Sequence[Run] = (), compared: set[str] = frozenset()
) -> str:
    lines = [
        "# Access rules against open",
        "",
        "Each learned rule grants reader r writer w's memories only where r's retrievals of w's stream memories "
        "came with a gain whose 95% CI lies above 0 on one half of the test questions (`ms-data learn-access`); "
        f"it is scored here on the other half only. {CREDIT[0].upper() + CREDIT[1:]}. A hand-written rule "
        "(a rule file no run's numbers chose) is scored on every test question, beside the open run of the same "
        f"fields. Values: {metric_label(metric)} per test question; differences are paired over the same "
        "questions, with 95% bootstrap CIs.",
        "",
    ]
    for c in found:
        estimates = [[k, c.estimate(k).text()] for k in CONDITIONS if k in c.values]
        lines += [f"## {c.label}", "", markdown_grid(["condition", "mean [95% CI] n"], estimates, 2)]
        pairs = [(a, b) for a, b in DIFFERENCES if a in c.values and b in c.values]
        if pairs:
            differences = [[f"{a} minus {b}", c.difference(a, b).text()] for a, b in pairs]
            lines += ["", markdown_grid(["difference", "mean [95% CI] n"], differences, 2)]
        lines.append("")
    return "\n".join(lines + _rule_runs(runs, compared))


def write_access(runs: Sequence[Run], out: Path, metric: str) -> str:
    """access.md where some run retrieved under an access rule, learned or hand-written; returns a line
    for summary.md."""
    (out / FILE).unlink(missing_ok=True)  # a rerun into the same --out must not keep an old one
    under_rule = [run for run in runs if run.record.access is not None]
    if not under_rule:
        return ""
    learned, written = comparisons(runs, metric), handwritten(runs, metric)
    compared = {name for c in [*learned, *written] if len(c.values) > 1 for name in c.runs}
    (out / FILE).write_text(access_markdown([*learned, *written], metric, runs, compared), encoding="utf-8")
    lines = []
    if learned:
        best = learned[-1]
        lines.append(
            f"Learned access rule minus open, Single-pool ({best.label}): "
            f"{best.difference(LEARNED, OPEN).text()} ({FILE})."
        )
    paired = [c for c in written if OPEN_TWIN in c.values]
    if paired:
        lines.append(
            f"Hand-written access rule minus open ({paired[-1].label}): "
            f"{paired[-1].difference(RULE, OPEN_TWIN).text()} ({FILE})."
        )
    if not lines:
        lines.append(f"{len(under_rule)} run(s) under an access rule, none compared with an open run: see {FILE}.")
    return " ".join(lines) + f" Mean withheld per prediction: {_withheld(runs):.1f}."


def _withheld(runs: Sequence[Run]) -> float:
    counts = [
        row.get("withheld", 0)
        for run in runs
        if run.record.access is not None and run.predictions
        for row in run.predictions.get(run.last_fill, {}).values()
    ]
    return fmean(counts) if counts else 0.0
