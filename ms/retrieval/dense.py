"""Dense retrieval with the bi-encoder, over cached memory embeddings.

Embeddings are cached by memory id for the current encoder version: a retrieval encodes only
memories it has not seen; a training step bumps the version, and the next retrieval re-encodes
the scope once. Retrieval is then one matrix product and a top-k.
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
        self._cached_version = 0
        self._embeddings: dict[int, torch.Tensor] = {}
        self.encoded = 0  # memories encoded so far, for the run's accounting

    def encoder_changed(self) -> None:
        self.encoder_version += 1

    def embed(self, memories: Sequence[Memory]) -> torch.Tensor:
        """[M, d] embeddings of the memories' question + answer, encoding only what is not cached."""
        if self._cached_version != self.encoder_version:
            self._embeddings.clear()
            self._cached_version = self.encoder_version
        missing = [m for m in memories if m.id not in self._embeddings]
        if missing:
            fresh = self.encoder.encode([memory_text(m) for m in missing])
            self._embeddings.update(zip((m.id for m in missing), fresh))
            self.encoded += len(missing)
        if not memories:
            return torch.empty(0, 0)
        return torch.stack([self._embeddings[m.id] for m in memories])

    def similarities(self, queries: Sequence[str], scope: str) -> tuple[list[Memory], torch.Tensor]:
        """Cosine of every query with every memory of the scope: ([M] memories, [Q, M] scores)."""
        memories = self.searchable(scope)
        if not memories:
            return [], torch.empty(len(queries), 0)
        return memories, self.encoder.encode(list(queries)) @ self.embed(memories).T

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
