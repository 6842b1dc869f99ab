"""The gate's time per pair on the default backbone, with and without the rubric prefix's key-value
cache: the real Scorer grades the first PAIRS seed pairs of each agent in data/ under its domain's
rubric, reading probabilities, with the response cache off.

    HF_HUB_OFFLINE=1 python benchmarks/gate_prefix.py [--pairs 2] [--threads 1]

Each pair is graded twice in a row, without the cache (the gate's path before it: no shared prefix
handed to the backbone) and with it, so both see the same load on a shared machine. The cache
starts empty, so each rubric's first pair pays for its prefix. CPU seconds are reported beside wall
seconds: with other jobs on the machine, wall time mostly measures them; with one torch thread, CPU
time does not count spinning threads waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import compose_config  # noqa: E402

from ms.agents import default_agents  # noqa: E402
from ms.config import ScorerConfig  # noqa: E402
from ms.gates.scorer import Scorer, load_rubrics  # noqa: E402
from ms.llm import build_lm  # noqa: E402
from ms.llm.prefix_cache import PrefixCaches, shared_length  # noqa: E402


def pairs_of_data(per_agent: int) -> list[tuple[str, str, str, str]]:
    agents = default_agents()
    items = []
    for name, agent in agents.items():
        lines = (REPO / "data" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:per_agent]
        items += [(name, agent.rubric, row["question"], row["answer"]) for row in map(json.loads, lines)]
    return items


def grade_once(gate: Scorer, item, share: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of grading one pair."""
    if share:
        vars(gate).pop("rubric_prefix", None)
    else:
        gate.rubric_prefix = lambda name: None  # the gate as it was: no prefix to keep
    wall, cpu = time.perf_counter(), time.process_time()
    gate.score([item])
    return time.perf_counter() - wall, time.process_time() - cpu


def tokens_read(gate: Scorer, item) -> tuple[int, int]:
    """Tokens of the grading chat, and those left to read after its rubric prefix."""
    lm, rubric = gate.lm, item[1]
    context = lm._encode(lm.chat_context(gate.prompt(*item)))
    return len(context), len(context) - shared_length(context, [lm._encode(Scorer.rubric_prefix(gate, rubric))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2, help="seed pairs per agent (nine agents)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as cache:
        lm = build_lm(compose_config().backbone, cache, use_response_cache=False)
        items = pairs_of_data(args.pairs)
        gate = Scorer(lm, load_rubrics({rubric for _, rubric, _, _ in items}), ScorerConfig())
        grade_once(gate, items[0], share=False)  # warm-up: the first pass of a process pays for allocations
        lm.prefix_caches = PrefixCaches()
        times = {False: [], True: []}
        for item in items:
            for share in (False, True):
                times[share].append(grade_once(gate, item, share))
        full, rest = map(statistics.fmean, zip(*(tokens_read(gate, item) for item in items)))
    print(
        f"{len(items)} pairs, {len(gate.rubrics)} rubrics, torch threads {torch.get_num_threads()}; "
        f"tokens read per pair: {full:.0f} without the cache, {rest:.0f} with it"
    )
    for share, label in ((False, "without"), (True, "with")):
        wall, cpu = map(statistics.fmean, zip(*times[share]))
        print(f"{label} the prefix cache: {wall:.2f} s per pair (wall), {cpu:.2f} CPU s per pair")


if __name__ == "__main__":
    main()
