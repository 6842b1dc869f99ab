"""runs.md (every run and why it is or is not in the tables), and summary.md's sections on the runs: its
head (every run and the table it is used in), the test questions left out, the run records."""

import logging
from typing import Sequence

from ms.report.common.conditions import SELECTION_RULE, Condition, used_in
from ms.report.common.records import differences, record_counts
from ms.report.common.render import markdown_grid, value_text
from ms.report.common.runs import Run, Skipped, metric_label
from ms.report.context import Report
from ms.report.tables.paper import PaperTables

log = logging.getLogger(__name__)


def _field_text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def overall_text(run: Run, metric: str) -> str:
    """The run on its own (not pooled with its replicates): mean [95% CI] n."""
    return value_text(Condition([run]).score(metric), show_n=True, digits=3)


def runs_markdown(
    runs: Sequence[Run], why_not: dict[str, str], paper: PaperTables, metric: str, skipped: Sequence[Skipped]
) -> str:
    """Every run, its condition in words, all its run fields and overall score; the ones in the tables
    first. Under each table, how many of its runs were recorded dirty or carry no run record."""
    written = {r.name: r.record.to_json() for r in runs}
    keys = list(dict.fromkeys(k for r in runs for k in written[r.name]))
    header = ["run", "condition", *keys, "overrides", "last fill", f"overall {metric} [95% CI]", "used in"]

    def row(run: Run, use: str) -> list[str]:
        return [
            run.name,
            run.words(),
            *(_field_text(written[run.name].get(k, "")) for k in keys),
            " ".join(run.overrides),
            f"{run.last_fill}%",
            overall_text(run, metric),
            use,
        ]

    def grid(shown: Sequence[Run], use) -> str:
        return f"{markdown_grid(header, [row(r, use(r)) for r in shown], len(header))}\n\n{record_counts(shown)}"

    in_tables = [r for r in runs if r.name not in why_not and used_in(r.cell, paper)]
    others = [r for r in runs if r not in in_tables]
    parts = ["# Runs\n", SELECTION_RULE + "\n", f"## Runs in the tables ({len(in_tables)})\n"]
    parts.append(grid(in_tables, lambda r: ", ".join(used_in(r.cell, paper))) if in_tables else "None.")
    parts.append(f"\n## Other runs ({len(others)})\n")
    parts.append(grid(others, lambda r: why_not.get(r.name, "no table shows this k and pool")) if others else "None.")
    parts.append(f"\n## Skipped: incomplete ({len(skipped)})\n")
    parts.append("".join(f"- `{s.path}`: {s.reason}\n" for s in skipped) or "None.")
    return "\n".join(parts) + "\n"


def use_of(run: Run, report: Report) -> str:
    """Which tables use the run, or why none does (summary.md and the site say it so)."""
    if run.name in report.why_not:
        return f"not used: {report.why_not[run.name]}"
    return f"used in {', '.join(used_in(run.cell, report.paper)) or 'no table (none shows this k and pool)'}"


def runs_section(report: Report) -> str:
    """runs.md, and summary.md's head: what was drawn, and every run with the table it is used in or why not."""
    runs, skipped, paper, metric = report.runs, report.skipped, report.paper, report.metric
    (report.out / "runs.md").write_text(runs_markdown(runs, report.why_not, paper, metric, skipped), encoding="utf-8")
    out = [
        "# ms report\n",
        f"Sweep dirs: {', '.join(f'`{r}`' for r in report.roots)}. Metric: {metric_label(metric)} "
        f"(the paper's code reported BERTScore {paper.metric_key}). Published numbers: {paper.source}. "
        "Every number of ours is a mean over test questions with its 95% bootstrap CI (runs without "
        "predictions.jsonl: metrics.json means, no CI).\n",
        f"## Runs ({len(runs)} complete, {len(skipped)} skipped)\n",
        f"{SELECTION_RULE} All run fields: [runs.md](runs.md).\n",
    ]
    for r in runs:
        out.append(
            f"- `{r.name}`: {r.words()}" + ("" if r.seed is None else f", seed {r.seed}") + f"; overall {metric} "
            f"{overall_text(r, metric)} at {r.last_fill}% fill; {use_of(r, report)}"
        )
    if runs:
        out.append(f"\n{record_counts(runs)}")
    if skipped:
        out.append("\n### Skipped (incomplete cells)\n")
        out += [f"- `{s.path}`: {s.reason}" for s in skipped]
    return "\n".join(out) + "\n"


def exclusion_section(report: Report) -> str:
    """What --exclude-tests left out, and the n that remains, per run at its last fill ('' without it)."""
    if report.exclude_tests is None:
        return ""
    lines = [
        "\n## Test questions left out\n",
        f"{len(report.excluded)} test ids listed in `{report.exclude_tests}` are left out of every table, claim "
        "and figure above; claims pair per question, so both sides of each comparison lose the same ones.\n",
    ]
    rows = []
    for run in report.runs:
        dropped = run.left_out(run.last_fill)
        kept = "-" if dropped is None else len(run.predictions.get(run.last_fill, {}))
        rows.append(
            [run.name, run.last_fill, "not possible: no predictions.jsonl" if dropped is None else dropped, kept]
        )
    return "\n".join([*lines, markdown_grid(["run", "fill", "left out", "n that remains"], rows, 1)]) + "\n"


def records_section(report: Report) -> str:
    """Whether the runs pooled as seed replicates or paired in a claim ran alike: each difference, logged and
    said once, under the first use that sets its two runs together; and the runs without a record to check."""
    uses = [
        *((f"seed replicates {c.name}", c.first, run) for c in report.conds for run in c.runs[1:]),
        *(
            (f"runs paired in claim ({p.claim.id}) {p.label}", p.a.first, run)
            for p in report.compared
            if p.a is not p.b
            for run in p.b.runs
        ),
    ]
    warnings: dict[str, str] = {}
    for use, a, b in uses:
        for line in differences(a, b):
            warnings.setdefault(line, f"{use} differ in {line}")
    for warning in warnings.values():
        log.warning("%s", warning)
    lacking = [r.name for r in report.runs if r.written.provenance is None]
    out = [
        "## Reproducibility records\n",
        "Runs pooled as seed replicates or paired in a claim are checked for the same model files "
        "(SHA-256), engines and package versions (metrics.json's `provenance`).\n",
        *([f"- warning: {w}" for w in warnings.values()] or ["No differences."]),
    ]
    if lacking:
        out.append(
            f"\n{len(lacking)} run(s) carry no record (written before metrics.json had one), so they "
            f"are not checked: {', '.join(f'`{name}`' for name in lacking)}"
        )
    return "\n".join(out) + "\n"
