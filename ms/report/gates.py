"""The growth curve under each gate (`gate=rubric|utility|both`): for Figure 4's setting, each gate's
change in the metric since its own first fill, paired over the same test questions, with its 95% CI.
Absolute curves hide this: the questions' own spread makes every band wide, while a question's
change between fills is measured far more tightly."""

from __future__ import annotations

from typing import Sequence

from ms.report.conditions import FIGURE4_K, FIGURE4_POOL, Condition
from ms.report.runs import Cell
from ms.stats import Estimate, paired


def by_gate(conds: Sequence[Condition], chosen: dict[Cell, Condition]) -> dict[str, dict[str, Condition]]:
    """backbone -> gate -> the condition of Figure 4's setting (the chosen one's cell, retriever and
    memory) grown under that gate, the most recently finished where several are; only backbones
    with two or more gates, each with two or more fills."""
    out: dict[str, dict[str, Condition]] = {}
    for (backbone, k, pool), chosen_c in chosen.items():
        if (k, pool) != (FIGURE4_K, FIGURE4_POOL):
            continue
        gates: dict[str, Condition] = {}
        for c in sorted(conds, key=lambda c: (c.finished, c.name)):
            if (c.cell, c.retriever_label, c.memory) == (chosen_c.cell, chosen_c.retriever_label, chosen_c.memory) \
                    and len(c.fills) > 1:
                gates[c.gate] = c
        if len(gates) > 1:
            out[backbone] = dict(sorted(gates.items()))
    return out


def change_since_first_fill(cond: Condition, metric: str) -> dict[int, Estimate]:
    """fill -> the mean paired change since the condition's first fill (0 there), with its CI."""
    first, *later = cond.fills
    base = cond.values(metric, first) or {}
    out = {first: Estimate(0.0, 0.0, 0.0, len(base))}
    for fill in later:
        values = cond.values(metric, fill) or {}
        items = sorted(values.keys() & base.keys())
        change = paired([values[i] for i in items], [base[i] for i in items])
        out[fill] = Estimate(change.estimate, change.lo, change.hi, change.n)
    return out
