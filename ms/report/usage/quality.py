"""ms-report's quality.md and quality.csv: per run and agent, the mean BERTScore of the answers a gate
admitted and of those it rejected, with 95% CIs, from the quality.jsonl that `ms-data gate-quality`
(ms.report.usage.gate_quality) wrote beside each run. A gate that tells good answers from bad should admit
answers closer to the references than it rejects."""

from pathlib import Path
from typing import Sequence

from ms.common.stats import Estimate, mean_ci
from ms.config.files import QUALITY_FILE
from ms.metrics.evaluate import BERTSCORE_KEYS
from ms.report.common.render import csv_number, csv_text, markdown_grid
from ms.report.common.runs import Run, read_jsonl

ALL = "all"
GROUPS = (("admitted", True), ("rejected", False))


def quality_rows(runs: Sequence[Run]) -> list[dict]:
    """Per run with a quality.jsonl, per agent (ALL first) and group (admitted, rejected): how many
    decisions, how many without a reference, and the mean P/R/F1 of the rest with their CIs."""
    rows = []
    for run in runs:
        path = run.path / QUALITY_FILE
        if not path.is_file():
            continue
        records = read_jsonl(path)
        for agent in [ALL, *dict.fromkeys(r["agent"] for r in records)]:
            for group, accepted in GROUPS:
                chosen = [r for r in records if r["accepted"] == accepted and agent in (ALL, r["agent"])]
                scored = [r for r in chosen if r.get("reference") is not None]
                rows.append(
                    {
                        "run": run.name,
                        "gate": run.gate,
                        "agent": agent,
                        "group": group,
                        "decisions": len(chosen),
                        "no_reference": len(chosen) - len(scored),
                        "model": next((r["bertscore"] for r in scored if r.get("bertscore")), None),
                        **{m: mean_ci([r[m] for r in scored]) for m in BERTSCORE_KEYS},
                    }
                )
    return rows


HEADER = ["agent", "answers", "decisions", "no reference", *(f"{m} [95% CI] n" for m in BERTSCORE_KEYS)]


def _cells(row: dict) -> list[str]:
    return [
        row["agent"],
        row["group"],
        str(row["decisions"]),
        str(row["no_reference"]),
        *(row[m].text(3) for m in BERTSCORE_KEYS),
    ]


def quality_markdown(rows: Sequence[dict]) -> str:
    parts = [
        "# Quality of what each gate admits",
        "",
        "Each stream answer a gate judged, scored by BERTScore against its stream question's reference answer "
        f"(`ms-data gate-quality RUN_DIR`, the run's own BERTScore settings; model: "
        f"{next((r['model'] for r in rows if r['model']), 'none scored')}). Per run and agent, the mean of the "
        "answers it admitted and of those it rejected, each with its 95% bootstrap CI over answers and n; "
        "`no reference`: decisions whose stream question has no reference answer, counted and not scored.",
        "",
    ]
    for run in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == run]
        parts += [f"## {run} (gate {mine[0]['gate']})", "", markdown_grid(HEADER, [_cells(r) for r in mine], 2), ""]
    return "\n".join(parts)


def quality_csv(rows: Sequence[dict]) -> str:
    table = [
        [
            "run",
            "gate",
            "agent",
            "answers",
            "decisions",
            "no_reference",
            "n",
            *(f"{m}{s}" for m in BERTSCORE_KEYS for s in ("", "_ci_lo", "_ci_hi")),
        ]
    ]
    for r in rows:
        estimates: list[Estimate] = [r[m] for m in BERTSCORE_KEYS]
        table.append(
            [
                *(r[key] for key in ("run", "gate", "agent", "group", "decisions", "no_reference")),
                estimates[0].n,
                *(csv_number(x) for e in estimates for x in (e.mean, e.lo, e.hi)),
            ]
        )
    return csv_text(table)


def write_quality(runs: Sequence[Run], out: Path) -> str:
    """quality.md and quality.csv for the runs with a quality.jsonl; returns summary.md's section ('' if none)."""
    for stale in ("quality.md", "quality.csv"):  # a rerun into the same --out must not keep an old one
        (out / stale).unlink(missing_ok=True)
    rows = quality_rows(runs)
    if not rows:
        return ""
    (out / "quality.md").write_text(quality_markdown(rows), encoding="utf-8")
    (out / "quality.csv").write_text(quality_csv(rows), encoding="utf-8")
    overall = [r for r in rows if r["agent"] == ALL]
    return (
        "## Quality of what each gate admits\n\nBERTScore of each gated answer against its reference, admitted "
        "vs rejected; per agent: [quality.md](quality.md), [quality.csv](quality.csv).\n\n"
        + markdown_grid(
            ["run", "gate", "answers", "decisions", "no reference", *(f"{m} [95% CI] n" for m in BERTSCORE_KEYS)],
            [[r["run"], r["gate"], *_cells(r)[1:]] for r in overall],
            3,
        )
        + "\n"
    )
