"""The index refresh policies against `full`, paired over the same test questions (ref_logprob).

    python experiments/compare_refresh.py results/refresh_offline/runs > results/refresh_offline/refresh.md

Each cell folder of the refresh_offline sweep holds predictions.jsonl with ref_logprob,
retriever_version and index_staleness per test question; ms.common.stats gives the CIs and the verdicts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ms.common.stats import mean_ci, paired

POLICIES = ("full", "every_n", "query_tower")


def predictions(runs: Path, policy: str) -> dict[tuple[str, str], dict]:
    cells = [c for c in runs.iterdir() if c.name.endswith(f"retriever.refresh={policy}")]
    if len(cells) != 1:
        raise SystemExit(f"expected one cell for retriever.refresh={policy} under {runs}, found {len(cells)}")
    rows = [json.loads(line) for line in (cells[0] / "predictions.jsonl").read_text().splitlines()]
    return {(r["agent"], r["test_id"]): r for r in rows}


def main(runs: Path) -> None:
    by_policy = {p: predictions(runs, p) for p in POLICIES}
    keys = sorted(by_policy["full"])
    agents = sorted({agent for agent, _ in keys})
    print("**Index refresh policies, k = 3, ref_logprob (nats per token), paired over the same test questions**\n")
    print(
        "| policy | mean [95% CI] | index staleness at test (steps) | minus full [95% CI] | p | agents ahead | verdict |"
    )
    print("|---|---|---|---|---|---|---|")
    for policy in POLICIES:
        rows = by_policy[policy]
        missing = set(keys) - set(rows)
        if missing:
            raise SystemExit(f"{policy}: {len(missing)} test questions of full are missing")
        values = [rows[k]["ref_logprob"] for k in keys]
        estimate = mean_ci(values)
        stale = sorted({rows[k]["index_staleness"] for k in keys})
        cell = f"{estimate.mean:.3f} [{estimate.lo:.3f}, {estimate.hi:.3f}]"
        if policy == "full":
            print(f"| {policy} | {cell} | {stale} | reference | | | |")
            continue
        diff = paired(values, [by_policy["full"][k]["ref_logprob"] for k in keys])
        ahead = sum(
            sum(rows[k]["ref_logprob"] - by_policy["full"][k]["ref_logprob"] for k in keys if k[0] == a) > 0
            for a in agents
        )
        print(
            f"| {policy} | {cell} | {stale} | {diff.estimate:+.4f} [{diff.lo:+.4f}, {diff.hi:+.4f}] | {diff.p:.4f} "
            f"| {ahead}/{len(agents)} | {diff.verdict} |"
        )
    print(
        f"\nn = {len(keys)} test questions ({len(agents)} agents). Verdict on 'policy beats full': supported or "
        "contradicted where the 95% BCa CI excludes 0 and the sign-flip p < 0.05, else inconclusive."
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
