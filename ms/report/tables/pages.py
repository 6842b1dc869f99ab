"""runs.md (every run and why it is or is not in the tables) and summary.md (the front page)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from ms.report.common.conditions import FIGURE4_K, SELECTION_RULE, Condition, used_in
from ms.report.common.records import record_counts
from ms.report.common.render import Table, markdown_grid, to_markdown, value_text
from ms.report.common.runs import Run, Skipped, metric_label
from ms.report.tables.paper import PaperTables


def _field_text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _overall(run: Run, metric: str) -> str:
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
            _overall(run, metric),
            use,
        ]

    in_tables = [r for r in runs if r.name not in why_not and used_in(r.cell, paper)]
    others = [r for r in runs if r not in in_tables]
    parts = ["# Runs\n", SELECTION_RULE + "\n", f"## Runs in the tables ({len(in_tables)})\n"]
    parts.append(
        markdown_grid(header, [row(r, ", ".join(used_in(r.cell, paper))) for r in in_tables], len(header))
        + f"\n\n{record_counts(in_tables)}"
        if in_tables
        else "None."
    )
    parts.append(f"\n## Other runs ({len(others)})\n")
    parts.append(
        markdown_grid(
            header, [row(r, why_not.get(r.name, "no table shows this k and pool")) for r in others], len(header)
        )
        + f"\n\n{record_counts(others)}"
        if others
        else "None."
    )
    parts.append(f"\n## Skipped: incomplete ({len(skipped)})\n")
    parts.append("".join(f"- `{s.path}`: {s.reason}\n" for s in skipped) or "None.")
    return "\n".join(parts) + "\n"


def summary_markdown(
    roots: Sequence[Path],
    metric: str,
    runs: Sequence[Run],
    skipped: Sequence[Skipped],
    tables: dict[str, Table],
    figure4s: dict[str, str],
    growth: dict[str, str],
    why_not: dict[str, str],
    paper: PaperTables,
    claims: str,
    ablation: Optional[str] = None,
    stream_shares: Optional[dict[str, str]] = None,
) -> str:
    """The report's front page: what was found, what was left out, and every table, claim and figure.
    `claims` is the claims table (claims_grid and the untested claims); `ablation` is
    ablation_markdown(..., level=2) where ablation.md was written, else None; `stream_shares`: run name ->
    the line shown under its pool-growth curve (write_stream_share)."""
    out = [
        "# ms report\n",
        f"Sweep dirs: {', '.join(f'`{r}`' for r in roots)}. Metric: {metric_label(metric)} "
        f"(the paper's code reported BERTScore {paper.metric_key}). Published numbers: {paper.source}. "
        "Every number of ours is a mean over test questions with its 95% bootstrap CI (runs without "
        "predictions.jsonl: metrics.json means, no CI).\n",
        f"## Runs ({len(runs)} complete, {len(skipped)} skipped)\n",
        f"{SELECTION_RULE} All run fields: [runs.md](runs.md).\n",
    ]
    for r in runs:
        use = (
            f"not used: {why_not[r.name]}"
            if r.name in why_not
            else f"used in {', '.join(used_in(r.cell, paper)) or 'no table (none shows this k and pool)'}"
        )
        out.append(
            f"- `{r.name}`: {r.words()}" + ("" if r.seed is None else f", seed {r.seed}") + f"; overall {metric} "
            f"{_overall(r, metric)} at {r.last_fill}% fill; {use}"
        )
    if runs:
        out.append(f"\n{record_counts(runs)}")
    if skipped:
        out.append("\n### Skipped (incomplete cells)\n")
        out += [f"- `{s.path}`: {s.reason}" for s in skipped]
    out += [
        "\n## Claims\n",
        "Paired tests of the paper's claims; method, per-claim rules and run folders: "
        "[claims.md](claims.md), [claims.csv](claims.csv).\n",
        claims,
    ]
    for stem, table in tables.items():
        out += [
            f"\n## {table.title}\n",
            f"Files: [{stem}.md]({stem}.md), [{stem}.csv]({stem}.csv), [{stem}.tex]({stem}.tex)\n",
            to_markdown(table),
        ]
    if ablation is not None:
        out += ["", "Files: [ablation.md](ablation.md), [ablation.csv](ablation.csv)\n", ablation]
    out.append(f"\n## Figure 4: {metric_label(metric)} against memory fill (k = {FIGURE4_K}, Domain-pool)\n")
    out += [f"![Figure 4, {b}]({png}) ([pdf]({Path(png).with_suffix('.pdf')}))\n" for b, png in figure4s.items()]
    if not figure4s:
        out.append("No dense run at k = 3 with a Domain-pool.\n")
    out.append("\n## Pool growth along the stream\n")
    shares = stream_shares or {}
    out += [
        f"### {name}\n\n![pool growth, {name}]({png})\n" + (f"\n{shares[name]}\n" if name in shares else "")
        for name, png in growth.items()
    ]
    if not growth:
        out.append("No run has a decisions.jsonl.\n")
    return "\n".join(out) + "\n"


def exclusion_markdown(path: Path, excluded: frozenset[str], runs: Sequence[Run]) -> str:
    """What --exclude-tests left out, and the n that remains, per run at its last fill."""
    lines = [
        "## Test questions left out\n",
        f"{len(excluded)} test ids listed in `{path}` are left out of every table, claim and figure above; "
        "claims pair per question, so both sides of each comparison lose the same ones.\n",
        "| run | fill | left out | n that remains |",
        "|---|---:|---:|---:|",
    ]
    for run in runs:
        dropped = run.left_out(run.last_fill)
        if dropped is None:
            lines.append(f"| {run.name} | {run.last_fill} | not possible: no predictions.jsonl | - |")
        else:
            lines.append(
                f"| {run.name} | {run.last_fill} | {dropped} | {len(run.predictions.get(run.last_fill, {}))} |"
            )
    return "\n".join(lines)
