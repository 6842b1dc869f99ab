"""Two runs (or two fills of one run) paired over the same test questions, per agent and per group
of agents: where ms-report's claims table gives one number over all agents, this shows which agents
carry it. Markdown on stdout.

    python experiments/paired_by_agent.py A_RUN B_RUN [--fill-a F] [--fill-b F] [--metric M] \
        [--group "NAME=agent,agent,..."]...

    # k = 3 against k = 0 on the authors' data, with the six agents whose test items do not leak as a group
    python experiments/paired_by_agent.py results/paper/table1_offline/runs/backbone=smollm2,k=3 \
        results/paper/table1_offline/runs/backbone=smollm2,k=0 \
        --group "no test item leaks=wuyanlvshi,sonnet,puzzle,fitness,study,travel"
    # the last fill of a Figure 4 run against its fill 0
    python experiments/paired_by_agent.py RUN RUN --fill-b 0

Each run folder needs predictions.jsonl (every test question's metric at every fill); the fill
defaults to the run's last. CIs, p and verdicts come from ms.common.stats.paired (95% BCa bootstrap,
sign-flip permutation p, alpha 0.05), as in ms-report's claims table. The per-agent verdicts
are not corrected for testing nine agents at once: read them as a breakdown of the overall number,
not as nine claims; a group named before looking at the outcomes is one comparison.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import fmean
from typing import Optional

from ms.common.stats import paired
from ms.report.common.runs import PREDICTIONS_FILE, Item, read_jsonl


def values(run: Path, metric: str, fill: Optional[int]) -> tuple[int, dict[Item, float]]:
    path = run / PREDICTIONS_FILE
    if not path.exists():
        raise SystemExit(f"{path}: no such file (each run folder needs its {PREDICTIONS_FILE})")
    rows = read_jsonl(path)
    fills = sorted({int(r["fill"]) for r in rows})
    chosen = fills[-1] if fill is None else fill
    if chosen not in fills:
        raise SystemExit(f"{path}: no fill {chosen} (it has {', '.join(map(str, fills))})")
    return chosen, {
        (r["agent"], str(r["test_id"])): float(r[metric])
        for r in rows
        if int(r["fill"]) == chosen and r.get(metric) is not None
    }


def group(spec: str) -> tuple[str, set[str]]:
    name, sep, agents = spec.partition("=")
    if not sep or not name.strip() or not agents.strip():
        raise SystemExit(f"--group {spec!r}: write NAME=agent,agent,...")
    return name.strip(), {a.strip() for a in agents.split(",") if a.strip()}


def row(label: str, a: dict, b: dict, keys: list) -> str:
    if len(keys) < 2:
        return f"| {label} | {len(keys)} | | | | | too few |"
    left, right = [a[k] for k in keys], [b[k] for k in keys]
    diff = paired(left, right)
    return (
        f"| {label} | {diff.n} | {fmean(left):.3f} | {fmean(right):.3f} | {diff.estimate:+.3f} [{diff.lo:+.3f}, "
        f"{diff.hi:+.3f}] | {diff.p:.4f} | {diff.verdict} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--fill-a", type=int)
    parser.add_argument("--fill-b", type=int)
    parser.add_argument("--metric", default="ref_logprob")
    parser.add_argument("--group", action="append", default=[], type=group)
    args = parser.parse_args()
    fill_a, a = values(args.a, args.metric, args.fill_a)
    fill_b, b = values(args.b, args.metric, args.fill_b)
    shared = sorted(set(a) & set(b))
    if not shared:
        raise SystemExit("the two sides share no test question")
    print(
        f"**{args.metric}: a = {args.a} at fill {fill_a}, b = {args.b} at fill {fill_b}; a - b paired over "
        f"the {len(shared)} test questions both measured**\n"
    )
    print("| agents | n | a | b | a - b [95% CI] | p | verdict |")
    print("|---|---|---|---|---|---|---|")
    for name, agents in args.group:
        print(row(f"**{name}** ({len(agents)})", a, b, [k for k in shared if k[0] in agents]))
    print(row("**all**", a, b, shared))
    for agent in sorted({k[0] for k in shared}):
        print(row(agent, a, b, [k for k in shared if k[0] == agent]))


if __name__ == "__main__":
    main()
