"""The site's front page (data/site.js): the claims with their CIs, verdicts and the per-question
differences each averages; Tables 1-2; the figures; every run and why it is or is not in the tables.
The numbers are the ones ms-report's own files carry: they are computed once, by the same code."""

from ms.config.parts import POLICIES
from ms.report.common.conditions import SELECTION_RULE, Condition
from ms.report.common.labels import words
from ms.report.common.records import record_counts
from ms.report.common.render import Table, table_cells
from ms.report.common.run_labels import run_labels
from ms.report.common.runs import Run, metric_label, metric_words
from ms.report.context import Report
from ms.report.tables.claim_files import claim_runs
from ms.report.tables.claims import CLAIMS, ClaimRow, higher_is_better
from ms.report.tables.pages import overall_text, use_of


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
        **{key: getattr(r, key) for key in ("estimate", "lo", "hi", "p", "n", "verdict")},
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
        "rows": table_cells(table, show_n=False),
        "notes": table.notes,
    }


def run_entry(run: Run, report: Report, label: str) -> dict:
    return {
        "name": run.name,
        "label": label,
        **{key: getattr(run.record, key) for key in ("backbone", "k", "pool")},
        "words": run.words(),
        "retriever": run.retriever_words,
        "memory": words(POLICIES, run.memory),
        "gate": run.gate_words,
        "seed": run.seed,
        "last_fill": run.last_fill,
        "fills": run.fills,
        "overall": overall_text(run, report.metric) if report.metric in run.measured else "–",
        "use": use_of(run, report),
        "predictions": run.predictions is not None,
    }


def front_data(report: Report, figure_files: dict[str, str]) -> dict:
    """site.js: everything the front page shows, and the runs' names in the order of their data files."""
    index = {run.name: i for i, run in enumerate(report.runs)}
    labels = run_labels(report.runs)
    metrics = list(
        dict.fromkeys(
            [report.metric, *(r.metric for r in report.claim_rows), *(m for run in report.runs for m in run.measured)]
        )
    )
    return {
        "roots": [str(r) for r in report.roots],
        "metric": report.metric,
        "paper": report.paper.source,
        "metrics": {
            m: {"label": metric_label(m), "words": metric_words(m), "higher_is_better": higher_is_better(m)}
            for m in metrics
        },
        "selection_rule": SELECTION_RULE,
        "claims": [claim_data(row, index) for row in report.claim_rows],
        "claim_records": record_counts(claim_runs(report.claim_rows)),
        "run_records": record_counts(report.runs),
        "claim_rules": {c.id: {"text": c.text, "how": c.how} for c in CLAIMS.values()},
        "untested": list(report.untested),
        "tables": [table_data(t) for t in report.tables.values()],
        "figures": [{"title": title, "file": file} for title, file in figure_files.items()],
        "runs": [run_entry(run, report, labels[run.name]) for run in report.runs],
        "skipped": [{"path": s.path.name, "reason": s.reason} for s in report.skipped],
    }
