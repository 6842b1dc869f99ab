"""Tables, claims and figures from finished runs, set beside the paper's published numbers.

    ms-report SWEEP_DIR... [--out DIR] [--metric P|R|F1|ref_logprob] [--sharing-fill PERCENT] [--html [DIR]]

Everything is read from what runs leave in their folders: metrics.json says what a run was,
predictions.jsonl what it scored on each test question (every mean and 95% CI is drawn from it),
decisions.jsonl how its pool grew, its pool file (or memories.csv) who wrote each memory. Writes into --out
(default: outputs/report/<SWEEP_DIR path>, never into the runs' own folders) summary.md and the files of
its sections: sections.SECTIONS lists them in summary.md's order, each drawing from one Report (context),
which cli builds (write_report, main). ARCHITECTURE.md lists the packages.
"""

from ms.report.cli import main, write_report
from ms.report.common.conditions import select
from ms.report.common.render import DIFF
from ms.report.common.runs import find_runs
from ms.report.figures.figure4 import figure4
from ms.report.figures.growth import pool_growth
from ms.report.tables.paper import PAPER_TABLES, load_paper_tables

__all__ = [
    "DIFF",
    "PAPER_TABLES",
    "figure4",
    "find_runs",
    "load_paper_tables",
    "main",
    "pool_growth",
    "select",
    "write_report",
]
