"""ms-report: every table, claim and figure for the runs under some sweep dirs, written into one folder."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import DEBUG_ENV, USER_ERROR_EXIT, UserError, print_user_error, report_user_errors
from ms.common.stats import MIN_CI_N
from ms.data.reference_twins import read_test_ids
from ms.metrics.base import metric_of_key
from ms.report.common.conditions import FIGURE4_K, FIGURE4_POOL, choose, conditions
from ms.report.common.gates import by_gate, change_since_first_fill
from ms.report.common.records import record_warnings, records_markdown
from ms.report.common.render import to_csv, to_latex, to_markdown
from ms.report.common.runs import Run, find_runs, in_known_order, metric_label, slug
from ms.report.figures.canvas import save_figure
from ms.report.figures.figure4 import change_by_gate, figure4
from ms.report.figures.growth import write_growth
from ms.report.sharing.access_compare import write_access
from ms.report.sharing.matrices import write_sharing
from ms.report.sharing.poison import write_poison
from ms.report.sharing.stream_share import write_stream_share
from ms.report.tables.ablation import ablation_csv, ablation_markdown, ablation_tables, combinations
from ms.report.tables.claim_files import claims_csv, claims_grid, claims_markdown, untested
from ms.report.tables.claims import comparisons, test_all
from ms.report.tables.pages import exclusion_markdown, runs_markdown, summary_markdown
from ms.report.tables.paper import PaperTables, load_paper_tables
from ms.report.tables.tables import table1, table2
from ms.report.usage.quality import write_quality
from ms.report.usage.screens import screens_markdown, write_screens_report
from ms.report.usage.usage import write_usage

log = logging.getLogger(__name__)


def claim_metrics() -> list[str]:
    """The keys every claim is tested on, as the registered metrics name them (`Metric.claim_key`): the
    headline metric, BERTScore P, and the cheap, sensitive one, ref_logprob (ARCHITECTURE.md, "Metrics")."""
    from ms.config.parts import METRICS

    return [key for name in METRICS if (key := METRICS.load(name).claim_key)]


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


def _write_claims(out: Path, compared, runs, metric: str) -> tuple[str, list, list[str]]:
    """claims.md and claims.csv for the claims' comparisons; returns the part summary.md shows, the
    tested rows and a line per claim not tested (the site shows both)."""
    metrics = list(dict.fromkeys([*claim_metrics(), metric]))
    rows, empty = test_all(compared, metrics)
    (out / "claims.md").write_text(claims_markdown(rows, empty, metrics, [r.path for r in runs]), encoding="utf-8")
    (out / "claims.csv").write_text(claims_csv(rows), encoding="utf-8")
    lines = untested(rows, empty)
    missing = "".join(f"\n- not tested here: {line}" for line in lines)
    return (claims_grid(rows) if rows else "No claim could be tested on these runs.") + "\n" + missing, rows, lines


def _records_its_model(metric: str) -> bool:
    """Whether the metric's runs record the model that produced it (BERTScore's, metrics.json `bertscore`)."""
    cls = metric_of_key(metric)
    return cls is None or cls.record_key is not None


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

    tables = {"table1": table1(chosen, paper, metric), "table2": table2(chosen, paper, metric)}
    for stem, table in tables.items():
        for suffix, render in ((".md", to_markdown), (".csv", to_csv), (".tex", to_latex)):
            (out / f"{stem}{suffix}").write_text(render(table), encoding="utf-8")

    ablation = None
    for stale in ("ablation.md", "ablation.csv"):  # a rerun into the same --out must not keep an old one
        (out / stale).unlink(missing_ok=True)
    if len(combinations(conds)) > 1:
        ablations, single = ablation_tables(conds, metric, paper.agents)
        (out / "ablation.md").write_text(ablation_markdown(ablations, metric, single), encoding="utf-8")
        (out / "ablation.csv").write_text(ablation_csv(ablations, paper.agents), encoding="utf-8")
        ablation = ablation_markdown(ablations, metric, single, level=2)

    compared = comparisons(conds, chosen)
    claims, claim_rows, not_tested = _write_claims(out, compared, runs, metric)
    warnings = record_warnings(
        [
            *((f"seed replicates {c.name}", c.first, run) for c in conds for run in c.runs[1:]),
            *(
                (f"runs paired in claim ({p.claim.id}) {p.label}", p.a.first, run)
                for p in compared
                if p.a is not p.b
                for run in p.b.runs
            ),
        ]
    )
    for warning in warnings:
        log.warning("%s", warning)

    figure4s = {}
    for (backbone, k, pool), cond in sorted(chosen.items()):
        if (k, pool) == (FIGURE4_K, FIGURE4_POOL):
            if metric not in cond.first.measured:
                log.warning("no Figure 4 for %s: %s did not measure %s", backbone, cond.name, metric)
                continue
            scorer = f"\nBERTScore model {cond.scorer}" if _records_its_model(metric) else ""
            fig = figure4(
                cond.curves(metric),
                f"{metric_label(metric)} vs memory fill: {backbone}, k = {k}, "
                f"Domain-pool (95% CI: band, or bar at a single fill; none at n < {MIN_CI_N}){scorer}",
                metric_label(metric),
            )
            figure4s[backbone] = save_figure(fig, out, f"figure4_{slug(backbone)}")

    for backbone, gates in by_gate(conds, chosen).items():
        fig = change_by_gate(
            {gate: change_since_first_fill(c, metric) for gate, c in gates.items()},
            f"Change since the first fill, by gate: {backbone}, k = {FIGURE4_K}, Domain-pool\n"
            "(paired over the same test questions; band: 95% CI)",
            f"change in {metric_label(metric)}",
        )
        figure4s[f"{backbone}, change since the first fill by gate"] = save_figure(
            fig, out, f"figure4_gates_{slug(backbone)}"
        )

    growth = write_growth([*runs, *screens], out)

    (out / "runs.md").write_text(runs_markdown(runs, why_not, paper, metric, skipped), encoding="utf-8")
    sharing = write_sharing(runs, out, metric, sharing_fill)
    stream_shares = write_stream_share(runs, out)
    quality = write_quality([*runs, *screens], out)
    access = write_access(runs, out, metric)  # every run under an access rule, against its open twin where given
    poison = write_poison(runs, out, metric)  # runs with a poisoning writer, against their clean runs
    usage = write_usage([*runs, *screens], out)
    summary = out / "summary.md"
    summary.write_text(
        summary_markdown(
            list(roots),
            metric,
            runs,
            skipped,
            tables,
            figure4s,
            growth,
            why_not,
            paper,
            claims,
            ablation,
            stream_shares,
        )
        + (f"\n{screens_markdown(screens)}" if screens else "")
        + (f"\n{sharing}\n" if sharing else "")
        + (f"\n{quality}" if quality else "")
        + (f"\n{access}\n" if access else "")
        + (f"\n{poison}\n" if poison else "")
        + (f"\n{exclusion_markdown(exclude_tests, excluded, runs)}\n" if exclude_tests else "")
        + f"\n## LLM usage and cost\n\n{usage}\n\n{records_markdown(warnings, runs)}",
        encoding="utf-8",
    )
    if html is not None:
        from ms.report.common.run_labels import run_labels
        from ms.report.html import ReportParts, write_site

        figures = {f"Figure 4, {name}": out / png for name, png in figure4s.items()}
        labels = run_labels([*runs, *screens])  # the site names runs by their condition, not their folder
        figures |= {f"Pool growth: {labels[name]}": out / png for name, png in growth.items()}
        write_site(
            html,
            ReportParts(
                roots, metric, runs, skipped, why_not, paper, tables, claim_rows, not_tested, figures, sharing_fill
            ),
        )
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
    try:
        summary = report_user_errors(
            "ms-report",
            lambda: write_report(args.sweep_dirs, out, args.metric, None, args.sharing_fill, html, args.exclude_tests),
        )
    except BaseException:
        summary = None
        raise
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
