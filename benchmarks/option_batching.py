"""The rubric gate's probability read on the default backbone (SmolLM2-135M, transformers), one chat
at a time (the path before batching) against batch_size chats per forward pass (ms.llm.option_tree),
in float32 and bfloat16, on real grading prompts: PAIRS seed pairs of data/*.jsonl, taken round the
nine agents, each under its agent's rubric as the gate's Scorer words it.

    HF_HUB_OFFLINE=1 python benchmarks/option_batching.py [--pairs 64] [--per-call 32] [--rounds 2] \
        [--json results/benchmarks/option_batching.json]

The pairs go to the backbone in calls of --per-call chats (stream.micro_batch, 32: what the gate is
handed per stream step), with the rubric prefixes the gate hands it, after one warm-up call that
fills the prefix caches (a run computes each rubric's once). Three ways per dtype: `one_by_one`
(option_batching off), `batched` (the default), `batched_no_prefix` (batched, the rubric prefix
read again in every row instead of stacked from its cache: the measurement behind keeping the
cache) and `batched_uncut` (batches cut by batch_size only, however much padding: the measurement
behind ms.llm.option_tree.PADDING_SLACK). All eight run in one process, interleaved, their order rotated each round, so a shared
machine's load falls on each alike; tokens/s counts every chat's context tokens (as Usage does) over
wall seconds, CPU seconds beside. Each way's probabilities are compared with one_by_one's of the
same dtype (max absolute difference), and bfloat16's one_by_one with float32's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import compose_config  # noqa: E402

from ms.agents import default_agents  # noqa: E402
from ms.config import ScorerConfig  # noqa: E402
from ms.gates.scorer import SCORE_OPTIONS, Scorer, load_rubrics  # noqa: E402
from ms.llm import build_lm, hf_scoring, option_tree  # noqa: E402

WAYS = ("one_by_one", "batched", "batched_no_prefix", "batched_uncut")


def grading_pairs(n: int) -> list[tuple[str, str, str, str]]:
    """(agent, rubric, question, answer): the agents' seed pairs in turn, so each call mixes rubrics as a stream step does."""
    rows = {
        name: [json.loads(line) for line in (REPO / "data" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        for name in default_agents()
    }
    agents = default_agents()
    items, depth = [], 0
    while len(items) < n:
        for name in rows:
            if depth < len(rows[name]) and len(items) < n:
                row = rows[name][depth]
                items.append((name, agents[name].rubric, row["question"], row["answer"]))
        depth += 1
    return items


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def grade(lm, gate: Scorer, items, per_call: int, way: str) -> tuple[float, float, int, list[list[float]]]:
    """(wall s, CPU s, context tokens, probabilities) of reading every pair's score distribution."""
    lm.option_batching = way != "one_by_one"
    slack = math.inf if way == "batched_uncut" else option_tree.PADDING_SLACK
    hf_scoring.length_batches = functools.partial(option_tree.length_batches, slack=slack)
    tokens, out = lm.usage.prompt_tokens, []
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(items), per_call):
        call = items[start : start + per_call]
        chats = [gate.prompt(*item) for item in call]
        shared = [] if way == "batched_no_prefix" else [gate.rubric_prefix(r) for r in {r for _, r, _, _ in call}]
        out += lm.option_probabilities(chats, SCORE_OPTIONS, [p for p in shared if p])
    return time.perf_counter() - wall, time.process_time() - cpu, lm.usage.prompt_tokens - tokens, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--per-call", type=int, default=32, help="chats per option_probabilities call")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    started, load_before = datetime.now(timezone.utc), load()
    items = grading_pairs(args.pairs)
    lms, gates = {}, {}
    with tempfile.TemporaryDirectory() as cache:
        for dtype in args.dtypes.split(","):
            lm = build_lm(compose_config([f"backbone.dtype={dtype}"]).backbone, cache, use_response_cache=False)
            gate = Scorer(lm, load_rubrics({r for _, r, _, _ in items}), ScorerConfig())
            # Warm-up: first-pass allocations, and every rubric's prefix cache, as in a running cell.
            grade(lm, gate, items[:9], 9, "batched")
            grade(lm, gate, items[:2], 2, "one_by_one")
            lms[dtype], gates[dtype] = lm, gate
        runs = [(dtype, way) for dtype in lms for way in WAYS]
        times: dict[tuple[str, str], list[tuple[float, float, int]]] = {run: [] for run in runs}
        probs: dict[tuple[str, str], list[list[float]]] = {}
        for r in range(args.rounds):
            for dtype, way in runs[r % len(runs) :] + runs[: r % len(runs)]:
                wall, cpu, tokens, out = grade(lms[dtype], gates[dtype], items, args.per_call, way)
                times[dtype, way].append((wall, cpu, tokens))
                probs.setdefault((dtype, way), out)
                print(
                    f"round {r + 1} {dtype} {way}: {wall:.1f} s wall, {cpu:.1f} CPU s, {tokens / wall:.0f} tok/s",
                    flush=True,
                )
    rows = []
    for dtype, way in runs:
        walls = [w for w, _, _ in times[dtype, way]]
        cpus = [c for _, c, _ in times[dtype, way]]
        tokens = times[dtype, way][0][2]
        base = statistics.median(w for w, _, _ in times[dtype, "one_by_one"])
        ref = probs[dtype, "one_by_one"]
        rows.append(
            {
                "dtype": dtype,
                "way": way,
                "pairs": len(items),
                "context_tokens": tokens,
                "wall_s": [round(w, 1) for w in walls],
                "cpu_s": [round(c, 1) for c in cpus],
                "tok_s_median": round(tokens / statistics.median(walls), 1),
                "speedup_vs_one_by_one": round(base / statistics.median(walls), 2),
                "per_round_speedup": [round(b / w, 2) for (b, _, _), w in zip(times[dtype, "one_by_one"], walls)],
                "max_abs_diff_vs_one_by_one": max(
                    abs(a - b) for x, y in zip(probs[dtype, way], ref) for a, b in zip(x, y)
                ),
            }
        )
        if dtype != "float32" and way == "one_by_one" and ("float32", way) in probs:
            rows[-1]["max_abs_diff_vs_float32_one_by_one"] = max(
                abs(a - b) for x, y in zip(probs[dtype, way], probs["float32", way]) for a, b in zip(x, y)
            )
        print(json.dumps(rows[-1]))
    record = {
        "command": ["benchmarks/option_batching.py", *sys.argv[1:]],
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": round((datetime.now(timezone.utc) - started).total_seconds() / 60, 1),
        "load_average_before": load_before,
        "load_average_after": load(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "per_call": args.per_call,
        "batch_size": next(iter(lms.values())).batch_size,
        "rows": rows,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
