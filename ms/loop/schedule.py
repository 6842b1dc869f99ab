"""The order of a run, shared by the run (ms.loop.pipeline) and its plan (ms.plan.planner), so the two
cannot drift (ARCHITECTURE.md, "One schedule, walked by the run and by its plan"). The run does the
work, its plan counts the calls it takes: only what happens, in which order and at which step, is said
here, once."""

from collections import Counter
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Step:
    """One step of a run: a stream micro-batch (`questions`, a slice of the stream; None where the step
    only evaluates: a fill at the stream's start, or a stream skipped), after which the pool is at step
    `number` (0: nothing streamed yet), then the fill checkpoints it completes, in order."""

    number: int
    questions: Optional[slice]
    fills: tuple[int, ...]


@dataclass(frozen=True)
class Schedule:
    """What a run does, in which order, as its settings make it (`of`): the run and its plan both walk
    `steps`, so a change here reaches both."""

    fills: tuple[int, ...]  # percentages of the stream after which the test questions are evaluated
    micro_batch: int  # stream questions a step takes (fewer where a fill falls first); test questions a batch
    streams: bool  # false: the stream is skipped (`skips_stream`), every fill evaluated on the seeds alone
    answers: str  # what the gate judges for a stream question: model (one answer), best_of (n, one kept), reference
    trains: bool  # memory train labels candidates and trains the retriever on each step's admitted pairs
    consolidates: bool  # the memory policy consolidates after each step (its class declares it)
    evaluates: bool  # eval.enabled: false for a stream-only run, which answers no test question

    @classmethod
    def of(cls, stream, retriever, memory, evaluation, *, fills: Sequence[int], micro_batch: int, k: int) -> "Schedule":
        """The schedule of a run, from its `stream`, `retriever`, `memory` and `eval` sections and the root
        settings `fills`, `micro_batch` and `k` (its composition root, or its planner, reads them)."""
        from ms.config.parts import POLICIES

        best_of = stream.answers == "model" and stream.best_of > 1
        return cls(
            fills=tuple(fills),
            micro_batch=micro_batch,
            streams=not skips_stream(k),
            answers="best_of" if best_of else stream.answers,
            trains=learns(retriever),
            consolidates=POLICIES.load(memory.policy).consolidates,
            evaluates=evaluation.enabled,
        )

    def stream(self, per_agent: dict[str, list[T]]) -> tuple[list[T], Counter]:
        """The stream questions in the order the run takes them (`interleave`), and how many of each
        agent's were skipped: a stream of references skips the questions that have none."""
        stream = interleave(per_agent)
        if self.answers != "reference":
            return stream, Counter()
        kept = [e for e in stream if (e.answer or "").strip()]
        return kept, Counter(e.agent for e in stream if not (e.answer or "").strip())

    def steps(self, n: int) -> Iterator[Step]:
        """The run's steps over a stream of `n` questions, in order (`batches`, grouped by micro-batch)."""
        number, questions, fills = 0, None, []
        for fill, part in batches(n, self.fills, self.micro_batch, self.streams):
            if part is None:
                fills.append(fill)
                continue
            if questions is not None or fills:
                yield Step(number, questions, tuple(fills))
            number, questions, fills = number + 1, part, []
        if questions is not None or fills:
            yield Step(number, questions, tuple(fills))
