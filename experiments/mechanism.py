"""How far a mechanism gets a model-written pool toward the reference-written one: the measures of a
mechanism's cell against its baselines, paired per test question at the last fill. Markdown on stdout.

    python experiments/mechanism.py MECHANISM_RUN --rubric R_RUN --reference REF_RUN \
        [--random G_RUN] [--label NAME] [--metric ref_logprob] [--exclude-tests FILE]

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

--exclude-tests FILE leaves the test ids it lists out of every row (ms-data validate --twins FILE writes
the reference twins'), and says how many of the shared questions that removed.

The runs must be cells of the same data, backbone and backbone settings (engine, dtype): the script
refuses runs whose cell records differ in `backbone.*` or `data_sha256`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ms.common.stats import paired, paired_statistic_ci
from ms.data.reference_twins import read_test_ids
from ms.loop.cell import differences, stored
from ms.report.common.runs import Run, find_runs


def one_run(folder: Path, metric: str, excluded: frozenset[str] = frozenset()) -> Run:
    """The finished, evaluated run in `folder` (ms-report's reading of it), without the `excluded` test ids."""
    runs, skipped = find_runs([folder], excluded)
    if len(runs) != 1 or runs[0].path.resolve() != folder.resolve():
        why = f" ({skipped[0].reason})" if skipped else ""
        raise SystemExit(f"{folder}: not one finished run folder{why}")
    run = runs[0]
    if not run.values(metric, run.last_fill):
        raise SystemExit(f"{folder}: no {metric} values in its predictions.jsonl")
    return run


def check_same_backbone(runs: dict[str, Run]) -> None:
    """Refuse runs whose backbone settings or data fingerprints differ (compared where both recorded
    them: ms.loop.cell.stored reads a record, or the config Hydra saved for a run older than records)."""
    records = {name: stored(run.path, run.written.cell) for name, run in runs.items()}
    first_name, (first, first_data, _) = next(iter(records.items()))
    for name, (settings, data, _) in records.items():
        if settings is None or first is None:
            print(f"- note: {name} or {first_name} has no readable settings; backbone settings not checked")
            continue
        backbone = [k for k in differences(first, settings, every_key=False) if k.startswith("backbone.")]
        if data and first_data and data != first_data:
            backbone.append("data_sha256")
        if backbone:
            raise SystemExit(f"{runs[name].path}: its cell differs from {first_name}'s in {', '.join(backbone)}")


def gap_share(m: np.ndarray, r: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    def ratio(m, r, ref, axis=-1):
        return (m.mean(axis) - r.mean(axis)) / (ref.mean(axis) - r.mean(axis))

    lo, hi = paired_statistic_ci((m, r, ref), ratio)
    return float(ratio(m, r, ref)), lo, hi


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
    parser.add_argument("--exclude-tests", type=Path, metavar="FILE", help="test ids to leave out, one per line")
    args = parser.parse_args()
    try:
        excluded = read_test_ids(args.exclude_tests) if args.exclude_tests else frozenset()
    except ValueError as err:
        raise SystemExit(str(err)) from None
    folders = {"mechanism": args.mechanism, "rubric": args.rubric, "reference": args.reference}
    if args.random:
        folders["random"] = args.random
    runs = {name: one_run(folder, args.metric, excluded) for name, folder in folders.items()}
    check_same_backbone(runs)
    last = {name: run.values(args.metric, run.last_fill) for name, run in runs.items()}
    keys = sorted(set.intersection(*(set(v) for v in last.values())))
    if len(keys) < 2:
        raise SystemExit("the runs share fewer than two test questions at their last fills")
    m, r, ref = (np.array([last[name][k] for k in keys]) for name in ("mechanism", "rubric", "reference"))
    mech = runs["mechanism"]
    first_fill, last_fill = mech.fills[0], mech.last_fill
    grown_from, grown_to = mech.values(args.metric, first_fill), last["mechanism"]

    left_out = f", {len(excluded)} test ids of `{args.exclude_tests}` left out" if excluded else ""
    print(
        f"{args.label}: `{args.mechanism}` ({mech.accepted} admitted), metric {args.metric}, n = {len(keys)}{left_out}"
    )
    print()
    print("| comparison | n | a - b [95% CI] | p | verdict |")
    print("|---|---:|---|---:|---|")
    if first_fill != last_fill:
        grown = sorted(set(grown_from) & set(grown_to))
        before, after = [grown_from[k] for k in grown], [grown_to[k] for k in grown]
        print(row(f"(c) fill {last_fill} vs {first_fill}", after, before))
    print(row("M - R", m.tolist(), r.tolist()))
    if "random" in last:
        g = np.array([last["random"][k] for k in keys])
        print(row("(g) M - G", m.tolist(), g.tolist()))
    print(row("Ref - R", ref.tolist(), r.tolist()))
    share, lo, hi = gap_share(m, r, ref)
    print(f"| share of the gap closed | {len(keys)} | {share:+.2f} [{lo:+.2f}, {hi:+.2f}] | | |")


if __name__ == "__main__":
    main()
