"""Tables, claims and figures from finished runs, set beside the paper's published numbers.

    ms-report SWEEP_DIR... [--out DIR] [--metric P|R|F1|ref_logprob] [--sharing-fill PERCENT] [--html [DIR]]

Everything is read from what runs leave in their folders: metrics.json says what a run was,
predictions.jsonl what it scored on each test question (every mean and 95% CI is drawn from it),
decisions.jsonl how its pool grew, its pool file (or memories.csv) who wrote each memory. Writes into --out
(default: outputs/report/<SWEEP_DIR path>, never into the runs' own folders): table1/table2 as
.md/.csv/.tex, claims.md/.csv, runs.md, figure4_<backbone>.png/.pdf, pool_growth_<run>.png,
ablation.md/.csv (when the runs hold more than one retriever/memory combination), sharing/ (who
retrieved whose memories, per run), stream_share.md/.csv (the share of each top k the stream wrote, per
fill), quality.md/.csv (where runs hold the quality.jsonl `ms-data gate-quality` writes) and summary.md.

Modules: runs (run folders and their cells, a condition in words), labels (what the report calls each
registered option: one table keyed by registry), conditions (seed replicates, which run speaks for a
cell), pairing (which conditions may be paired), paper (the published numbers), tables and render
(Tables 1-2 and their formats), ablation, claims and claim_files (claims.md, claims.csv), figures, pages
(runs.md, summary.md), records (the run records: warnings, dirty and missing counts), writers, pool_server, baseline
and sharing (who helped whom; writers reads a pool file, memories.csv or, through pool_server, a
PostgreSQL pool; baseline pairs each run with a k = 0 run; export writes memories.csv), quality (gated
answers against the references), cli (write_report, main) and html (the browsable site of --html).
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
