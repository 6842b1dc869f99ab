"""How far a mechanism gets a model-written pool toward the reference-written one: the measures of a
mechanism's cell against its baselines, paired per test question at the last fill. Markdown on stdout.

    python experiments/mechanism.py MECHANISM_RUN --rubric R_RUN --reference REF_RUN \
        [--random G_RUN] [--label NAME] [--metric ref_logprob]

    # retirement on top of the rubric gate, against figure4_offline's rubric cell and the
    # reference-written pool of figure4_controls_offline
    python experiments/mechanism.py RUN --rubric results/figure4_offline/runs/backbone=smollm2 \
        --reference "results/figure4_controls_offline/runs/backbone=smollm2,fills=[27,100],gate=all,stream.answers=reference"

Rows (each a paired difference over the test questions all runs share, 95% BCa CI and sign-flip p from
ms.common.stats.paired, as in ms-report's claims):
- (c) the mechanism's last fill minus its first: does its pool help as it grows?
- M - R: the mechanism's pool against the rubric-gated pool at the last fill;
- (g) M - G: against a random gate matched to the mechanism's own admissions (when given);
- Ref - R: the gap there is to close;
- share of the gap closed, (M - R) / (Ref - R): the ratio of the mean differences, its CI a BCa bootstrap
  over questions resampling the three runs' values together (scipy.stats.bootstrap, paired). Where
  Ref - R is small the ratio's interval is wide: read M - R and (g) first.

The runs must be cells of the same data, backbone and backbone settings (engine, dtype): the script
refuses runs whose cell records differ in `backbone.*` or `data_sha256`.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
from scipy import stats

from ms.common.stats import CONFIDENCE, RESAMPLES, SEED, paired
from ms.report.runs import PREDICTIONS_FILE, Item, read_jsonl


def by_fill(run: Path, metric: str) -> dict[int, dict[Item, float]]:
    path = run / PREDICTIONS_FILE
    if not path.exists():
        raise SystemExit(f"{path}: no such file (each run folder needs its {PREDICTIONS_FILE})")
    out: dict[int, dict[Item, float]] = {}
    for r in read_jsonl(path):
        if r.get(metric) is not None:
            out.setdefault(int(r["fill"]), {})[(r["agent"], str(r["test_id"]))] = float(r[metric])
    if not out:
        raise SystemExit(f"{path}: no {metric} values")
    return out


def backbone_settings(run: Path) -> dict:
    """The cell record's data hash and backbone keys; {} for a run without a record."""
    path = run / "metrics.json"
    cell = json.loads(path.read_text()).get("cell") if path.exists() else None
    if not cell:
        return {}
    keys = {k: v for k, v in cell["config"].items() if k.startswith("backbone.")}
    return {"data_sha256": cell.get("data_sha256"), **keys}


def check_same_backbone(runs: dict[str, Path]) -> None:
    records = {name: backbone_settings(run) for name, run in runs.items()}
    for name, record in records.items():
        if not record:
            print(f"- note: {name} has no cell record; its backbone settings could not be checked")
    recorded = [(name, record) for name, record in records.items() if record]
    if not recorded:
        return
    first_name, first = recorded[0]
    for name, record in recorded[1:]:
        # A key one record lacks was added to the schema after that run: only shared keys can differ.
        differ = sorted(k for k in set(record) & set(first) if record[k] != first[k])
        if differ:
            raise SystemExit(f"{runs[name]}: its cell differs from {first_name}'s in {', '.join(differ)}")


def admitted(run: Path) -> Optional[int]:
    path = run / "metrics.json"
    if not path.exists():
        return None
    return sum(json.loads(path.read_text())["stream"]["accepted"].values())


def gap_share(m: np.ndarray, r: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    def ratio(m, r, ref, axis=-1):
        return (m.mean(axis) - r.mean(axis)) / (ref.mean(axis) - r.mean(axis))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa warns on a skewed ratio; the interval is still reported
        ci = stats.bootstrap(
            (m, r, ref),
            ratio,
            paired=True,
            vectorized=True,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method="BCa",
            random_state=SEED,
        ).confidence_interval
    return float(ratio(m, r, ref)), float(ci.low), float(ci.high)


def row(label: str, a: list[float], b: list[float]) -> str:
    d = paired(a, b)
    return f"| {label} | {d.n} | {d.estimate:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] | {d.p:.4f} | {d.verdict} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mechanism", type=Path)
    parser.add_argument("--rubric", type=Path, required=True)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--random", type=Path)
    parser.add_argument("--label", default="M")
    parser.add_argument("--metric", default="ref_logprob")
    args = parser.parse_args()
    runs = {"mechanism": args.mechanism, "rubric": args.rubric, "reference": args.reference}
    if args.random:
        runs["random"] = args.random
    check_same_backbone(runs)
    fills = {name: by_fill(run, args.metric) for name, run in runs.items()}
    last = {name: f[max(f)] for name, f in fills.items()}
    keys = sorted(set.intersection(*(set(v) for v in last.values())))
    if len(keys) < 2:
        raise SystemExit("the runs share fewer than two test questions at their last fills")
    m, r, ref = (np.array([last[name][k] for k in keys]) for name in ("mechanism", "rubric", "reference"))
    mech = fills["mechanism"]
    first_fill, last_fill = min(mech), max(mech)

    print(
        f"{args.label}: `{args.mechanism}` ({admitted(args.mechanism)} admitted), metric {args.metric}, n = {len(keys)}"
    )
    print()
    print("| comparison | n | a - b [95% CI] | p | verdict |")
    print("|---|---:|---|---:|---|")
    grown = sorted(set(mech[first_fill]) & set(mech[last_fill]))
    if first_fill != last_fill:
        print(
            row(
                f"(c) fill {last_fill} vs {first_fill}",
                [mech[last_fill][k] for k in grown],
                [mech[first_fill][k] for k in grown],
            )
        )
    print(row("M - R", m.tolist(), r.tolist()))
    if "random" in last:
        g = np.array([last["random"][k] for k in keys])
        print(row("(g) M - G", m.tolist(), g.tolist()))
    print(row("Ref - R", ref.tolist(), r.tolist()))
    share, lo, hi = gap_share(m, r, ref)
    print(f"| share of the gap closed | {len(keys)} | {share:+.2f} [{lo:+.2f}, {hi:+.2f}] | | |")


if __name__ == "__main__":
    main()
