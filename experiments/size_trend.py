"""Claims (a) and (c) and the stream answers' quality, family by family against parameter count: one
table (markdown and CSV) and one figure (PNG and PDF), from committed reports only (each family's claims.csv and its
Figure 4 run's quality.jsonl, written by `ms-data gate-quality`).

    python experiments/size_trend.py --out results/size_trend \
        --family "SmolLM2-135M|135|results/table1_offline|results/figure4_offline|results/figure4_controls_offline" \
        --family "Gemma 3 270M|268|results/table1_offline_gemma3|results/figure4_offline_gemma3|" \
        --family "Qwen2.5-Coder-0.5B|494|results/figure4_offline_qwen|results/figure4_offline_qwen|results/figure4_controls_offline_qwen"

A family is NAME|MILLIONS OF PARAMETERS|folder with claim (a)|folder with claim (c)|folder with the
reference-grown curve (gate=all+reference; empty where there is none). Claim (a) is k = 3 against k = 0
and claim (c) the rubric-gated growth curve's last fill against its first, each as ms-report's claims
table states it (the same CI and p). The stream answers' quality is BERTScore F1 against the stream
questions' references over every answer the rubric gate judged (admitted or not) and over the admitted
ones, with 95% bootstrap CIs over answers.
"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ms.common.errors import UserError
from ms.common.stats import Estimate, interval_text, mean_ci

# The gates of the curves, as claims.csv's gate_a names them (ms.report.common.runs.Run.gate): the rubric's, and
# every pair admitted with the stream writing its reference answers.
RUBRIC_GATE, REFERENCE_GATE = "rubric", "all+reference"


@dataclass(frozen=True)
class Family:
    name: str
    millions: float
    claim_a: Path
    claim_c: Path
    reference: Optional[Path]

    @classmethod
    def parse(cls, text: str) -> "Family":
        parts = text.split("|")
        if len(parts) != 5:
            raise UserError(
                f"--family {text!r}: expected NAME|MILLIONS|A_DIR|C_DIR|REFERENCE_DIR (5 fields, "
                f"the last may be empty), got {len(parts)}"
            )
        name, millions, a, c, ref = parts
        return cls(name, float(millions), Path(a), Path(c), Path(ref) if ref else None)


@dataclass(frozen=True)
class Row:
    """One claims.csv row: the estimate, its CI, p, n and verdict."""

    estimate: float
    lo: float
    hi: float
    p: float
    n: int
    verdict: str

    def text(self) -> str:
        return f"{self.estimate:+.3f}{interval_text(self.lo, self.hi, self.n, signed=True)}, p = {self.p:.4f}, n = {self.n}"


def claim_row(folder: Path, claim: str, comparison: str, gate: str = RUBRIC_GATE) -> Optional[Row]:
    """The ref_logprob row of `claim` whose comparison starts with `comparison` and whose a side grew its
    pool under `gate` (claims.csv's gate_a); None where the report has none."""
    path = folder / "claims.csv"
    if not path.is_file():
        raise UserError(f"{path}: no claims.csv (publish the sweep first)")
    with path.open(newline="") as f:
        rows = csv.DictReader(f)
        if "gate_a" not in (rows.fieldnames or []):
            raise UserError(f"{path}: no gate_a column (drawn before ms-report wrote it): redraw it with ms-report")
        for r in rows:
            if (
                r["claim"] == claim
                and r["metric"] == "ref_logprob"
                and r["comparison"].startswith(comparison)
                and r["gate_a"] == gate
            ):
                return Row(
                    float(r["estimate"]), float(r["ci_lo"]), float(r["ci_hi"]), float(r["p"]), int(r["n"]), r["verdict"]
                )
    return None


def rubric_run(folder: Path) -> Path:
    """The one run under `folder`/runs with a quality.jsonl (the rubric-gated Figure 4 run)."""
    found = sorted((folder / "runs").glob("*/quality.jsonl"))
    if len(found) != 1:
        raise UserError(
            f"{folder}/runs: expected one run with quality.jsonl (ms-data gate-quality RUN), found {len(found)}"
        )
    return found[0]


def stream_quality(path: Path) -> tuple[Estimate, Estimate]:
    """BERTScore F1 of every judged stream answer with a reference, and of the admitted ones."""
    rows = [json.loads(line) for line in path.open() if line.strip()]
    scored = [r for r in rows if r.get("F1") is not None]
    admitted = [r["F1"] for r in scored if r["accepted"]]
    return mean_ci([r["F1"] for r in scored]), mean_ci(admitted)


def estimate_text(e: Estimate) -> str:
    return f"{e.mean:.3f}{interval_text(e.lo, e.hi, e.n)} (n = {e.n})"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", required=True, type=Family.parse)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    table = []
    for fam in sorted(args.family, key=lambda f: f.millions):
        a = claim_row(fam.claim_a, "a", "k = 3 against k = 0")
        c = claim_row(fam.claim_c, "c", "fill 100%")
        ref = claim_row(fam.reference, "c", "fill 100%", REFERENCE_GATE) if fam.reference else None
        every, admitted = stream_quality(rubric_run(fam.claim_c))
        table.append((fam, a, c, ref, every, admitted))
    write_markdown(args.out / "size_trend.md", table)
    write_csv(args.out / "size_trend.csv", table)
    draw(args.out, table)
    print(f"size trend written to {args.out}/ (size_trend.md, .csv, .png, .pdf)")


def write_markdown(path: Path, table) -> None:
    lines = [
        "| family | parameters | (a) k = 3 - k = 0 [95% CI] | (c) rubric pool, last - first fill | "
        "(c) reference-grown pool | stream answers' BERTScore F1, all judged | the rubric-admitted ones |",
        "|---|---:|---|---|---|---|---|",
    ]
    for fam, a, c, ref, every, admitted in table:
        cells = [r.text() + f", {r.verdict}" if r else "not run" for r in (a, c, ref)]
        lines.append(
            f"| {fam.name} | {fam.millions:.0f}M | {' | '.join(cells)} | {estimate_text(every)} | "
            f"{estimate_text(admitted)} |"
        )
    path.write_text("\n".join(lines) + "\n")


def write_csv(path: Path, table) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["family", "millions", "quantity", "estimate", "ci_lo", "ci_hi", "p", "n", "verdict"])
        for fam, a, c, ref, every, admitted in table:
            for name, r in (("a_k3_vs_k0", a), ("c_rubric", c), ("c_reference", ref)):
                if r:
                    w.writerow([fam.name, fam.millions, name, r.estimate, r.lo, r.hi, r.p, r.n, r.verdict])
            for name, e in (("stream_f1_all", every), ("stream_f1_admitted", admitted)):
                w.writerow([fam.name, fam.millions, name, e.mean, e.lo, e.hi, "", e.n, ""])


def draw(out: Path, table) -> None:
    from ms.report.figures.canvas import new_figure, save_figure

    fig = new_figure(12, 3.6)
    axes = fig.subplots(1, 3)
    x = [fam.millions for fam, *_ in table]

    def series(ax, values, label, marker):
        pts = [(xi, v) for xi, v in zip(x, values) if v is not None]
        if not pts:
            return
        xs, vs = zip(*pts)
        mid = [v[0] for v in vs]
        # joined only where every family has a value: a line across a missing family would draw one
        ax.errorbar(
            xs,
            mid,
            yerr=[[m - v[1] for m, v in zip(mid, vs)], [v[2] - m for m, v in zip(mid, vs)]],
            marker=marker,
            capsize=4,
            label=label,
            linestyle="-" if len(pts) == len(values) else "none",
        )

    row = lambda r: (r.estimate, r.lo, r.hi) if r else None  # noqa: E731
    series(axes[0], [row(t[1]) for t in table], "k = 3 - k = 0", "o")
    series(axes[1], [row(t[2]) for t in table], "rubric-gated pool", "o")
    series(axes[1], [row(t[3]) for t in table], "reference-grown pool", "s")
    est = lambda e: (e.mean, e.lo, e.hi)  # noqa: E731
    series(axes[2], [est(t[4]) for t in table], "all judged answers", "o")
    series(axes[2], [est(t[5]) for t in table], "admitted answers", "s")
    titles = ["(a) gain of k = 3 over k = 0", "(c) last fill - first fill", "stream answers vs references"]
    ylabels = ["ref_logprob difference (nats)", "ref_logprob difference (nats)", "BERTScore F1"]
    for ax, title, ylabel in zip(axes, titles, ylabels):
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{fam.name}\n{fam.millions:.0f}M" for fam, *_ in table], fontsize=7)
        ax.minorticks_off()
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
        if ax is not axes[2]:
            ax.axhline(0, color="grey", linewidth=0.8)
        ax.legend(fontsize=7)
    paired_n = sorted({r.n for t in table for r in t[1:4] if r})
    stream_n = sorted({t[4].n for t in table})
    fig.suptitle(
        f"Claims paired over n = {'/'.join(map(str, paired_n))} test questions; stream answers n = "
        f"{'/'.join(map(str, stream_n))} per family; bars: 95% bootstrap CI",
        fontsize=8,
    )
    save_figure(fig, out, "size_trend")  # PNG and PDF, as ms-report writes its figures


if __name__ == "__main__":
    main()
