"""Dense retrieval with the bi-encoder, over cached pool embeddings.

Embeddings are cached per scope and per encoder version: new memories are encoded as they
arrive; a training step bumps the version, and the next retrieval re-encodes the scope once.
Retrieval is then one matrix product and a top-k.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ms.pool import Memory
from ms.retrieval.base import Retriever, memory_text
from ms.retrieval.encoder import Encoder


class DenseRetriever(Retriever):
    def __init__(self, pool, encoder: Encoder):
        super().__init__(pool)
        self.encoder = encoder
        self.encoder_version = 0  # bumped by whoever changes the encoder's weights
        self._cache: dict[str, tuple[int, list[Memory], torch.Tensor]] = {}
        self.encoded = 0  # memories encoded so far, for the run's accounting

    def encoder_changed(self) -> None:
        self.encoder_version += 1

    def _scope_embeddings(self, scope: str) -> tuple[list[Memory], torch.Tensor]:
        cached = self._cache.get(scope)
        if cached is not None and cached[0] == self.encoder_version:
            memories, embeddings = cached[1], cached[2]
            if memories and memories[-1].id == self.pool.version(scope):
                return memories, embeddings
            fresh = [m for m in self.pool.memories(scope) if m.id > (memories[-1].id if memories else 0)]
        else:
            memories, embeddings = [], torch.empty(0)
            fresh = self.pool.memories(scope)
        if fresh:
            new = self.encoder.encode([memory_text(m) for m in fresh])
            self.encoded += len(fresh)
            memories = memories + fresh
            embeddings = torch.cat([embeddings, new]) if len(embeddings) else new
        self._cache[scope] = (self.encoder_version, memories, embeddings)
        return memories, embeddings

    def similarities(self, queries: Sequence[str], scope: str) -> tuple[list[Memory], torch.Tensor]:
        """Cosine of every query with every memory of the scope: ([M] memories, [Q, M] scores)."""
        memories, embeddings = self._scope_embeddings(scope)
        if not memories:
            return [], torch.empty(len(queries), 0)
        return memories, self.encoder.encode(list(queries)) @ embeddings.T

    def retrieve(self, query: str, scope: str, k: int, exclude: Sequence[int] = ()) -> list[Memory]:
        return self._top(*self.similarities([query], scope), k, exclude)[0]

    def retrieve_batch(self, queries: Sequence[str], scope: str, k: int) -> list[list[Memory]]:
        if k <= 0:
            return [[] for _ in queries]
        return self._top(*self.similarities(queries, scope), k, ())

    @staticmethod
    def _top(memories: list[Memory], scores: torch.Tensor, k: int, exclude: Sequence[int]) -> list[list[Memory]]:
        if k <= 0 or not memories:
            return [[] for _ in range(len(scores))]
        banned = set(exclude)
        take = min(len(memories), k + len(banned))
        top = scores.topk(take, dim=-1).indices.tolist()
        return [[memories[i] for i in row if memories[i].id not in banned][:k] for row in top]
