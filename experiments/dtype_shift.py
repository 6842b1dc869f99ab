"""What a change of backbone settings (bfloat16 for float32, or another engine) does to a cell's claims: the
same cells run under both settings, compared per test question. Markdown on stdout.

    python experiments/dtype_shift.py --old GATE_RUN RANDOM_RUN --new GATE_RUN RANDOM_RUN [--tolerance 0.003]

GATE_RUN is a Figure 4 cell (a gate's pool at two or more fills), RANDOM_RUN the random gate matched to it
(gate.match) under the same settings. For each side it derives, per test question, the claims the
committed reports make of such a pair: (c) last fill minus first, for the gate and for the control, and
(g) the gate minus its control at the last fill; then each claim's estimate, 95% BCa CI and verdict
(ms.common.stats.paired, as ms-report's claims table) under both settings, and the paired shift: the
per-question new-minus-old difference of the claim's value, with its CI. A setting keeps a claim when
its verdict is the same and its shift lies within +-tolerance (the CI, not only the point).
The first rows compare the two settings' metric itself, fill by fill.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ms.common.stats import paired
from ms.report.common.runs import PREDICTIONS_FILE, read_jsonl

Item = tuple[str, str]


def by_fill(run: Path, metric: str) -> dict[int, dict[Item, float]]:
    path = run / PREDICTIONS_FILE
    if not path.exists():
        raise SystemExit(f"{path}: no such file (each run folder needs its {PREDICTIONS_FILE})")
    fills: dict[int, dict[Item, float]] = {}
    for r in read_jsonl(path):
        if r.get(metric) is not None:
            fills.setdefault(int(r["fill"]), {})[(r["agent"], str(r["test_id"]))] = float(r[metric])
    return fills


def claims(gate: dict, control: dict, first: int, last: int) -> dict[str, dict[Item, float]]:
    """Per test question, the value each claim averages."""
    return {
        "(c) gate: last fill - first": {q: gate[last][q] - gate[first][q] for q in gate[last].keys() & gate[first]},
        "(c) random control: last fill - first": {
            q: control[last][q] - control[first][q] for q in control[last].keys() & control[first]
        },
        "(g) gate - random control, last fill": {
            q: gate[last][q] - control[last][q] for q in gate[last].keys() & control[last]
        },
    }


def text(d) -> str:
    return f"{d.estimate:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", nargs=2, type=Path, required=True, metavar=("GATE_RUN", "RANDOM_RUN"))
    parser.add_argument("--new", nargs=2, type=Path, required=True, metavar=("GATE_RUN", "RANDOM_RUN"))
    parser.add_argument("--metric", default="ref_logprob")
    parser.add_argument("--tolerance", type=float, default=0.003)
    args = parser.parse_args()
    old = [by_fill(run, args.metric) for run in args.old]
    new = [by_fill(run, args.metric) for run in args.new]
    shared_fills = sorted(set.intersection(*(set(f) for f in (*old, *new))))
    if len(shared_fills) < 2:
        raise SystemExit(f"the four runs share fewer than two fills ({shared_fills})")
    first, last = shared_fills[0], shared_fills[-1]

    print(f"**{args.metric}: new minus old, paired per test question; fills {first} and {last}**\n")
    print("| run | fill | n | old mean | new mean | new - old [95% CI] | p |")
    print("|---|---|---|---|---|---|---|")
    for name, o, n in (("gate", old[0], new[0]), ("random control", old[1], new[1])):
        for fill in (first, last):
            keys = sorted(o[fill].keys() & n[fill])
            d = paired([n[fill][k] for k in keys], [o[fill][k] for k in keys])
            mean_old = sum(o[fill][k] for k in keys) / len(keys)
            mean_new = sum(n[fill][k] for k in keys) / len(keys)
            print(f"| {name} | {fill} | {d.n} | {mean_old:.4f} | {mean_new:.4f} | {text(d)} | {d.p:.4f} |")

    print(f"\n**The claims under each setting, and the shift (tolerance +-{args.tolerance})**\n")
    print("| claim | n | old [95% CI], verdict | new [95% CI], verdict | shift new - old [95% CI] | kept |")
    print("|---|---|---|---|---|---|")
    old_claims, new_claims = claims(*old, first, last), claims(*new, first, last)
    for claim, o in old_claims.items():
        n = new_claims[claim]
        keys = sorted(o.keys() & n)
        before = paired([o[k] for k in keys], [0.0] * len(keys))
        after = paired([n[k] for k in keys], [0.0] * len(keys))
        shift = paired([n[k] for k in keys], [o[k] for k in keys])
        kept = before.verdict == after.verdict and -args.tolerance <= shift.lo and shift.hi <= args.tolerance
        print(
            f"| {claim} | {shift.n} | {text(before)}, {before.verdict} | {text(after)}, {after.verdict} | "
            f"{text(shift)} | {'yes' if kept else 'no'} |"
        )


if __name__ == "__main__":
    main()
