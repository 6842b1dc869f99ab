"""The order of a run, shared by the run (ms.loop.pipeline) and its plan (ms.plan.planner), so the two cannot
drift: which stream questions come in which batch, where each fill is evaluated, how many memories
a stream question retrieves, and whether the retriever learns."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence, TypeVar

T = TypeVar("T")


def interleave(per_agent: dict[str, list[T]]) -> list[T]:
    """Round-robin over agents, so every fill checkpoint holds an equal share of each agent."""
    queues = [list(v) for v in per_agent.values()]
    out = []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def fill_positions(fills: Sequence[int], n: int) -> dict[int, int]:
    """Stream position after which each fill percentage is reached."""
    bad = [f for f in fills if not 0 <= f <= 100]
    if bad:
        raise ValueError(f"fills must be percentages in 0-100, got {bad}")
    return {int(f): round(n * f / 100) for f in sorted(fills)}


def stream_k(k: int, stream_k: Optional[int]) -> int:
    """Memories per stream question: the setting `stream_k`, else `k`."""
    return k if stream_k is None else stream_k


def skips_stream(k: int) -> bool:
    """Zero-shot answers (k = 0) never read the pool, so growing it would change nothing they measure;
    their evaluation at each later fill repeats the same prompts, which the response cache answers."""
    return k == 0


def learns(retriever_cfg) -> bool:
    """Whether memory train fine-tunes the retriever: only one its class says is trainable (an
    encoder-backed one, ms.config.parts.RETRIEVERS), and only if asked (`learn`, its own setting)."""
    from ms.config.parts import RETRIEVERS

    return RETRIEVERS.load(retriever_cfg.name).trainable and bool(retriever_cfg.learn)


def batches(n: int, fills: Sequence[int], micro_batch: int, stream: bool = True) -> Iterator[tuple[int, slice | None]]:
    """The run in order: (fill, slice of the stream) for each micro-batch, and (fill, None) where
    that fill is evaluated. A batch never crosses a fill, so every fill sees the same stream prefix
    whatever the other fills are."""
    done = 0
    for fill, until in fill_positions(fills, n).items():
        while stream and done < until:
            end = min(until, done + micro_batch)
            yield fill, slice(done, end)
            done = end
        yield fill, None
