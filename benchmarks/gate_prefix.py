"""The gate's time per pair on the default backbone, with and without the rubric prefix's key-value
cache: the real Scorer grades the first PAIRS seed pairs of each agent in data/ under its domain's
rubric, reading probabilities, with the response cache off.

    HF_HUB_OFFLINE=1 python benchmarks/gate_prefix.py [--pairs 2] [--rounds 1]

"without" hands the backbone no shared prefix, which is the gate's path before the cache; "with"
starts each round from an empty cache, so the rubric prefixes' first passes are counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import compose_config  # noqa: E402

from ms.agents import default_agents  # noqa: E402
from ms.llm import build_lm  # noqa: E402
from ms.llm.prefix_cache import PrefixCaches  # noqa: E402
from ms.scorer import Scorer, ScorerConfig, load_rubrics  # noqa: E402


def pairs_of_data(per_agent: int) -> list[tuple[str, str, str, str]]:
    agents = default_agents()
    items = []
    for name, agent in agents.items():
        lines = (REPO / "data" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:per_agent]
        items += [(name, agent.rubric, row["question"], row["answer"]) for row in map(json.loads, lines)]
    return items


def seconds_per_pair(gate: Scorer, items, share: bool) -> float:
    gate.lm.prefix_caches = PrefixCaches()
    if share:
        vars(gate).pop("rubric_prefix", None)
    else:
        gate.rubric_prefix = lambda name: None  # the gate as it was: no prefix to keep
    started = time.perf_counter()
    gate.score(items)
    return (time.perf_counter() - started) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2, help="seed pairs per agent (nine agents)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    cfg = compose_config()
    with tempfile.TemporaryDirectory() as cache:
        lm = build_lm(cfg.backbone, cache, use_response_cache=False)
        items = pairs_of_data(args.pairs)
        gate = Scorer(lm, load_rubrics({rubric for _, rubric, _, _ in items}), ScorerConfig())
        gate.score(items[:1])  # warm-up: the first pass of a process pays for allocations
        print(f"{len(items)} pairs, {len(gate.rubrics)} rubrics, torch threads {torch.get_num_threads()}")
        for round_ in range(1, args.rounds + 1):
            for share in (False, True):
                per_pair = seconds_per_pair(gate, items, share)
                print(f"round {round_}: {'with' if share else 'without'} the prefix cache: {per_pair:.3f} s per pair")


if __name__ == "__main__":
    main()
