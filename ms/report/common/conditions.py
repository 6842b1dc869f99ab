"""Conditions: runs whose cells (their recorded settings, ms.loop.cell) differ in the seed alone are
replicates of one condition and are pooled per test question; which conditions may be paired is
ms.report.common.pairing's. Also which condition speaks for each table cell."""

import json
from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean
from typing import Optional, Sequence

from ms.common.stats import Estimate, mean_ci
from ms.config.parts import ACCESS_RULES, POLICIES
from ms.report.common.labels import said, words
from ms.report.common.pairing import REPLICATE_SEEDS, runs_pairable, under
from ms.report.common.runs import Cell, Item, Run
from ms.report.tables.paper import PaperTables

FIGURE4_K, FIGURE4_POOL = 3, "domain"  # the paper's Figure 4 setting
# The paper's setting, which Tables 1-2 and Figure 4 read: its retriever and memory policy, and the gate
# that speaks for a cell before any other (registered options: ms.report.common.labels says them in words).
TABLE_RETRIEVER, TABLE_MEMORY, TABLE_GATE = "dense", "plain", "rubric"

SELECTION_RULE = (
    "A run is identified by its cell record: metrics.json `cell.config`, or, for runs that predate it, the "
    "settings Hydra saved beside the run (.hydra/config.yaml). Runs whose cells differ in the seed alone and "
    "that share every run field but the seed are replicates of one condition: each test question's "
    "value is averaged over them before the bootstrap. Of two runs with the same cell and the same seed "
    "(or none recorded), the more recently finished one (metrics.json time) is kept. "
    "Tables 1-2 and Figure 4 use only conditions with retriever=dense and plain memory (memory=plain, or no "
    "memory field: runs from before it existed), read under access=open (runs under an access rule are compared "
    "in access.md), and with no memory retired (memory.retire_below unset). When several of those claim the "
    "same (backbone, k, pool) "
    "cell, one gated by the rubric (the paper's gate) beats one gated otherwise, then one with memory train on "
    "(learned) beats a frozen one, then the most recently finished one wins. "
    "Every other run is listed under 'Other runs' in runs.md, and retriever/memory variants of a cell are "
    "compared in ablation.md."
)


def pairable(a: "Condition", b: "Condition", varied: Sequence[str] = ()) -> Optional[list[str]]:
    """Where two conditions may be paired by a comparison that varies the keys `varied` (ms.report.common.pairing:
    replicates share their cells but the seed, so their first runs speak for them)."""
    return runs_pairable(a.first, b.first, varied)


@dataclass(frozen=True)
class Score:
    """One cell of ours: the estimate over test questions and how many seed replicates it pools."""

    est: Estimate
    replicates: int = 1

    def minus(self, constant: float) -> "Score":
        """Ours less a published number: the interval moves with the mean (the number has no error)."""

        def shift(x: Optional[float]) -> Optional[float]:
            return None if x is None else x - constant

        e = self.est
        return Score(Estimate(shift(e.mean), shift(e.lo), shift(e.hi), e.n), self.replicates)


class Condition:
    """One or more replicate runs (one per seed). Identity (fields, cell, fills) is the first run's:
    replicates share every run field but the seed."""

    def __init__(self, runs: Sequence[Run]):
        self.runs = sorted(runs, key=lambda r: (str(r.seed), r.name))
        self._scores: dict[tuple, Score] = {}  # bootstraps are the slow part; each is drawn once

    def __repr__(self) -> str:
        return f"Condition({self.name})"

    @property
    def name(self) -> str:
        return " + ".join(r.name for r in self.runs)

    @property
    def first(self) -> Run:
        return self.runs[0]

    # Read from the first run, as the docstring says: what the condition is, its fills and agents.
    FROM_FIRST = frozenset(
        "record cell settings memory retriever_label gate gate_words words grader data fills last_fill agents "
        "scorer".split()
    )

    def __getattr__(self, name: str):
        if name in Condition.FROM_FIRST:
            return getattr(self.first, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def finished(self) -> float:
        return max(r.finished for r in self.runs)

    @property
    def replicates(self) -> int:
        return len(self.runs)

    @property
    def accepted(self) -> list[Optional[int]]:
        """Admitted stream questions, one count per replicate; None where not recorded."""
        return [r.accepted for r in self.runs]

    def values(self, metric: str, fill: Optional[int] = None) -> Optional[dict[Item, float]]:
        """Each test question's value at the fill (default: the last), averaged over the replicates that
        measured it; None where a run has no predictions.jsonl (no per-question values to pool)."""
        fill = self.last_fill if fill is None else fill
        per_run = [r.values(metric, fill) for r in self.runs]
        if any(v is None for v in per_run):
            return None
        pooled: dict[Item, list[float]] = defaultdict(list)
        for values in per_run:
            for item, value in values.items():
                pooled[item].append(value)
        return {item: fmean(vs) for item, vs in pooled.items()}

    def score(self, metric: str, agent: Optional[str] = None, fill: Optional[int] = None) -> Score:
        """Mean and 95% CI over the test questions (of one agent, or all for agent None). Runs without
        predictions.jsonl give metrics.json's mean with no interval."""
        fill = self.last_fill if fill is None else fill
        key = (metric, agent, fill)
        if key not in self._scores:
            values = self.values(metric, fill)
            if values is not None:
                est = mean_ci([v for (a, _), v in values.items() if agent is None or a == agent])
            else:
                summaries = [r.summary(metric, fill, agent) for r in self.runs]
                means = [m for m, _ in summaries if m is not None]
                est = Estimate(fmean(means) if means else None, None, None, max(n for _, n in summaries))
            self._scores[key] = Score(est, self.replicates)
        return self._scores[key]

    def scores(self, metric: str) -> dict[str, Score]:
        """agent -> score at the last fill, and 'overall' over all test questions."""
        return {**{a: self.score(metric, a) for a in self.agents}, "overall": self.score(metric)}

    def curves(self, metric: str) -> dict[str, dict[int, Estimate]]:
        """agent -> fill (%) -> estimate, for Figure 4."""
        return {a: {f: self.score(metric, a, f).est for f in self.fills} for a in self.agents}


def _identity(run: Run) -> str:
    """Replicates' cells differ in the seed alone; they share every run field but the seed too, and the
    examples they read where both recorded them."""
    cell = None if run.settings is None else {k: v for k, v in run.settings.items() if not under(k, REPLICATE_SEEDS)}
    return json.dumps(
        {"fields": run.record.without("seed"), "data": run.data, "cell": cell},
        sort_keys=True,
        default=str,
    )


def conditions(runs: Sequence[Run]) -> tuple[list[Condition], dict[str, str]]:
    """The runs grouped into conditions, and why each run left out as a duplicate (same cell, run fields and
    seed as a more recent run) is not used."""
    groups: dict[str, dict[object, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        groups[_identity(run)][run.seed].append(run)
    out, replaced = [], {}
    for by_seed in groups.values():
        kept = []
        for same in by_seed.values():
            newest, *older = sorted(same, key=lambda r: (r.finished, r.name), reverse=True)
            kept.append(newest)
            replaced |= {
                r.name: f"a more recent run with the same cell, run fields and seed replaces it: {newest.name}"
                for r in older
            }
        out.append(Condition(kept))
    return out, replaced


def _unused(c: Condition) -> Optional[str]:
    """Why no table uses the condition, whichever others there are (SELECTION_RULE); None where one may."""
    if c.record.retriever != TABLE_RETRIEVER:
        return f"{c.first.retriever_words} (the tables use the {TABLE_RETRIEVER} retriever only)"
    if c.memory != TABLE_MEMORY:
        return f"{words(POLICIES, c.memory)} (the tables use {words(POLICIES, TABLE_MEMORY)} only; see ablation.md)"
    if c.record.access is not None:
        return (
            f"{said(ACCESS_RULES, c.first.access)} (the tables read under {words(ACCESS_RULES, None)}; see access.md)"
        )
    if c.record.poison is not None:
        return "a poisoning writer wrote into its pool (the tables read clean runs; see poison.md)"
    if c.record.retire is not None:
        return "memory.retire_below retired memories (the tables read runs that keep what they admit)"
    if not c.record.greedy:
        return f"its stream kept the best of {c.record.best_of} sampled answers (the tables read greedy streams)"
    return None


def choose(conds: Sequence[Condition], replaced: dict[str, str]) -> tuple[dict[Cell, Condition], dict[str, str]]:
    """The condition that speaks for each cell (SELECTION_RULE), and why each other run does not."""

    def rank(c: Condition):
        return c.gate == TABLE_GATE, bool(c.record.learned), c.finished, c.name

    chosen: dict[Cell, Condition] = {}
    for c in conds:
        if _unused(c) is None and (c.cell not in chosen or rank(c) > rank(chosen[c.cell])):
            chosen[c.cell] = c
    why_not = dict(replaced)
    for c in conds:
        why = _unused(c) or (None if chosen[c.cell] is c else f"its cell is taken by {chosen[c.cell].name}")
        why_not |= {run.name: why for run in c.runs if why}
    return chosen, why_not


def select(runs: Sequence[Run]) -> tuple[dict[Cell, Condition], dict[str, str]]:
    """conditions() then choose(): the condition for each cell, and why each other run is not used."""
    return choose(*conditions(runs))


def used_in(cell: Cell, paper: PaperTables) -> list[str]:
    _, k, pool = cell
    fits = {
        "Table 1": pool == paper.table1_pool,
        "Table 2": k == paper.table2_k,
        "Figure 4": (k, pool) == (FIGURE4_K, FIGURE4_POOL),
    }
    return [name for name, ok in fits.items() if ok]
