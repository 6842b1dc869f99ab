"""What a gate check writes and prints: every pair's measurements and the AUC table as files, the AUCs
as text tables per gate, and what a utility threshold would admit."""

import csv
import json
from dataclasses import asdict
from typing import Optional, Sequence

import numpy as np

from ms.config.parts import GATES
from ms.gates.check_auc import AgentAUC, Separation, mean_auc, youden_threshold
from ms.gates.check_corruptions import ALL, CORRUPTIONS, GOOD, GRADER_DIRECTED, GRADER_POOL, KINDS, Job
from ms.gates.decisions import Decision
from ms.gates.replay import Utility

DECISIONS = "gate_check_decisions.jsonl"  # every pair judged, with each measurement (read by check_pooled)
CSV_COLUMNS = "gate agent corruption auc ci_lo ci_hi n_good n_corrupted missing mean_good mean_corrupted".split()


def write_results(
    out,
    jobs: Sequence[Job],
    decisions: Optional[Sequence[Decision]],
    utilities: Optional[Sequence[Utility]],
    results: dict[str, list[AgentAUC]],
) -> None:
    """gate_check_decisions.jsonl (every pair, each measurement) and gate_check.csv (one row per
    gate, agent and corruption) in folder `out`."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / DECISIONS).open("w", encoding="utf-8") as f:
        for i, job in enumerate(jobs):
            row = {
                "agent": job.agent,
                "kind": job.kind,
                "seed_id": job.example.id,
                "question": job.example.question,
                "answer": job.answer,
            }
            if decisions is not None:
                row.update(decisions[i].as_dict())
            if utilities is not None:
                row["utility"] = asdict(utilities[i])
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / "gate_check.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(
            [gate, r.agent, kind, s.auc, s.lo, s.hi, s.n_good, s.n_corrupted, r.missing, r.mean_good, s.mean_corrupted]
            for gate, agents in results.items()
            for r in agents
            for kind, s in r.by_kind.items()
        )


def format_results(results: dict[str, list[AgentAUC]], header: str) -> str:
    """A summary (mean AUC over agents per gate and corruption, and the agents whose CI covers 0.5),
    then one table per gate: each agent's AUC with its CI against all corruptions and each one, and
    the mean score of each kind (not for a gate whose score is a rank, as `both`'s)."""

    def cell(s: Separation | None) -> str:
        if s is None:
            return f"{'–':>18}"
        ci = f"[{s.lo:.2f}, {s.hi:.2f}]" if s.lo is not None else "–"
        return f"{s.auc:5.2f} {ci:>12}"

    def num(v: float | None) -> str:
        return f"{'–':>9}" if v is None else f"{v:9.3g}"

    present = {k for agents in results.values() for r in agents for k in r.by_kind}
    kinds = tuple(k for k in (ALL, *CORRUPTIONS, GRADER_POOL, *GRADER_DIRECTED) if k in present)
    corruptions = [k for k in KINDS if k in present]
    lines = [
        header,
        "",
        "Mean AUC over agents (good vs corrupted); near chance: agents whose 95% CI covers 0.5",
        f"{'gate':<8}" + "".join(f" {k:>14}" for k in kinds) + "  near chance (all corruptions)",
    ]
    for gate, agents in results.items():
        means = [mean_auc(agents, k) for k in kinds]
        near = [r.agent for r in agents if r.overall.near_chance]
        lines.append(
            f"{gate:<8}"
            + "".join(f" {'–' if m is None else f'{m:.2f}':>14}" for m in means)
            + f"  {', '.join(near) or 'none'}"
        )
    for gate, agents in results.items():
        lines += [
            "",
            f"gate {gate}: AUC [95% CI] of good vs corrupted",
            f"{'agent':<11} {'n good/bad':>10} {'missing':>7}" + "".join(f" {k:>18}" for k in kinds),
        ]
        for r in agents:
            lines.append(
                f"{r.agent:<11} {f'{r.overall.n_good}/{r.overall.n_corrupted}':>10} {r.missing:>7}"
                + "".join(f" {cell(r.by_kind.get(k))}" for k in kinds)
            )
        if not GATES.load(gate).check_ranks:  # a rank has no mean worth showing
            lines += [
                f"gate {gate}: mean score",
                f"{'agent':<11} {GOOD:>9}" + "".join(f" {k:>14}" for k in corruptions),
            ]
            for r in agents:
                lines.append(
                    f"{r.agent:<11} {num(r.mean_good)}"
                    + "".join(
                        f" {num(r.by_kind[k].mean_corrupted if k in r.by_kind else None):>14}" for k in corruptions
                    )
                )
    return "\n".join(lines)


def threshold_report(kinds: Sequence[str], u: Sequence[Optional[float]]) -> str:
    """What `gate.utility_threshold` would admit, pooled over agents: the spread of u of good pairs,
    and the share of each kind admitted at 0 and at the Youden threshold."""
    by_kind: dict[str, list[float]] = {}
    for kind, value in zip(kinds, u):
        if value is not None:
            by_kind.setdefault(kind, []).append(value)
    good = by_kind.get(GOOD, [])
    bad = [v for kind in CORRUPTIONS for v in by_kind.get(kind, [])]
    if not good or not bad:
        return ""
    t, j = youden_threshold(good, bad)
    q = np.quantile(good, [0, 0.25, 0.5, 0.75, 1])
    lines = [
        "",
        "utility threshold, pooled over agents (admit when u > t)",
        "u of good pairs (nats/token): min {:+.4f}, q25 {:+.4f}, median {:+.4f}, q75 {:+.4f}, max {:+.4f}".format(*q),
        f"{'t':>9} {'J':>6}" + "".join(f" {k:>14}" for k in (GOOD, *KINDS)) + "   (share admitted)",
    ]
    for threshold, label in ((0.0, None), (t, f"J = {j:.2f} best")):
        shares = [np.mean(np.asarray(by_kind[k]) > threshold) if k in by_kind else None for k in (GOOD, *KINDS)]
        jt = float(np.mean(np.asarray(good) > threshold) - np.mean(np.asarray(bad) > threshold))
        lines.append(
            f"{threshold:+9.4f} {jt:6.2f}"
            + "".join(f" {'–' if s is None else f'{s:.2f}':>14}" for s in shares)
            + (f"   {label}" if label else "")
        )
    return "\n".join(lines)
