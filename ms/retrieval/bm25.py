"""BM25 over question + answer: a retrieval baseline and the miner of training candidates.

`BM25Retriever` keeps an inverted index per scope that grows with the pool: a memory that becomes
searchable adds its postings and raises document frequencies; one that stops being searchable
(folded into a summary, deleted) leaves the statistics without a rebuild. It scores as rank-bm25's
BM25Okapi does, with the same tokenizer, k1, b and epsilon floor on negative idf, term by term in
query order, so on the plain policy its scores are bit-identical to the reference's and so are its
rankings, ties included. A search touches only the postings of the query's terms.

A reader's access rule (ms.pool.access) withholds memories as `exclude` does: their scores become -inf
before the top k, while the statistics stay those of the whole scope (a rule filters what a reader
may see; it does not change the scope every reader's scores are computed over).

`RankBM25Retriever` rebuilds a rank-bm25 index whenever the searchable set changes. It is the
reference the incremental path is tested and benchmarked against.
"""

import math
from array import array
from collections import Counter
from typing import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from ms.pool import Memory
from ms.pool.access import Reader
from ms.retrieval.base import Retriever, memory_text, tokenize
from ms.retrieval.snapshot import ScopeSnapshot

K1, B, EPSILON = 1.5, 0.75, 0.25  # rank-bm25's BM25Okapi defaults
EMPTY = "<empty>"  # the one token of a memory with no words; BM25Okapi cannot take an empty document


def document_terms(memory: Memory) -> list[str]:
    return tokenize(memory_text(memory)) or [EMPTY]


class _Postings:
    """The (position, term frequency) pairs of one term. C arrays, because appending to them is
    cheap and numpy copies them whole at C speed when a query needs them."""

    __slots__ = ("positions", "freqs")

    def __init__(self):
        self.positions = array("q")
        self.freqs = array("d")


class InvertedIndex:
    """BM25Okapi statistics over the documents at active positions; positions only ever grow."""

    def __init__(self):
        self.term_ids: dict[str, int] = {}
        self.postings: list[_Postings] = []
        self.df = np.zeros(0, dtype=np.int64)  # active documents holding each term
        self.doc_terms: list[np.ndarray | None] = []  # term ids per position; None until indexed
        self.doc_len = np.zeros(0, dtype=np.int64)
        self.active = np.zeros(0, dtype=bool)
        self.n_active = 0
        self.total_len = 0
        self._stats: tuple[np.ndarray, float] | None = None  # per-position denominators, epsilon idf

    def __len__(self) -> int:
        return len(self.active)

    def grow(self, size: int) -> None:
        extra = size - len(self.active)
        if extra > 0:
            self.doc_terms.extend([None] * extra)
            self.doc_len = np.concatenate([self.doc_len, np.zeros(extra, dtype=np.int64)])
            self.active = np.concatenate([self.active, np.zeros(extra, dtype=bool)])

    def indexed(self, position: int) -> bool:
        return self.doc_terms[position] is not None

    def activate(self, position: int, terms: Sequence[str] | None = None) -> None:
        """Count the document at `position` in the statistics; `terms`, its tokens, are needed only
        the first time (a document that comes back reuses the postings it kept)."""
        if self.active[position]:
            return
        if not self.indexed(position):
            # Counter keeps first-occurrence order, so new terms get ids in the order rank-bm25 meets them.
            ids = []
            for term, freq in Counter(terms).items():
                t = self.term_ids.get(term)
                if t is None:
                    t = self.term_ids[term] = len(self.postings)
                    self.postings.append(_Postings())
                post = self.postings[t]
                post.positions.append(position)
                post.freqs.append(freq)
                ids.append(t)
            if len(self.df) < len(self.postings):
                self.df = np.concatenate(
                    [self.df, np.zeros(max(len(self.postings) - len(self.df), len(self.df)), dtype=np.int64)]
                )
            self.doc_terms[position] = np.array(ids, dtype=np.int64)
            self.doc_len[position] = len(terms)
        self.df[self.doc_terms[position]] += 1
        self.active[position] = True
        self.n_active += 1
        self.total_len += int(self.doc_len[position])
        self._stats = None

    def deactivate(self, position: int) -> None:
        """Leave the document at `position` out of the statistics (its postings stay, masked)."""
        if not self.active[position]:
            return
        self.df[self.doc_terms[position]] -= 1
        self.active[position] = False
        self.n_active -= 1
        self.total_len -= int(self.doc_len[position])
        self._stats = None

    def _statistics(self) -> tuple[np.ndarray, float]:
        if self._stats is None:
            n, avgdl = self.n_active, self.total_len / self.n_active
            # Written as rank-bm25 writes it, so every float comes out the same.
            denominators = K1 * (1 - B + B * self.doc_len / avgdl)
            # rank-bm25's epsilon is a share of the mean idf over the corpus's terms, summed one by
            # one in the order it met them: math.log and a running sum reproduce it to the last bit.
            present = [int(f) for f in self.df[self.df > 0]]
            idfs = [math.log(n - f + 0.5) - math.log(f + 0.5) for f in present]
            total = 0.0
            for idf in idfs:
                total += idf
            self._stats = denominators, EPSILON * (total / len(idfs))
        return self._stats

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """BM25Okapi score of every position for the query; -inf at positions not active."""
        scores = np.zeros(len(self.active))
        if self.n_active:
            denominators, eps = self._statistics()
            for term in query_terms:  # repeats count again, as in rank-bm25
                t = self.term_ids.get(term)
                if t is None or self.df[t] == 0:
                    continue
                f = int(self.df[t])
                idf = math.log(self.n_active - f + 0.5) - math.log(f + 0.5)
                idf = eps if idf < 0 else idf
                post = self.postings[t]
                at, freq = np.array(post.positions), np.array(post.freqs)
                scores[at] += idf * (freq * (K1 + 1) / (freq + denominators[at]))
        scores[~self.active] = -np.inf
        return scores


def top_positions(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest finite scores, best first; equal scores keep position order (a
    stable sort of the whole array, without sorting it)."""
    take = min(k, int(np.isfinite(scores).sum()))
    if take <= 0:
        return np.empty(0, dtype=np.int64)
    threshold = np.partition(scores, len(scores) - take)[len(scores) - take]
    candidates = np.flatnonzero(scores >= threshold)
    return candidates[np.argsort(-scores[candidates], kind="stable")][:take]


class BM25Retriever(Retriever):
    """The incremental path: one `InvertedIndex` per scope, caught up with the scope's snapshot."""

    def __init__(self, pool):
        super().__init__(pool)
        self._indexes: dict[str, tuple[InvertedIndex, int]] = {}  # scope -> (index, snapshot generation)

    def index(self, scope: str) -> tuple[ScopeSnapshot, InvertedIndex]:
        snap = self.snapshot(scope)
        index, generation = self._indexes.get(scope, (None, -1))
        if index is None:
            index = InvertedIndex()
        if generation != snap.generation:
            index.grow(len(snap))
            for position in np.flatnonzero(snap.searchable != index.active[: len(snap)]):
                if snap.searchable[position]:
                    known = index.indexed(position)
                    index.activate(int(position), None if known else document_terms(snap.memories[position]))
                else:
                    index.deactivate(int(position))
            self._indexes[scope] = (index, snap.generation)
        return snap, index

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        snap, index = self.index(scope)
        if k <= 0 or index.n_active == 0:
            return []
        scores = index.scores(tokenize(query))
        banned = [snap.positions[i] for i in exclude if i in snap.positions]
        scores[banned] = -np.inf
        visible = snap.visible(reader)[0]
        if visible is not None:
            scores[: len(visible)][~visible] = -np.inf
        return [snap.memories[i] for i in top_positions(scores, k)]


class RankBM25Retriever(Retriever):
    """The reference: rank-bm25 rebuilt over the searchable memories whenever they change."""

    def __init__(self, pool):
        super().__init__(pool)
        self._index: dict[str, tuple[tuple[int, ...], list[Memory], BM25Okapi | None]] = {}

    def _scope_index(self, scope: str) -> tuple[list[Memory], BM25Okapi | None]:
        memories = self.searchable(scope)
        ids = tuple(m.id for m in memories)
        cached = self._index.get(scope)
        if cached is None or cached[0] != ids:  # rebuilt only when the searchable set changed
            bm25 = BM25Okapi([document_terms(m) for m in memories], k1=K1, b=B, epsilon=EPSILON) if memories else None
            cached = self._index[scope] = (ids, memories, bm25)
        return cached[1], cached[2]

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        memories, bm25 = self._scope_index(scope)
        if k <= 0 or bm25 is None:
            return []
        scores = bm25.get_scores(tokenize(query))
        banned = set(exclude)
        # Stable sort: ties keep pool order, so results are reproducible.
        order = np.argsort(-scores, kind="stable")
        return [
            memories[i]
            for i in order
            if memories[i].id not in banned and (reader is None or reader.allows(memories[i]))
        ][:k]

    def scores(self, query: str, scope: str) -> tuple[list[Memory], np.ndarray]:
        """Every searchable memory with its score, for comparing the two paths."""
        memories, bm25 = self._scope_index(scope)
        return memories, (bm25.get_scores(tokenize(query)) if bm25 is not None else np.zeros(0))
