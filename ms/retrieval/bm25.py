"""BM25 (rank-bm25) over question + answer: a retrieval baseline and the miner of training candidates."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from ms.pool import Memory
from ms.retrieval.base import Retriever, memory_text, tokenize


class BM25Retriever(Retriever):
    def __init__(self, pool):
        super().__init__(pool)
        self._index: dict[str, tuple[tuple[int, ...], list[Memory], BM25Okapi | None]] = {}

    def _scope_index(self, scope: str) -> tuple[list[Memory], BM25Okapi | None]:
        memories = self.searchable(scope)
        ids = tuple(m.id for m in memories)
        cached = self._index.get(scope)
        if cached is None or cached[0] != ids:  # rebuilt only when the searchable set changed
            bm25 = BM25Okapi([tokenize(memory_text(m)) or ["<empty>"] for m in memories]) if memories else None
            cached = self._index[scope] = (ids, memories, bm25)
        return cached[1], cached[2]

    def retrieve(self, query: str, scope: str, k: int, exclude: Sequence[int] = ()) -> list[Memory]:
        memories, bm25 = self._scope_index(scope)
        if k <= 0 or bm25 is None:
            return []
        scores = bm25.get_scores(tokenize(query))
        banned = set(exclude)
        # Stable sort: ties keep pool order, so results are reproducible.
        order = np.argsort(-scores, kind="stable")
        return [memories[i] for i in order if memories[i].id not in banned][:k]
