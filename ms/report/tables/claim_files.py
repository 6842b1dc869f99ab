"""claims.md and claims.csv: the claims' rows (ms.report.tables.claims) as tables, how each claim is tested, which
runs were paired and how many of them were recorded dirty or without a run record, and what no run could test."""

from pathlib import Path
from typing import Callable, Optional, Sequence

from ms.common.stats import ALPHA, CONFIDENCE, RESAMPLES
from ms.config.parts import METRICS
from ms.report.common.pairing import NOT_COMPARED
from ms.report.common.records import record_counts
from ms.report.common.render import csv_number, csv_text, markdown_grid
from ms.report.common.runs import Run, metric_words
from ms.report.context import Report
from ms.report.tables.claims import CLAIMS, ClaimRow, Comparison, comparisons, higher_is_better, test_all

# claims.csv's columns, each with what it holds of a row.
CSV_COLUMNS: dict[str, Callable[[ClaimRow], object]] = {
    "claim": lambda row: row.comparison.claim.id,
    "claim_text": lambda row: row.comparison.claim.text,
    "comparison": lambda row: row.comparison.label,
    "setting": lambda row: row.comparison.setting,
    "metric": lambda row: row.metric,
    "estimate": lambda row: csv_number(row.result.estimate),
    "ci_lo": lambda row: csv_number(row.result.lo),
    "ci_hi": lambda row: csv_number(row.result.hi),
    "p": lambda row: csv_number(row.result.p),
    "n": lambda row: row.result.n,
    "agent_wins": lambda row: f"{row.wins}/{row.agents}",
    "verdict": lambda row: row.result.verdict,
    "runs_a": lambda row: row.comparison.a.name,
    "runs_b": lambda row: row.comparison.b.name,
    "fill_a": lambda row: row.comparison.fill_a,
    "fill_b": lambda row: row.comparison.fill_b,
    # What admitted each side's stream pairs, short (Run.gate: "rubric", "random~both", "all+reference"), so
    # that a script picks rows by gate without reading the setting's words (experiments/size_trend.py).
    "gate_a": lambda row: row.comparison.a.gate,
    "gate_b": lambda row: row.comparison.b.gate,
}


def claims_csv(rows: Sequence[ClaimRow]) -> str:
    return csv_text([list(CSV_COLUMNS), *([value(row) for value in CSV_COLUMNS.values()] for row in rows)])


def claim_runs(rows: Sequence[ClaimRow]) -> list[Run]:
    """Every run the rows compare, once each, in the order the rows name them."""
    found = {r.name: r for row in rows for side in (row.comparison.a, row.comparison.b) for r in side.runs}
    return list(found.values())


def _signed(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:+.3f}"


def claims_grid(rows: Sequence[ClaimRow]) -> str:
    """The claims table in Markdown, as claims.md and summary.md show it, and under it how many of the runs
    it compares were recorded dirty or carry no run record; a line saying so where there is no row."""
    if not rows:
        return "No claim could be tested on these runs."
    header = [
        "claim",
        "comparison",
        "setting",
        "metric",
        "a - b [95% CI]",
        "p",
        "n",
        "agents ahead",
        "verdict",
        "runs (a vs b)",
    ]
    cells = [
        [
            f"({c.claim.id})",
            c.label,
            c.setting,
            row.metric,
            f"{_signed(r.estimate)} [{_signed(r.lo)}, {_signed(r.hi)}]" if r.lo is not None else _signed(r.estimate),
            "–" if r.p is None else f"{r.p:.3g}",
            str(r.n),
            f"{row.wins}/{row.agents}",
            f"**{r.verdict}**",
            f"{c.a.name} vs {c.b.name}" if c.a is not c.b else c.a.name,
        ]
        for row in rows
        for c, r in [(row.comparison, row.result)]
    ]
    # left-aligned: verdicts and run names read better so; under it, how far the runs' records vouch for them
    return markdown_grid(header, cells, len(header)) + "\n\n" + record_counts(claim_runs(rows))


def untested(rows: Sequence[ClaimRow], empty: Sequence[Comparison]) -> list[str]:
    """One line per claim with no row, saying why."""
    tested = {row.comparison.claim.id for row in rows}
    lines = []
    for claim in CLAIMS.values():
        if claim.id in tested:
            continue
        without = [c for c in empty if c.claim is claim]
        why = (
            f"runs found ({'; '.join(f'{c.label}: {c.a.name} vs {c.b.name}' for c in without)}) but without "
            "per-question values for these metrics (no predictions.jsonl, or the metric not recorded)"
            if without
            else f"no runs: it needs {claim.needs}"
        )
        lines.append(f"({claim.id}) {claim.text}: {why}.")
    return lines


def _shown(folder: Path) -> str:
    """Relative to the working folder where it lies below it, so committed reports name no machine's paths."""
    try:
        return str(Path(folder).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(folder)


def _better(metrics: Sequence[str]) -> str:
    lower = [m for m in metrics if not higher_is_better(m)]
    if not lower:
        return "Higher is better for all."
    return (
        f"Higher is better, except for {', '.join(lower)}, where lower is: its differences are b - a, so that "
        f"a difference above 0 says a is better."
    )


PAIRING_RULE = (
    "Which runs are paired: two conditions only where their cells (metrics.json `cell.config`, or the "
    ".hydra/config.yaml saved beside a run without one) differ in the keys the claim varies ("
    + "; ".join(f"({c.id}) {', '.join(c.varies)}" for c in CLAIMS.values() if c.varies)
    + "; a section stands for every key in it, gate for gate.name, gate.probes, ...) and besides only in keys "
    "that cannot change a paired question's value: "
    + ", ".join(NOT_COMPARED)
    + ". A comparison whose runs differ in one of those names it in its setting. "
    "A key one of the two cells lacks (a setting added after that run) is not compared."
)


def claims_markdown(
    rows: Sequence[ClaimRow], empty: Sequence[Comparison], metrics: Sequence[str], folders: Sequence[Path]
) -> str:
    """claims.md: how the numbers were made and from which run folders, the table, how each claim is
    judged, and the claims no run could test."""
    out = [
        "# Claims\n",
        f"Numbers: the mean paired difference a - b over the test questions both sides measured (matched on "
        f"agent and test id), its {CONFIDENCE:.0%} bootstrap CI (scipy BCa, {RESAMPLES} resamples), a two-sided "
        f"sign-flip permutation p ({RESAMPLES} resamples), and a verdict at alpha = {ALPHA}: supported where the "
        f"CI lies above 0 and p < alpha, contradicted where it lies below 0 and p < alpha, inconclusive "
        f"otherwise. Seed replicates are averaged per question first. Run folders read: {len(folders)}, "
        f"listed at the end.\n",
        f"Metrics, where the runs have them: {'; '.join(f'{m}, {metric_words(m)}' for m in metrics)}. "
        + _better(metrics)
        + " 'agents ahead': agents whose mean difference is above 0, of those compared.\n",
        claims_grid(rows),
        "",
        "## How each claim is tested\n",
        *(f"- ({c.id}) {c.text}: {c.how}" for c in CLAIMS.values()),
        "",
        PAIRING_RULE,
        "",
    ]
    tested = {row.comparison.claim.id for row in rows}
    partial = [c for c in empty if c.claim.id in tested]
    if partial:
        out += [
            "## Comparisons without per-question values\n",
            *(f"- ({c.claim.id}) {c.label}, {c.setting}: {c.a.name} vs {c.b.name}" for c in partial),
            "",
        ]
    missing = [f"- {line}" for line in untested(rows, empty)]
    out += [
        "## Not tested here (no runs)\n",
        *(missing or ["None."]),
        "",
        "## Run folders read\n",
        *([f"- `{_shown(f)}`" for f in folders] or ["None."]),
    ]
    return "\n".join(out) + "\n"


def claims_section(report: Report) -> str:
    """claims.md and claims.csv for the claims' comparisons; summary.md's grid of them, and a line per claim
    not tested (the site shows both)."""
    # Every claim is tested on the report's metric and on each registered metric's `claim_key`: the headline
    # metric, BERTScore P, and the cheap, sensitive one, ref_logprob (ARCHITECTURE.md, "Metrics").
    keys = [key for name in METRICS if (key := METRICS.load(name).claim_key)]
    metrics = list(dict.fromkeys([*keys, report.metric]))
    report.compared = comparisons(report.conds, report.chosen)
    rows, empty = test_all(report.compared, metrics)
    folders = [r.path for r in report.runs]
    (report.out / "claims.md").write_text(claims_markdown(rows, empty, metrics, folders), encoding="utf-8")
    (report.out / "claims.csv").write_text(claims_csv(rows), encoding="utf-8")
    report.claim_rows, report.untested = rows, untested(rows, empty)
    missing = "".join(f"\n- not tested here: {line}" for line in report.untested)
    return (
        "\n## Claims\n\nPaired tests of the paper's claims; method, per-claim rules and run folders: "
        f"[claims.md](claims.md), [claims.csv](claims.csv).\n\n{claims_grid(rows)}\n{missing}\n"
    )
