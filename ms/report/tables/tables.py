"""Table 1 (k-shot x backbone, Domain-pool) and Table 2 (Domain- vs Single-pool at k = 3): our
cells, with their CIs, beside the paper's published numbers."""

from typing import Optional, Sequence

from ms.common.stats import CONFIDENCE, RESAMPLES
from ms.metrics.base import metric_of_key
from ms.report.common.conditions import Condition, Score
from ms.report.common.render import DIFF, OURS, PAPER, Table, Value, n_note, to_csv, to_latex, to_markdown
from ms.report.common.runs import Cell, metric_label
from ms.report.context import Report
from ms.report.tables.paper import PaperTables

OVERALL = "overall"


def order(found, preferred: Sequence[str]) -> list[str]:
    """The paper's order, with anything it lacks sorted in front (our own backbones first)."""
    return sorted(set(found) - set(preferred)) + list(preferred)


def ran(ours: dict, paper: PaperTables) -> list[str]:
    """The agents our runs measured, in the paper's order (ours it lacks first); the paper's agents
    where no run of ours fits the table. An agent no run measured would be a row or column of "–"."""
    found = {a for scores in ours.values() for a in scores if a != OVERALL}
    return [a for a in order(found, paper.agents) if a in found] if found else list(paper.agents)


def _beside(
    ours: Optional[dict[str, Score]], paper: Optional[dict[str, float]], comparable: bool
) -> list[tuple[str, dict[str, Value]]]:
    """Our scores, the paper's, and ours - paper where both exist and measure the same thing."""
    out = [(source, values) for source, values in [(OURS, ours), (PAPER, paper)] if values is not None]
    if ours is not None and paper is not None and comparable:
        out.append((DIFF, {a: s.minus(paper[a]) for a, s in ours.items() if s.est.mean is not None and a in paper}))
    return out


def uncertainty_notes(conds: Sequence[Condition], scores: Sequence[dict[str, Score]]) -> tuple[list[str], bool]:
    """How our cells were made (CI, n, replicates, old runs without per-question values), and whether
    each cell must print its own n."""
    if not conds:
        return [], False
    notes = [
        f"Each cell of ours is the mean over test questions with its {CONFIDENCE:.0%} bootstrap CI [lo, hi] "
        f"(scipy BCa, {RESAMPLES} resamples of the questions)."
    ]
    note, show_n = n_note(
        [s for d in scores for a, s in d.items() if a != OVERALL], [d[OVERALL] for d in scores if OVERALL in d]
    )
    notes.append(note)
    notes += [
        f"{c.name}: replicates: {c.replicates} (seeds {', '.join(str(r.seed) for r in c.runs)}), each test "
        "question averaged over them."
        for c in conds
        if c.replicates > 1
    ]
    notes += [
        f"{c.name} has no predictions.jsonl: its cells are metrics.json means, without a CI."
        for c in conds
        if any(r.predictions is None for r in c.runs)
    ]
    return notes, show_n


def published_alike(metric: str, paper: PaperTables) -> bool:
    """Whether `metric` is of the metric the paper published (BERTScore: P, R or F1), as the registered
    metrics say; differences from the paper need the very key too (`paper.metric_key`)."""
    ours = metric_of_key(metric)
    return ours is not None and ours is metric_of_key(paper.metric_key)


def _notes(conds: Sequence[Condition], paper: PaperTables, where: str, metric: str) -> list[str]:
    notes = []
    if conds:
        source = (
            f"{metric_label(metric)} ({'; '.join(sorted({c.scorer for c in conds}))})"
            if published_alike(metric, paper)
            else metric_label(metric)
        )
        notes.append(
            f"ours: {source} from our runs, each at its last memory fill"
            + "".join(f"; {c.name} stops at {c.last_fill}%" for c in conds if c.last_fill != 100)
            + "."
        )
    else:
        notes.append("No finished run fits this table: only the paper's numbers are shown.")
    if not published_alike(metric, paper):
        cls = metric_of_key(metric)
        explained = cls.explained.get(metric) if cls is not None else None
        notes.append(
            (f"{metric}: {explained}. " if explained else "") + "The paper published no such number, so "
            "only our columns are shown: no paper columns, no differences."
        )
        return notes
    notes.append(f"paper: {paper.source}, {where}; {paper.metric}.")
    shown = {a for c in conds for a in c.agents}
    if conds and set(paper.agents) - shown:
        notes.append(
            f"Only the {len(shown)} agents our runs measured are shown; the paper's overall is over all "
            f"{len(paper.agents)} of its agents."
        )
    if metric != paper.metric_key:
        notes.append(f"No differences: the paper reports BERTScore {paper.metric_key}, this report {metric}.")
    else:
        notes.append(
            "ours - paper is given where the backbone is one of the paper's; it also carries the change "
            "of BERTScore model, so read it as a rough comparison. Its CI is ours shifted by the "
            "published number: it holds our sampling error only."
        )
    outside = sorted({c.record.backbone for c in conds} - set(paper.backbones))
    if outside:
        notes.append(
            f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} not among the paper's backbones "
            f"({', '.join(paper.backbones)}): shown beside the paper's columns, without differences."
        )
    return notes


def _published(metric: str, paper: PaperTables, table: dict) -> dict:
    """The paper's cells, or none for a metric it never reported."""
    return table if published_alike(metric, paper) else {}


def table1(chosen: dict[Cell, Condition], paper: PaperTables, metric: str) -> Table:
    """Domain-pool, agents (then overall) x (k-shot x backbone), our columns beside the paper's."""
    conds = {(k, b): c for (b, k, pool), c in chosen.items() if pool == paper.table1_pool}
    ours = {key: c.scores(metric) for key, c in conds.items()}
    published = _published(metric, paper, paper.table1)
    agents = ran(ours, paper)
    columns, values = [], []
    for k in sorted({k for k, _ in ours} | {k for k, _ in published}):
        for backbone in order({b for _, b in ours}, paper.backbones):
            for source, scores in _beside(
                ours.get((k, backbone)), published.get((k, backbone)), metric == paper.metric_key
            ):
                columns.append((f"{k}-shot", backbone, source))
                values.append(scores)
    notes, show_n = uncertainty_notes(list(conds.values()), list(ours.values()))
    return Table(
        title=f"Table 1: {metric_label(metric)}, Domain-pool, k-shot x backbone",
        index=["agent"],
        columns=columns,
        rows=[((a,), [v.get(a) for v in values]) for a in [*agents, OVERALL]],
        notes=_notes(list(conds.values()), paper, "Table 1", metric) + notes,
        show_n=show_n,
    )


def table2(chosen: dict[Cell, Condition], paper: PaperTables, metric: str) -> Table:
    """k = 3: (pool x backbone) rows, agents (then overall) as columns; our rows beside the paper's."""
    conds = {(pool, b): c for (b, k, pool), c in chosen.items() if k == paper.table2_k}
    ours = {key: c.scores(metric) for key, c in conds.items()}
    published = _published(metric, paper, paper.table2)
    agents = [*ran(ours, paper), OVERALL]
    rows = []
    for pool in order({p for p, _ in ours}, ["domain", "single"]):
        for backbone in order({b for _, b in ours}, paper.backbones):
            for source, scores in _beside(
                ours.get((pool, backbone)), published.get((pool, backbone)), metric == paper.metric_key
            ):
                rows.append(((pool.capitalize(), backbone, source), [scores.get(a) for a in agents]))
    notes, show_n = uncertainty_notes(list(conds.values()), list(ours.values()))
    return Table(
        title=f"Table 2: {metric_label(metric)} at k = {paper.table2_k}, Domain-pool vs Single-pool",
        index=["pool", "backbone", "source"],
        columns=[(a,) for a in agents],
        rows=rows,
        notes=_notes(list(conds.values()), paper, "Table 2", metric) + notes,
        show_n=show_n,
    )


def tables_section(report: Report) -> str:
    """table1 and table2 as .md, .csv and .tex, and summary.md's copy of each."""
    chosen, paper, metric = report.chosen, report.paper, report.metric
    report.tables = {"table1": table1(chosen, paper, metric), "table2": table2(chosen, paper, metric)}
    for stem, table in report.tables.items():
        for suffix, render in ((".md", to_markdown), (".csv", to_csv), (".tex", to_latex)):
            (report.out / f"{stem}{suffix}").write_text(render(table), encoding="utf-8")
    return "".join(
        f"\n## {table.title}\n\nFiles: [{stem}.md]({stem}.md), [{stem}.csv]({stem}.csv), [{stem}.tex]({stem}.tex)\n"
        f"\n{to_markdown(table)}\n"
        for stem, table in report.tables.items()
    )
