"""Stream-only runs (eval.enabled=false) in ms-report: runs that grew a pool and answered no test question,
made to screen admission mechanisms cheaply. They have decisions.jsonl and no predictions.jsonl, so they
join what reads decisions (pool growth, the quality of what each gate admits once `ms-data gate-quality`
has scored them, LLM usage) and none of the tables, claims and figures of test scores."""

from pathlib import Path
from typing import Sequence

from ms.loop.stream_record import total
from ms.report.common.render import markdown_grid
from ms.report.common.runs import Run, Skipped
from ms.report.figures.growth import write_growth
from ms.report.usage.quality import write_quality
from ms.report.usage.usage import write_usage


def _counts(run: Run) -> list[str]:
    stream = run.written.stream
    return [str(total(counts) or 0) for counts in (stream.accepted, stream.rejected, stream.unscored_by_agent)]


def screens_markdown(screens: Sequence[Run]) -> str:
    """summary.md's section on the stream-only runs."""
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
