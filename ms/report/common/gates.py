"""The growth curve under each gate (`gate=rubric|utility|both`): for Figure 4's setting, each gate's
change in the metric since its own first fill, paired over the same test questions, with its 95% CI.
Absolute curves hide this: the questions' own spread makes every band wide, while a question's
change between fills is measured far more tightly."""

from typing import Sequence

from ms.common.stats import Estimate, paired
from ms.report.common.conditions import FIGURE4_K, FIGURE4_POOL, Condition, pairable
from ms.report.common.runs import Cell

# The cell keys in which a gate variant may differ from the chosen condition: its gate's, and what its
# stream wrote (a reference-written stream is a variant of its gate, as Run.gate labels it).
GATE_KEYS = ("gate", "stream.answers")


def gate_variants(
    conds: Sequence[Condition], chosen: Condition, also_varied: Sequence[str] = ()
) -> dict[str, Condition]:
    """gate -> the condition of `chosen`'s setting (cell, retriever, memory) grown under that gate,
    with two or more fills: `chosen` itself for its own gate, the most recently finished elsewhere. A
    variant's cell differs from `chosen`'s in GATE_KEYS (and `also_varied`) alone, apart from
    NOT_COMPARED keys."""
    same = [
        c
        for c in sorted(conds, key=lambda c: (c.finished, c.name))
        if (c.cell, c.retriever_label, c.memory) == (chosen.cell, chosen.retriever_label, chosen.memory)
        and pairable(chosen, c, (*GATE_KEYS, *also_varied)) is not None
    ]
    found = {c.gate: c for c in same} | {chosen.gate: chosen}
    return {gate: c for gate, c in sorted(found.items()) if len(c.fills) > 1}


def by_gate(conds: Sequence[Condition], chosen: dict[Cell, Condition]) -> dict[str, dict[str, Condition]]:
    """backbone -> gate_variants of its Figure 4 condition, for backbones grown under two or more gates."""
    out = {}
    for (backbone, k, pool), chosen_c in chosen.items():
        if (k, pool) == (FIGURE4_K, FIGURE4_POOL) and len(gates := gate_variants(conds, chosen_c)) > 1:
            out[backbone] = gates
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
