"""What the retrieval benchmarks share (benchmarks/retrieval.py, its `--index ann` measurement in
benchmarks/retrieval_ann.py, and the pool's catch-up in benchmarks/bench_pool.py): the repository's
root, the scope and micro-batch their pools are filled in, the k they search for, and how a call is
timed. Kept apart so that those scripts import it and never each other (tests/test_structure.py)."""

from __future__ import annotations

import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BATCH = 32  # memories per Pool.add: the stream's micro_batch
K = 10  # memories a timed search asks for
SCOPE = "bench"  # the one scope every benchmark pool holds


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile of the values, by nearest rank (no interpolation between two timings)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def timed_ms(call, repeats: int, warmup: int = 5) -> list[float]:
    """Milliseconds per call of `call()`, `repeats` times, after `warmup` untimed calls."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times
