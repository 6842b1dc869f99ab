"""The site's front page (data/site.js): the claims with their CIs, verdicts and the per-question
differences each averages; Tables 1-2; the figures; every run and why it is or is not in the tables.
The numbers are the ones ms-report's own files carry: they are computed once, by the same code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from ms.config.parts import POLICIES
from ms.report.common.conditions import SELECTION_RULE, Condition, used_in
from ms.report.common.labels import words
from ms.report.common.records import record_counts
from ms.report.common.render import DIFF, Table, value_text
from ms.report.common.run_labels import run_labels
from ms.report.common.runs import Run, Skipped, metric_label, metric_words
from ms.report.tables.claim_files import claim_runs
from ms.report.tables.claims import CLAIMS, ClaimRow, higher_is_better
from ms.report.tables.paper import PaperTables


@dataclass
class ReportParts:
    """What write_report computed that the site shows."""

    roots: Sequence[Path]
    metric: str
    runs: Sequence[Run]
    skipped: Sequence[Skipped]
    why_not: dict[str, str]
    paper: PaperTables
    tables: dict[str, Table]
    claim_rows: Sequence[ClaimRow] = ()
    untested: Sequence[str] = ()
    figures: dict[str, Path] = field(default_factory=dict)  # title -> PNG written by the report
    sharing_fill: Optional[int] = None


def _side(c: Condition, fill: int, index: dict[str, int]) -> dict:
    return {"runs": [r.name for r in c.runs], "run": index[c.first.name], "fill": fill, "words": c.words()}


def claim_data(row: ClaimRow, index: dict[str, int]) -> dict:
    """One tested comparison and the per-question pairs its mean difference averages."""
    c, r = row.comparison, row.result
    a, b = c.a.values(row.metric, c.fill_a) or {}, c.b.values(row.metric, c.fill_b) or {}
    return {
        "claim": c.claim.id,
        "text": c.claim.text,
        "label": c.label,
        "setting": c.setting,
        "metric": row.metric,
        "estimate": r.estimate,
        "lo": r.lo,
        "hi": r.hi,
        "p": r.p,
        "n": r.n,
        "verdict": r.verdict,
        "wins": row.wins,
        "agents": row.agents,
        "higher_is_better": higher_is_better(row.metric),
        "a": _side(c.a, c.fill_a, index),
        "b": _side(c.b, c.fill_b, index),
        "replicates": max(c.a.replicates, c.b.replicates),
        "pairs": [
            [agent, test_id, a[(agent, test_id)], b[(agent, test_id)]] for agent, test_id in sorted(a.keys() & b.keys())
        ],
    }


def table_data(table: Table) -> dict:
    return {
        "title": table.title,
        "header": [*table.index, *(" / ".join(c) for c in table.columns)],
        "rows": [
            [*labels, *(value_text(v, signed=DIFF in labels or DIFF in col) for v, col in zip(values, table.columns))]
            for labels, values in table.rows
        ],
        "notes": table.notes,
    }


def run_entry(run: Run, parts: ReportParts, label: str) -> dict:
    cond = Condition([run])
    score = cond.score(parts.metric) if parts.metric in run.measured else None
    use = (
        f"not used: {parts.why_not[run.name]}"
        if run.name in parts.why_not
        else f"used in {', '.join(used_in(run.cell, parts.paper)) or 'no table (none shows this k and pool)'}"
    )
    r = run.record
    return {
        "name": run.name,
        "label": label,
        "backbone": r.backbone,
        "k": r.k,
        "pool": r.pool,
        "words": run.words(),
        "retriever": run.retriever_words,
        "memory": words(POLICIES, run.memory),
        "gate": run.gate_words,
        "seed": run.seed,
        "last_fill": run.last_fill,
        "fills": run.fills,
        "overall": value_text(score, show_n=True, digits=3) if score else "–",
        "use": use,
        "predictions": run.predictions is not None,
    }


def front_data(parts: ReportParts, figure_files: dict[str, str]) -> dict:
    """site.js: everything the front page shows, and the runs' names in the order of their data files."""
    index = {run.name: i for i, run in enumerate(parts.runs)}
    labels = run_labels(parts.runs)
    metrics = list(
        dict.fromkeys(
            [parts.metric, *(r.metric for r in parts.claim_rows), *(m for run in parts.runs for m in run.measured)]
        )
    )
    return {
        "roots": [str(r) for r in parts.roots],
        "metric": parts.metric,
        "paper": parts.paper.source,
        "metrics": {
            m: {"label": metric_label(m), "words": metric_words(m), "higher_is_better": higher_is_better(m)}
            for m in metrics
        },
        "selection_rule": SELECTION_RULE,
        "claims": [claim_data(row, index) for row in parts.claim_rows],
        "claim_records": record_counts(claim_runs(parts.claim_rows)),
        "run_records": record_counts(parts.runs),
        "claim_rules": {c.id: {"text": c.text, "how": c.how} for c in CLAIMS.values()},
        "untested": list(parts.untested),
        "tables": [table_data(t) for t in parts.tables.values()],
        "figures": [{"title": title, "file": file} for title, file in figure_files.items()],
        "runs": [run_entry(run, parts, labels[run.name]) for run in parts.runs],
        "skipped": [{"path": s.path.name, "reason": s.reason} for s in parts.skipped],
    }
