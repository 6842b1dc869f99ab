"""Composite retrieval (Generative Agents / MemGPT style): a dense search proposes candidates, and
a weighted sum of importance, recency, similarity and measured utility decides their order.

    score = importance_weight * importance + recency_weight * decay ** age
            + similarity_weight * clamp(cosine, 0, 1) + utility_weight * logistic(utility / utility_scale)

Every term lies in [0, 1] on an absolute scale. Generative Agents min-max normalizes each term per
query instead; that makes a term's weight depend on how spread out the candidates happen to be
(two near-identical cosines get stretched to 0 and 1), so it is not done here.
"""

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import torch

from ms.config.fields import require
from ms.pool import Memory
from ms.pool.access import Reader
from ms.retrieval.base import Built, Retriever, memory_text
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.settings import CompositeConfig

log = logging.getLogger(__name__)


def utility_term(memory: Memory, scale: float) -> float:
    """A memory's measured utility (nats per token, any sign) mapped into (0, 1); 0.5 when unmeasured,
    so a memory nobody has measured neither outranks nor trails one measured at 0."""
    if memory.utility is None:
        return 0.5
    return 1.0 / (1.0 + math.exp(-memory.utility / scale))


@dataclass(frozen=True)
class Ranked:
    """One candidate with the terms of its score (unweighted), for ranking and for `explain`."""

    memory: Memory
    cosine: float  # raw; the score uses it clamped to [0, 1]
    recency: float
    importance: float
    utility: float  # the utility term, in (0, 1)
    total: float


Step = Union[int, Callable[[], int]]


class CompositeRetriever(Retriever):
    """`dense` supplies the cosines (its encoder may be learned or frozen). `current_step` is the
    pool step that ages count up to: an int the caller updates, or a function returning it.
    Retrieval refreshes the recency of what it returns when `mark` is on; a caller that marks what
    it uses itself (the run marks the stream's retrievals, never evaluation's) turns it off."""

    uses_encoder = True
    trainable = True

    @classmethod
    def build(cls, cfg, pool, *, learned: bool, clock=None) -> Built:
        """Over the dense retriever `cfg` describes, which memory train fine-tunes where `learned`."""
        dense = DenseRetriever.build(cfg, pool, learned=learned, clock=clock)
        return Built(cls(dense.retriever, cfg.composite, current_step=clock or 0, mark=False), dense.trainable)

    def __init__(
        self, dense: DenseRetriever, cfg: CompositeConfig | None = None, current_step: Step = 0, mark: bool = True
    ):
        super().__init__(dense.pool)
        self.cfg = cfg = cfg or CompositeConfig()
        require(cfg, CompositeConfig, "retriever.composite")
        self.dense = dense
        self.current_step = current_step
        self.mark = mark

    def step_now(self) -> int:
        return int(self.current_step() if callable(self.current_step) else self.current_step)

    def state(self, scope: str) -> dict[str, int]:
        return self.dense.state(scope)

    def _ages(self, memories: Sequence[Memory]) -> torch.Tensor:
        if self.cfg.age_unit == "steps":
            now = self.step_now()
            touched = [max(m.added_step, m.last_retrieved_step or m.added_step) for m in memories]
        else:
            now = time.time() / 3600.0
            touched = [max(m.added_at, m.last_retrieved_at or m.added_at) / 3600.0 for m in memories]
        # A memory touched "after now" (a caller that set current_step late) is as fresh as it gets.
        return (now - torch.tensor(touched, dtype=torch.float64)).clamp(min=0)

    def rank(
        self, queries: Sequence[str], scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[list[Ranked]]:
        """Per query, the dense top-max(candidates, k) memories of `scope` that `reader` may retrieve
        (its access rule applies in the dense search, before the candidates are taken), best
        composite score first."""
        if not self.dense.snapshot(scope).searchable_count:
            return [[] for _ in queries]
        cfg = self.cfg
        banned = set(exclude)
        want = max(cfg.candidates, k)
        snap, positions, cosines = self.dense.nearest(
            self.dense.query_vectors(queries), scope, want + len(banned), reader
        )
        ranked = []
        # Only the dense candidates are re-ranked, so importance and recency are computed for them alone.
        for top, cos in zip(positions, cosines):
            keep = [j for j, i in enumerate(top) if snap.memories[i].id not in banned][:want]
            memories = [snap.memories[top[j]] for j in keep]
            cos = cos[keep].to(torch.float64)
            recency = cfg.decay ** self._ages(memories)
            importance = torch.tensor([m.importance_or(cfg.default_importance) for m in memories], dtype=torch.float64)
            totals = cfg.importance_weight * importance + cfg.recency_weight * recency
            utility = torch.tensor([utility_term(m, cfg.utility_scale) for m in memories], dtype=torch.float64)
            totals = totals + cfg.similarity_weight * cos.clamp(0, 1) + cfg.utility_weight * utility
            # Stable sort: equal totals keep the dense order.
            order = sorted(range(len(memories)), key=lambda i: -totals[i].item())
            terms = (cos, recency, importance, utility, totals)
            ranked.append([Ranked(memories[i], *(t[i].item() for t in terms)) for i in order])
        return ranked

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        return self._retrieve([query], scope, k, exclude, reader)[0]

    def retrieve_batch(
        self, queries: Sequence[str], scope: str, k: int, reader: Reader | None = None
    ) -> list[list[Memory]]:
        return self._retrieve(queries, scope, k, (), reader)

    def _retrieve(
        self, queries: Sequence[str], scope: str, k: int, exclude: Sequence[int], reader: Reader | None
    ) -> list[list[Memory]]:
        if k <= 0:
            return [[] for _ in queries]
        ranked = self.rank(queries, scope, k, exclude, reader)
        if self.cfg.debug:
            for query, rows in zip(queries, ranked):
                log.info("composite ranking for %r (step %d):\n%s", query, self.step_now(), format_ranking(rows))
        found = [[row.memory for row in rows[:k]] for rows in ranked]
        chosen = {m.id for memories in found for m in memories}
        if self.mark and chosen:
            self.pool.mark_retrieved(chosen, self.step_now())
        return found

    def explain(self, query: str, scope: str, reader: Reader | None = None) -> list[Ranked]:
        """Every candidate for `query` with its terms, best first; marks nothing as retrieved."""
        return self.rank([query], scope, self.cfg.candidates, reader=reader)[0]


def format_ranking(rows: Sequence[Ranked], width: int = 60) -> str:
    """A table of `rows` (as `explain` returns them), one line per candidate, best first."""
    lines = [f"{'#':>3} {'id':>6} {'total':>6} {'cos':>6} {'recency':>7} {'import':>6} {'utility':>7}  content"]
    for rank, row in enumerate(rows, 1):
        text = " ".join(memory_text(row.memory).split())
        text = text if len(text) <= width else text[: width - 3] + "..."
        lines.append(
            f"{rank:>3} {row.memory.id:>6} {row.total:6.3f} {row.cosine:6.3f} {row.recency:7.3f} "
            f"{row.importance:6.3f} {row.utility:7.3f}  {text}"
        )
    return "\n".join(lines)
