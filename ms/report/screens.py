"""Stream-only runs (eval.enabled=false) in ms-report: runs that grew a pool and answered no test question,
made to screen admission mechanisms cheaply. They have decisions.jsonl and no predictions.jsonl, so they
join what reads decisions (pool growth, the quality of what each gate admits once `ms-data gate-quality`
has scored them, LLM usage) and none of the tables, claims and figures of test scores. Also the pool
growth plots every run with decisions gets."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from ms.config.files import DECISIONS_FILE
from ms.report.figures import pool_growth
from ms.report.quality import write_quality
from ms.report.render import markdown_grid
from ms.report.run_labels import file_name, run_labels
from ms.report.runs import Run, Skipped, read_jsonl
from ms.report.usage import write_usage

log = logging.getLogger(__name__)


def write_growth(runs: Sequence[Run], out: Path) -> dict[str, str]:
    """A pool-growth plot per run with decisions (pool_growth_<run>.png); run name -> its file name."""
    growth, labels = {}, run_labels(runs)
    for run in runs:
        path = run.path / DECISIONS_FILE
        decisions = read_jsonl(path) if path.exists() else []
        if not decisions:
            log.warning("no pool-growth plot for %s: %s missing or empty", run.name, path)
            continue
        png = file_name(run.name, "pool_growth_", ".png")
        # named by its condition in words, as the site names it: a folder's name can be too long for a title
        pool_growth(decisions, f"Pool growth: {labels[run.name]}").savefig(out / png, dpi=120)
        growth[run.name] = png
    return growth


def _counts(run: Run) -> list[str]:
    stream = run.metrics.get("stream") or {}
    return [str(sum((stream.get(key) or {}).values())) for key in ("accepted", "rejected", "unscored_by_agent")]


def screens_markdown(screens: Sequence[Run]) -> str:
    """summary.md's section on the stream-only runs ('' where there are none)."""
    if not screens:
        return ""
    rows = [
        [
            f"`{r.name}`",
            str(r.gate),
            str(r.record.best_of) + (f" ({r.record.select})" if r.record.select else ""),
            *_counts(r),
        ]
        for r in screens
    ]
    return (
        f"## Stream-only runs ({len(screens)})\n\n"
        "Runs that grew their pool and answered no test question (eval.enabled=false), to screen admission: "
        "no table, claim or figure of test scores uses them. What their gates admitted, scored against the "
        "references: `ms-data gate-quality RUN_DIR`, then quality.md here.\n\n"
        + markdown_grid(["run", "gate", "best of", "accepted", "rejected", "unscored"], rows, 3)
        + "\n"
    )


def write_screens_report(roots: Sequence[Path], out: Path, screens: Sequence[Run], skipped: Sequence[Skipped]) -> Path:
    """The report of sweep dirs whose every finished run is stream-only: pool growth, quality, usage."""
    out.mkdir(parents=True, exist_ok=True)
    growth = write_growth(screens, out)
    quality = write_quality(screens, out)
    usage = write_usage(screens, out)
    parts = [
        "# ms report\n",
        f"Sweep dirs: {', '.join(f'`{r}`' for r in roots)}. Every finished run here is stream-only, so there "
        "is no test score to tabulate.\n",
        screens_markdown(screens),
        *(f"### Skipped: `{s.path}`\n\n{s.reason}\n" for s in skipped),
        "## Pool growth along the stream\n",
        *(f"### {name}\n\n![pool growth, {name}]({png})\n" for name, png in growth.items()),
        quality,
        f"## LLM usage and cost\n\n{usage}\n",
    ]
    summary = out / "summary.md"
    summary.write_text("\n".join(p for p in parts if p), encoding="utf-8")
    return summary
