"""Random memories from the scope: the floor any learned retriever must beat."""

import random
from typing import Sequence

from ms.pool import Memory
from ms.pool.access import Reader
from ms.retrieval.base import Built, Retriever


class RandomRetriever(Retriever):
    @classmethod
    def build(cls, cfg, pool, *, learned: bool, clock=None) -> Built:
        return Built(cls(pool, seed=cfg.seed), None)

    def __init__(self, pool, seed: int = 0):
        super().__init__(pool)
        self.rng = random.Random(seed)

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        banned = set(exclude)
        candidates = [m for m in self.searchable(scope) if m.id not in banned and (reader is None or reader.allows(m))]
        return self.rng.sample(candidates, min(k, len(candidates))) if k > 0 else []
