"""Who helped whom: for each agent of a run, whose memories it retrieved (which agents, which
backbones, its own agent, another agent of its domain or another domain) and the gain in the metric
those retrievals came with against k = 0. Per run, <out>/sharing/<run>.csv and <run>.png; sharing.md
says what each number is.

The matrix is counted in ms.report.sharing.counts, said in CSV and markdown by ms.report.sharing.text,
and drawn by ms.report.sharing.heatmap; this module writes them for every run.
"""

import logging
from pathlib import Path
from typing import Optional, Sequence

from ms.report.common.run_labels import file_name
from ms.report.common.runs import Run
from ms.report.common.writers import read_writers
from ms.report.sharing.baseline import find_baseline
from ms.report.sharing.counts import sharing_matrix
from ms.report.sharing.heatmap import heatmap
from ms.report.sharing.text import DEFINITIONS, sharing_csv, sharing_markdown

log = logging.getLogger(__name__)

FOLDER = "sharing"


def write_sharing(runs: Sequence[Run], out: Path, metric: str, fill: Optional[int] = None) -> str:
    """Draw the matrix of every run with retrievals into out/sharing; returns a line for summary.md."""
    folder = out / FOLDER
    if folder.is_dir():  # a rerun into the same --out must not keep an old run's files
        for stale in [*folder.glob("*.csv"), *folder.glob("*.png"), folder / "sharing.md"]:
            stale.unlink(missing_ok=True)
    sections, not_drawn = [], []
    for run in runs:
        at = run.last_fill if fill is None else fill
        rows = (run.predictions or {}).get(at, {})
        if run.cell[1] == 0 or not any(r.get("retrieved") for r in rows.values()):
            continue  # nothing retrieved at that fill (k = 0, older runs, or no such fill)
        writers = read_writers(run.path, run.record.backbone)
        if writers is None:
            log.warning("no sharing matrix for %s: neither a pool file nor memories.csv in its folder", run.name)
            not_drawn.append(f"- `{run.name}`: neither a pool file nor memories.csv in its folder")
            continue
        s = sharing_matrix(run, writers, find_baseline(run, runs, metric, at), metric, at)
        folder.mkdir(parents=True, exist_ok=True)
        stem = file_name(run.name, suffix=".csv")[: -len(".csv")]  # .csv and .png: one stem, both fit
        (folder / f"{stem}.csv").write_text(sharing_csv(s), encoding="utf-8")
        heatmap(
            s,
            f"Who helped whom: {run.name} ({run.record.backbone}, k = {run.record.k}, "
            f"{run.record.pool} pool, fill {at}%)",
        ).savefig(folder / f"{stem}.png", dpi=120)
        sections.append(sharing_markdown(s, stem))
    if not sections and not not_drawn:
        return ""
    text = "\n".join(
        [
            "# Who helped whom",
            "",
            DEFINITIONS,
            "",
            *sections,
            *(["## Not drawn", "", *not_drawn, ""] if not_drawn else []),
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sharing.md").write_text(text, encoding="utf-8")
    return f"Sharing matrices (who retrieved whose memories, and the gain against k = 0): {FOLDER}/sharing.md"
