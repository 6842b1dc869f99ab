"""ms-report: every table, claim and figure for the runs under some sweep dirs, written into one folder."""

import argparse
import logging
import os
import shutil
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import DEBUG_ENV, USER_ERROR_EXIT, UserError, print_user_error, report_user_errors
from ms.data.reference_twins import read_test_ids
from ms.report.common.conditions import choose, conditions
from ms.report.common.runs import Run, find_runs, in_known_order, slug
from ms.report.context import Report
from ms.report.sections import SECTIONS
from ms.report.tables.paper import PaperTables, load_paper_tables
from ms.report.usage.screens import write_screens_report

log = logging.getLogger(__name__)


# Where a report goes without --out: beside the runs' own outputs, which git ignores, so that a
# report on committed results (results/...) never writes into them.
DEFAULT_OUT = Path("outputs") / "report"


def default_out(sweep_dir: Path) -> Path:
    """DEFAULT_OUT/<the sweep dir's path>, e.g. outputs/report/multirun__table1 (relative to the
    current folder, as ms-run's outputs/ is)."""
    path = sweep_dir.resolve()
    parts = path.relative_to(Path.cwd()).parts if path.is_relative_to(Path.cwd()) else path.parts[1:]
    return DEFAULT_OUT / slug("__".join(parts) or path.name)


def chosen_metric(runs: Sequence[Run], metric: Optional[str], roots: Sequence[Path]) -> str:
    """`metric`, or where None the first metric key that some run recorded (registered metrics first,
    in the registry's order); a metric no run measured leaves nothing to draw, and is a user error."""
    measured = in_known_order(list(dict.fromkeys(m for run in runs for m in run.measured)))
    where = ", ".join(map(str, roots))
    if not runs:
        raise UserError(
            f"nothing to draw: no finished run under {where} (a run folder holds a metrics.json "
            "that says complete: true)"
        )
    if metric is None and measured:
        return measured[0]
    if metric not in measured:
        raise UserError(
            f"nothing to draw: no run under {where} measured {metric}; they measured "
            f"{', '.join(measured) or 'no metric'} (--metric)"
        )
    return metric


def write_report(
    roots: Sequence[Path],
    out: Path,
    metric: Optional[str] = None,
    paper: Optional[PaperTables] = None,
    sharing_fill: Optional[int] = None,
    html: Optional[Path] = None,
    exclude_tests: Optional[Path] = None,
) -> Path:
    """Write every table, claim and figure for the runs under `roots` into `out`; returns summary.md.
    `metric` None: the runs' own (chosen_metric). Nothing is written when there is nothing to draw.
    `html`: also the browsable site of the same numbers into that folder (ms.report.html).
    `exclude_tests`: a file of test ids (one per line) left out of every table, claim and figure."""
    paper = paper or load_paper_tables()
    excluded = frozenset()
    if exclude_tests is not None:
        try:
            excluded = read_test_ids(exclude_tests)
        except ValueError as err:
            raise UserError(str(err)) from None
    runs, skipped = find_runs(roots, excluded)
    # Stream-only runs (eval.enabled=false) answered no test question: they join only what reads decisions.
    runs, screens = [r for r in runs if r.evaluated], [r for r in runs if not r.evaluated]
    if screens and not runs:
        if html is not None:
            log.warning("no site: every run is stream-only, with no test score to show")
        return write_screens_report(roots, out, screens, skipped)
    given, metric = metric, chosen_metric(runs, metric, roots)
    if given is None:
        log.info("metric: %s, the first the runs measured (--metric picks another)", metric)
    conds, replaced = conditions(runs)
    chosen, why_not = choose(conds, replaced)
    out.mkdir(parents=True, exist_ok=True)
    report = Report(
        roots, out, metric, paper, runs, screens, skipped, conds, chosen, why_not, sharing_fill, exclude_tests, excluded
    )
    summary = out / "summary.md"
    summary.write_text("".join(section.draw(report) for section in SECTIONS), encoding="utf-8")
    if html is not None:
        from ms.report.html.site import write_site

        write_site(html, report)
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ms-report", description="Tables, claims and figures from ms runs, beside the paper's published numbers."
    )
    parser.add_argument(
        "sweep_dirs",
        nargs="+",
        type=Path,
        metavar="SWEEP_DIR",
        help="folders searched recursively for run folders (metrics.json or .hydra/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"where to write (default: {DEFAULT_OUT}/<first SWEEP_DIR's path>, under the current folder)",
    )
    parser.add_argument(
        "--metric",
        help="a metric key the runs recorded: a BERTScore component (P, R, F1; the paper's code "
        "reported precision, P), or ref_logprob: the reference answer's mean log-prob per token "
        "(nats; no paper numbers). Default: the first the runs measured",
    )
    parser.add_argument(
        "--sharing-fill",
        type=int,
        metavar="PERCENT",
        help="the fill the sharing matrices count retrievals at (default: each run's last)",
    )
    parser.add_argument(
        "--html",
        nargs="?",
        const=True,
        type=Path,
        metavar="DIR",
        help="also write a browsable static site of the same runs (open DIR/index.html from disk; "
        "nothing is fetched from the network). Default DIR: <--out>/site",
    )
    parser.add_argument(
        "--exclude-tests",
        type=Path,
        metavar="FILE",
        help="leave the test ids listed in FILE (one per line, # comments) out of every table, claim and "
        "figure, on both sides of every paired comparison (ms-data validate --twins FILE writes one)",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of errors that are otherwise reported in one line"
    )
    args = parser.parse_args(argv)
    if args.debug:
        os.environ[DEBUG_ENV] = "1"
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    missing = [str(d) for d in args.sweep_dirs if not d.is_dir()]
    if missing:  # one line, as every user error: argparse's own would print the usage before it
        print_user_error("ms-report", UserError(f"not a folder: {', '.join(missing)}"))
        return USER_ERROR_EXIT
    # A user error (e.g. a damaged results file) prints one line and exits 2; a bug keeps its traceback.
    out = args.out or default_out(args.sweep_dirs[0])
    html = out / "site" if args.html is True else args.html
    fresh, fresh_site = not out.exists(), html is not None and not html.exists()
    summary = None
    try:
        summary = report_user_errors(
            "ms-report",
            lambda: write_report(args.sweep_dirs, out, args.metric, None, args.sharing_fill, html, args.exclude_tests),
        )
    finally:
        if summary in (None, USER_ERROR_EXIT):  # a report cut short is no report: no half-written folder
            for folder in [f for f, new in ((out, fresh), (html, fresh_site)) if new]:
                shutil.rmtree(folder, ignore_errors=True)
    if summary == USER_ERROR_EXIT:
        return USER_ERROR_EXIT
    print(f"report written to {out}/ (start with {summary})")
    if html is not None:
        print(f"site written to {html}/ (open {html / 'index.html'} in a browser)")
    return 0
