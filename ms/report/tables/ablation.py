"""The ablation: within one (backbone, k, pool) cell, one row per retriever x memory policy, every
score with its 95% CI."""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from ms.config.parts import POLICIES
from ms.report.common.conditions import FIGURE4_K, Condition, Score
from ms.report.common.labels import rank, words
from ms.report.common.render import csv_text, estimate_header, estimate_row, markdown_grid, value_text
from ms.report.common.runs import Cell, metric_label
from ms.report.context import Report
from ms.report.tables.tables import order, uncertainty_notes

ABLATION_INDEX = ("retriever", "memory", "run")


@dataclass
class AblationRow:
    retriever: str  # Run.retriever_words
    memory: str  # the memory policy in words
    condition: Condition


@dataclass
class Ablation:
    cell: Cell
    agents: list[str]  # the paper's order, only agents some row has
    rows: list[AblationRow]  # the retrievers' order, then the memory policies' (ms.report.common.labels)
    scores: list[dict[str, Score]]  # per row: agent -> score, and 'overall'
    notes: list[str] = field(default_factory=list)
    show_n: bool = False

    @property
    def title(self) -> str:
        backbone, k, pool = self.cell
        return f"{backbone}, k = {k}, {pool} pool"


def _accepted(c: Condition, missing: str) -> str:
    """'12', or '12/14/11' for three replicates."""
    counts = c.accepted
    return missing if all(n is None for n in counts) else "/".join(missing if n is None else str(n) for n in counts)


def ablation_tables(
    conds: Sequence[Condition], metric: str, agent_order: Sequence[str]
) -> tuple[list[Ablation], list[Cell]]:
    """One table per (backbone, k, pool) cell holding more than one (retriever, memory) combination, and the
    cells left out because all their conditions share one. Where two conditions share a combination (they
    differ in some other run field), the most recently finished one speaks for it; the notes name the other."""
    by_cell: dict[Cell, dict[tuple[str, str], list[Condition]]] = defaultdict(lambda: defaultdict(list))
    for c in conds:
        by_cell[c.cell][(c.retriever_label, c.memory)].append(c)
    tables, single = [], []
    for cell in sorted(by_cell, key=lambda c: (c[1] != FIGURE4_K, c)):  # the paper's k = 3 first
        combos = by_cell[cell]
        if len(combos) < 2:
            single.append(cell)
            continue
        rows, notes = [], []

        def ablation_order(combo: tuple[str, str]) -> tuple:
            """The table of labels' order: the baselines' retrievers first, each frozen before learned."""
            return combos[combo][0].first.retriever_rank, rank(POLICIES, combo[1]), combo

        for retriever, memory in sorted(combos, key=ablation_order):
            newest, *older = sorted(combos[(retriever, memory)], key=lambda c: (c.finished, c.name), reverse=True)
            rows.append(AblationRow(newest.first.retriever_words, words(POLICIES, memory), newest))
            if older:
                notes.append(
                    f"{rows[-1].retriever} / {rows[-1].memory}: {newest.name} is the most recent of "
                    f"{1 + len(older)} conditions; not shown: {', '.join(c.name for c in older)}."
                )
            if newest.last_fill != 100:
                notes.append(f"{newest.name} stops at {newest.last_fill}% fill.")
            notes += [
                f"{run.name} consolidation: " + ", ".join(f"{k} {v}" for k, v in run.consolidation.items()) + "."
                for run in newest.runs
                if run.consolidation
            ]
        scores = [row.condition.scores(metric) for row in rows]
        found = {a for s in scores for a in s if a != "overall"}
        uncertainty, show_n = uncertainty_notes([row.condition for row in rows], scores)
        tables.append(
            Ablation(
                cell, [a for a in order(found, agent_order) if a in found], rows, scores, notes + uncertainty, show_n
            )
        )
    return tables, single


def ablation_markdown(tables: Sequence[Ablation], metric: str, single: Sequence[Cell] = (), level: int = 1) -> str:
    """Headed tables, one per cell; `level` is the Markdown heading level of the top heading."""
    h = "#" * level
    out = [
        f"{h} Ablation: retriever x memory policy ({metric_label(metric)})\n",
        f"Runs of the same backbone, k and pool, one row per retriever (frozen: no memory train; learned: "
        f"memory train on) and memory policy. Scores are "
        f"{metric_label(metric)} at each run's last memory fill, with their 95% CI; 'accepted' counts the stream "
        f"questions whose answers the gate admitted to the pool (one count per seed replicate).\n",
    ]
    for table in tables:
        header = [*ABLATION_INDEX, *table.agents, "overall", "accepted"]
        rows = [
            [
                row.retriever,
                row.memory,
                row.condition.name,
                *(value_text(scores.get(a), show_n=table.show_n) for a in [*table.agents, "overall"]),
                _accepted(row.condition, "–"),
            ]
            for row, scores in zip(table.rows, table.scores)
        ]
        out += [f"{h}# {table.title}\n", markdown_grid(header, rows, len(ABLATION_INDEX)) + "\n"]
        out += [f"- {n}" for n in table.notes]
        out.append("")
    if single:
        out.append(
            "Not tabled, as all their runs share one combination: "
            + "; ".join(f"{b}, k = {k}, {p} pool" for b, k, p in single)
            + ".\n"
        )
    return "\n".join(out)


def ablation_csv(tables: Sequence[Ablation], agent_order: Sequence[str] = ()) -> str:
    """All cells in one long table; full precision, each score as value, ci_lo, ci_hi, n."""
    found = {a for t in tables for a in t.agents}
    agents = [a for a in order(found, agent_order) if a in found] + ["overall"]
    rows = [
        [
            "backbone",
            "k",
            "pool",
            *ABLATION_INDEX,
            "replicates",
            *(c for a in agents for c in estimate_header(a)),
            "accepted",
        ]
    ]
    for table in tables:
        for row, scores in zip(table.rows, table.scores):
            rows.append(
                [
                    *table.cell,
                    row.retriever,
                    row.memory,
                    row.condition.name,
                    row.condition.replicates,
                    *(c for a in agents for c in estimate_row(scores.get(a))),
                    _accepted(row.condition, ""),
                ]
            )
    return csv_text(rows)


def ablation_section(report: Report) -> str:
    """ablation.md and .csv where the runs hold more than one retriever x memory combination, and
    summary.md's copy ('' where they hold one)."""
    for stale in ("ablation.md", "ablation.csv"):  # a rerun into the same --out must not keep an old one
        (report.out / stale).unlink(missing_ok=True)
    if len({(c.retriever_label, c.memory) for c in report.conds}) < 2:  # one retriever x memory combination
        return ""
    ablations, single = ablation_tables(report.conds, report.metric, report.paper.agents)
    (report.out / "ablation.md").write_text(ablation_markdown(ablations, report.metric, single), encoding="utf-8")
    (report.out / "ablation.csv").write_text(ablation_csv(ablations, report.paper.agents), encoding="utf-8")
    summary = ablation_markdown(ablations, report.metric, single, level=2)
    return f"\nFiles: [ablation.md](ablation.md), [ablation.csv](ablation.csv)\n\n{summary}\n"
