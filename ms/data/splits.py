"""Seed/stream/test splits, decided per agent, and the Hydra data config that loads them."""

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from ms.agents import Agent, default_agents
from ms.config.schema import DataConfig

from .load import SPLITS, DataError, Example, load_dir


@dataclass
class Splits:
    seed: list[Example]  # the part that seeds the pool
    stream: list[Example]  # queries answered live, growing the pool
    test: list[Example]


FRACTIONS_RULE = "three non-negative numbers (seed, stream, test) summing to 1"


def bad_fractions(fractions: Sequence[float]) -> bool:
    """Whether `fractions` break FRACTIONS_RULE (data.fractions, checked here and by ms.loop.validation)."""
    return len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    fractions = tuple(float(f) for f in fractions)
    if bad_fractions(fractions):
        raise ValueError(f"fractions must be {FRACTIONS_RULE}, got {list(fractions)}")
    return fractions


def _part_sizes(n: int, fractions: tuple[float, float, float]) -> list[int]:
    """Largest-remainder rounding, so the sizes always add up to n and follow the fractions."""
    exact = [n * f for f in fractions]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(3), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: n - sum(sizes)]:
        sizes[i] += 1
    return sizes


def _order_key(seed: int, example_id: str) -> str:
    # A hash of the id alone (not a shuffle of the list) keeps each example's place independent of
    # file order and of every other agent's data.
    return hashlib.sha256(f"{seed}\0{example_id}".encode()).hexdigest()


def split_examples(examples: Sequence[Example], fractions: Sequence[float] = (0.2, 0.4, 0.4), seed: int = 0) -> Splits:
    """Seed/stream/test parts, disjoint and covering all examples, decided per agent. Examples
    that carry a split keep it; the others are cut by `fractions` in hash order."""
    fractions = _check_fractions(fractions)
    parts: dict[str, list[Example]] = {name: [] for name in SPLITS}
    by_agent: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        by_agent[example.agent].append(example)
    for group in by_agent.values():
        for example in group:
            if example.split is not None:
                parts[example.split].append(example)
        free = sorted((e for e in group if e.split is None), key=lambda e: _order_key(seed, e.id))
        n_seed, n_stream, _ = _part_sizes(len(free), fractions)
        parts["seed"] += free[:n_seed]
        parts["stream"] += free[n_seed : n_seed + n_stream]
        parts["test"] += free[n_seed + n_stream :]
    return Splits(**parts)


def with_splits(
    data: dict[str, list[Example]], fractions: Sequence[float] = (0.2, 0.4, 0.4), seed: int = 0
) -> dict[str, list[Example]]:
    """The same examples, each carrying the split it falls in: a frozen copy of the split, so a
    variant with some examples removed keeps every other example where it was."""
    framed = {}
    for agent, examples in data.items():
        parts = split_examples(examples, fractions, seed)
        split_of = {e.id: name for name in SPLITS for e in getattr(parts, name)}
        framed[agent] = [Example(**{**e.__dict__, "split": split_of[e.id]}) for e in examples]
    return framed


def load_splits(cfg: DataConfig, configured: Mapping[str, Agent] | None = None) -> dict[str, Splits]:
    """The splits of every agent that runs (`cfg.agents`, else every one in `configured`, the
    configured agents; None: the default set). From `hf`, only those that occur in the dataset are
    returned; from `dir`, each must have its file."""
    from .hf import load_hf

    configured = default_agents() if configured is None else configured
    agents = list(configured) if cfg.agents is None else list(cfg.agents)
    if cfg.hf is not None:
        rows = load_hf(
            cfg.hf.name,
            **{key: getattr(cfg.hf, key) for key in ("question", "answer", "agent", "split", "agent_column")},
            agents=configured,
        )
        by_agent = {name: [r for r in rows if r.agent == name] for name in agents}
        by_agent = {name: group for name, group in by_agent.items() if group}
        if not by_agent:
            raise DataError(f"{cfg.hf.name}: none of the configured agents ({', '.join(agents)}) occurs in it")
    else:
        by_agent = load_dir(cfg.dir, agents, created_by=cfg.created_by, agents=configured)

    def cap(part: list[Example], limit: Optional[int]) -> list[Example]:
        return part if limit is None else part[:limit]

    result = {}
    for name, group in by_agent.items():
        parts = split_examples(group, cfg.fractions, cfg.split_seed)
        result[name] = Splits(
            cap(parts.seed, cfg.max_seed), cap(parts.stream, cfg.max_stream), cap(parts.test, cfg.max_test)
        )
    return result
