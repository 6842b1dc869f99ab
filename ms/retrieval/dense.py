"""Dense retrieval with the bi-encoder, over memory vectors kept per scope.

Each scope keeps one contiguous [memories, d] tensor whose row i embeds the scope snapshot's
memory at position i. A search catches the snapshot up, encodes only searchable memories that
have no vector yet, and is then one matrix product and a top-k; query vectors are cached by
(encoder version, text).

Memory train changes the encoder after every step (`encoder_changed`); the refresh policy
(`refresh`: full, every_n, budget, query_tower; docs/concepts/retrieval.md, "How memory vectors
follow training") decides when the memory vectors are re-encoded to follow it. `state(scope)` says
which version a search used and how many steps stale its vectors were.

Search is exact (`index="exact"`: one matrix product over the scope) or, for scopes of at least
`ann_min_size` searchable memories, approximate (`index="ann"`: an HNSW graph per scope that
follows these vectors, ms.retrieval.ann). Either way the candidates' cosines are the exact ones.

A reader's access rule (ms.pool.access) masks the cosines before the top k (exact search), or is ANDed
into the graph's filter (ann), whose shortfall falls back to exact search with the same mask.
"""

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from ms.pool import Memory
from ms.pool.access import Reader
from ms.retrieval.base import Built, Retriever, memory_text
from ms.retrieval.encoder import Encoder
from ms.retrieval.settings import ANN_EF, ANN_MIN_SIZE, INDEXES, REFRESH_POLICIES
from ms.retrieval.snapshot import ScopeSnapshot

if TYPE_CHECKING:  # faiss is imported only where a graph is made
    from ms.retrieval.ann import ScopeGraph

QUERY_CACHE_SIZE = 8192  # query vectors kept; an evaluation's test questions fit many times over


@dataclass
class _ScopeIndex:
    snapshot: ScopeSnapshot
    vectors: torch.Tensor | None = None  # [capacity, d]; rows past len(snapshot) are unused
    encoded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # row holds a vector
    version: int = 0  # encoder version at which every vector was last (re)computed
    writes: int = 0  # bumped whenever rows are (re)encoded, so an ANN graph knows when to look
    generation: int = -1  # snapshot generation the vectors were last caught up with
    graph: "ScopeGraph | None" = None  # under index="ann", once the scope reached ann_min_size


class DenseRetriever(Retriever):
    uses_encoder = True
    trainable = True

    @classmethod
    def build(cls, cfg, pool, *, learned: bool, clock=None) -> Built:
        refresh = cfg.refresh if learned else "full"
        if refresh not in REFRESH_POLICIES:  # before the encoder loads
            raise ValueError(f"unknown retriever.refresh '{refresh}'; choose one of {', '.join(REFRESH_POLICIES)}")
        if cfg.index == "ann":  # before the encoder loads, too
            from ms.retrieval.ann import require_faiss

            require_faiss()
        search = {"index": cfg.index, "ann_min_size": cfg.ann_min_size, "ann_ef": cfg.ann_ef}
        dense = cls(pool, Encoder(cfg.encoder), refresh, cfg.refresh_every, cfg.refresh_budget, **search)
        return Built(dense, dense if learned else None)

    def __init__(
        self,
        pool,
        encoder: Encoder,
        refresh: str = "full",
        refresh_every: int = 1,
        refresh_budget: int = 1000,
        index: str = "exact",
        ann_min_size: int = ANN_MIN_SIZE,
        ann_ef: int = ANN_EF,
    ):
        super().__init__(pool)
        if index not in INDEXES:
            raise ValueError(f"unknown retriever.index '{index}'; choose one of {', '.join(INDEXES)}")
        if ann_min_size < 1 or ann_ef < 1:
            raise ValueError(
                f"retriever.ann_min_size and retriever.ann_ef must be at least 1, got {ann_min_size} and {ann_ef}"
            )
        if index == "ann":
            from ms.retrieval.ann import require_faiss

            require_faiss()  # a missing faiss is a UserError now, not once a scope first grows large
        self.index_kind, self.ann_min_size, self.ann_ef = index, ann_min_size, ann_ef
        if refresh not in REFRESH_POLICIES:
            raise ValueError(f"unknown retriever.refresh '{refresh}'; choose one of {', '.join(REFRESH_POLICIES)}")
        if refresh_every < 1:
            raise ValueError(f"retriever.refresh_every must be at least 1, got {refresh_every}")
        if refresh_budget < 1:
            raise ValueError(f"retriever.refresh_budget must be at least 1, got {refresh_budget}")
        self.refresh, self.refresh_every, self.refresh_budget = refresh, refresh_every, refresh_budget
        self.encoder = encoder  # the memory side
        self.query_encoder = encoder  # the query side: the same encoder, except under query_tower
        if refresh == "query_tower":
            self.query_encoder = copy.deepcopy(encoder)
            self.encoder.requires_grad_(False)
        self.encoder_version = 0  # training steps taken: bumped by whoever changes the weights
        self.encoded = 0  # memories encoded so far, for the run's accounting
        self.refreshes = 0  # times a scope's vectors were all thrown away to be re-encoded
        self.ann_fallbacks = 0  # ANN searches that found fewer than asked and were done exactly
        self._indexes: dict[str, _ScopeIndex] = {}
        self._queries: dict[str, torch.Tensor] = {}
        self._queries_version = 0

    def encoder_changed(self) -> None:
        self.encoder_version += 1

    def memory_side(self, texts: Sequence[str]) -> torch.Tensor:
        """Memory embeddings for a training step: through the shared encoder, with gradients; under
        query_tower through the frozen memory encoder, without."""
        if self.refresh != "query_tower":
            return self.encoder(texts)
        with torch.no_grad():
            return self.encoder(texts)

    # ---- the memory index ------------------------------------------------------------------

    def _refresh_due(self, index: _ScopeIndex) -> bool:
        steps = self.encoder_version - index.version
        if self.refresh == "full":
            return steps > 0
        if self.refresh == "every_n":
            return steps >= self.refresh_every
        if self.refresh == "budget":
            return steps > 0 and steps * self.refresh_budget >= len(index.snapshot)
        return False  # query_tower: the memory encoder never changes

    def index(self, scope: str) -> _ScopeIndex:
        """`scope`'s vectors, caught up: every searchable memory has one."""
        index = self._indexes.get(scope)
        if index is None:
            index = self._indexes[scope] = _ScopeIndex(self.snapshot(scope), version=self.encoder_version)
        snap = index.snapshot.sync()
        refresh = self._refresh_due(index)
        if snap.generation == index.generation and not refresh:
            return index  # nothing new: no scan of the scope, which at 1M memories costs milliseconds
        if len(index.encoded) < len(snap):
            index.encoded = np.concatenate([index.encoded, np.zeros(len(snap) - len(index.encoded), dtype=bool)])
        if refresh:
            if index.encoded.any():
                self.refreshes += 1
            index.encoded[:] = False
            index.version = self.encoder_version
            index.writes += 1
        missing = np.flatnonzero(snap.searchable & ~index.encoded)
        if missing.size:
            fresh = self.encoder.encode([memory_text(snap.memories[i]) for i in missing])
            self._reserve(index, len(snap), fresh.shape[1])
            index.vectors[torch.from_numpy(missing)] = fresh.to(index.vectors.dtype)
            index.encoded[missing] = True
            index.writes += 1
            self.encoded += len(missing)
        elif index.vectors is not None:  # rows for memories that are not searchable yet
            self._reserve(index, len(snap), index.vectors.shape[1])
        index.generation = snap.generation  # last: an encoding that failed is tried again
        return index

    @staticmethod
    def _reserve(index: _ScopeIndex, rows: int, dim: int) -> None:
        """Room for `rows` vectors; capacity doubles, so adding memories one by one stays linear."""
        have = 0 if index.vectors is None else index.vectors.shape[0]
        if have >= rows:
            return
        grown = torch.zeros(max(rows, 2 * have, 64), dim)
        if index.vectors is not None:
            grown[:have] = index.vectors
        index.vectors = grown

    def state(self, scope: str) -> dict[str, int]:
        index = self._indexes.get(scope)
        # Under query_tower the memory vectors come from an encoder that never changes: never stale.
        stale = 0 if index is None or self.refresh == "query_tower" else self.encoder_version - index.version
        return {"retriever_version": self.encoder_version, "index_staleness": stale}

    # ---- queries ---------------------------------------------------------------------------

    def query_vectors(self, queries: Sequence[str]) -> torch.Tensor:
        """[Q, d] query embeddings by the current query encoder, each text encoded once per version."""
        if self._queries_version != self.encoder_version:
            self._queries.clear()
            self._queries_version = self.encoder_version
        missing = list(dict.fromkeys(q for q in queries if q not in self._queries))
        if missing:
            for text, vector in zip(missing, self.query_encoder.encode(missing)):
                self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE_SIZE:  # oldest first: dicts keep insertion order
                del self._queries[next(iter(self._queries))]
        return torch.stack([self._queries[q] for q in queries])

    # ---- search ----------------------------------------------------------------------------

    def _graph(self, index: _ScopeIndex) -> "ScopeGraph | None":
        """The scope's ANN graph, caught up with its vectors, where this search should use one."""
        if self.index_kind != "ann" or index.snapshot.searchable_count < self.ann_min_size:
            return None  # a small scope: exact search is fast, and exact
        if index.graph is None:
            from ms.retrieval.ann import ScopeGraph

            index.graph = ScopeGraph(self.ann_ef)
        index.graph.follow(index.vectors.numpy(), index.encoded, index.version, index.writes, index.snapshot)
        return index.graph

    def graph(self, scope: str) -> "ScopeGraph | None":
        """`scope`'s ANN graph as the next search would use it; None where that search is exact."""
        return self._graph(self.index(scope))

    @staticmethod
    def _cosines(query_vectors: torch.Tensor, index: _ScopeIndex, visible: np.ndarray | None = None) -> torch.Tensor:
        """[Q, len(snapshot)] cosines, -inf off the searchable positions, or off `visible` (a
        reader's mask, searchable ones only) where given."""
        snap = index.snapshot
        cosines = query_vectors.to(index.vectors.dtype) @ index.vectors[: len(snap)].T
        if visible is not None:
            cosines.masked_fill_(~torch.from_numpy(visible), float("-inf"))
        elif snap.searchable_count < len(snap):
            cosines.masked_fill_(~torch.from_numpy(snap.searchable), float("-inf"))
        return cosines

    def scores(
        self, query_vectors: torch.Tensor, scope: str, reader: Reader | None = None
    ) -> tuple[ScopeSnapshot, torch.Tensor]:
        """Cosine of each query with each snapshot position: [Q, len(snapshot)], -inf wherever the
        memory is not searchable (short-term, consolidated or deleted) or `reader`'s rule withholds
        it. Always exact."""
        index = self.index(scope)
        snap = index.snapshot
        visible, count = snap.visible(reader)
        if count == 0:
            return snap, torch.full((len(query_vectors), len(snap)), float("-inf"))
        return snap, self._cosines(query_vectors, index, visible)

    def nearest(
        self, query_vectors: torch.Tensor, scope: str, take: int, reader: Reader | None = None
    ) -> tuple[ScopeSnapshot, list[list[int]], list[torch.Tensor]]:
        """Per query vector, the snapshot positions of the `take` most similar searchable memories
        that `reader` may retrieve, best first, and their cosines: by exact search, or by the scope's
        ANN graph, whose candidates are then scored exactly and sorted again, so both paths report
        the same cosines."""
        index = self.index(scope)
        snap = index.snapshot
        visible, count = snap.visible(reader)
        take = min(take, count)
        if take <= 0:
            return snap, [[] for _ in query_vectors], [torch.empty(0) for _ in query_vectors]
        queries = query_vectors.detach().to(index.vectors.dtype)
        graph = self._graph(index)
        if graph is None:
            top = self._cosines(queries, index, visible).topk(take, dim=-1)
            return snap, top.indices.tolist(), list(top.values)
        # numpy for these few-row products: torch may hand even a tiny one to its thread pool, and
        # on busy cores waiting for it cost milliseconds per search (measured at 10k, load 5).
        positions, cosines, vectors, asked = [], [], index.vectors.numpy(), queries.numpy()
        for query, found in zip(asked, graph.search(asked, take, visible)):
            if len(found) < take:  # a walk among many filtered rows came up short: search exactly
                self.ann_fallbacks += 1
                top = self._cosines(torch.from_numpy(query)[None], index, visible)[0].topk(take)
                positions.append(top.indices.tolist())
                cosines.append(top.values)
                continue
            cos = vectors[found] @ query
            order = np.argsort(-cos, kind="stable")
            positions.append(found[order].tolist())
            cosines.append(torch.from_numpy(cos[order]))
        return snap, positions, cosines

    def search(
        self, query_vectors: torch.Tensor, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[list[Memory]]:
        """Per query vector, the k most similar searchable memories `reader` may retrieve, never one
        in `exclude`."""
        if k <= 0:
            return [[] for _ in range(len(query_vectors))]
        banned = set(exclude)
        snap, positions, _ = self.nearest(query_vectors, scope, k + len(banned), reader)
        found = [[snap.memories[i] for i in row] for row in positions]
        return [[m for m in row if m.id not in banned][:k] for row in found] if banned else found

    def similarities(
        self, queries: Sequence[str], scope: str, reader: Reader | None = None
    ) -> tuple[list[Memory], torch.Tensor]:
        """Cosine of every query with every searchable memory `reader` may retrieve: ([M] memories,
        [Q, M] scores)."""
        if not self.snapshot(scope).visible(reader)[1]:
            return [], torch.empty(len(queries), 0)
        snap, cosines = self.scores(self.query_vectors(queries), scope, reader)
        visible = snap.visible(reader)[0]  # as the scores saw the snapshot
        positions = snap.searchable_positions() if visible is None else np.flatnonzero(visible)
        return [snap.memories[i] for i in positions], cosines[:, torch.from_numpy(positions)]

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        if k <= 0 or not self.snapshot(scope).searchable_count:
            return []
        return self.search(self.query_vectors([query]), scope, k, exclude, reader)[0]

    def retrieve_batch(
        self, queries: Sequence[str], scope: str, k: int, reader: Reader | None = None
    ) -> list[list[Memory]]:
        if k <= 0 or not self.snapshot(scope).searchable_count:
            return [[] for _ in queries]
        return self.search(self.query_vectors(queries), scope, k, reader=reader)
