"""Approximate nearest-neighbour search over one scope's memory vectors (retriever.index=ann).

An HNSW graph (faiss-cpu) kept beside the dense retriever's exact vectors, labelled by snapshot
position, and following them: new rows are added as they appear, a re-encoding rebuilds the graph
(HNSW cannot move a node), and rows that stop being searchable are filtered out during the search
until they are over half the graph (docs/concepts/retrieval.md, "Approximate index", says why each).
Scopes never share a graph. A reader's access rule (ms.pool.access) narrows the filter further: its
mask (searchable and granted, by position) replaces the searchable one for its searches, and a walk
it leaves short is redone exactly.

faiss is an optional extra (`pip install 'ms[ann]'`); this module imports it only when a graph is
made, so ms runs without it while retriever.index=exact.
"""

import importlib.util
from contextlib import contextmanager

import numpy as np

from ms.common.errors import UserError

# HNSW graph degree (faiss M). At 100k structured vectors, M=32 against M=16 raised recall@10 at
# efSearch=64 from 0.994 to 0.997 for 1.3x the search time and 8% more index memory; the margin is
# for 1M, where recall at a given effort is lower (benchmarks/ann_libraries.py, README).
GRAPH_DEGREE = 32
BUILD_EFFORT = 128  # faiss efConstruction: candidates kept while linking a new node
# faiss shares a search or an add among its OpenMP threads by vector. A single query, or a stream
# batch of a few dozen new rows, gains little from that, and waiting for the threads to meet costs
# milliseconds whenever other processes hold the cores: at 10k vectors, load average 4 on this
# 2-core machine, a one-query graph search's p99 was 20-22 ms on two threads, 4-8 ms on one.
PARALLEL_FROM = 256  # vectors per call before faiss may use all its threads
NO_FAISS = "faiss-cpu is not installed: pip install 'ms[ann]' (or faiss-cpu), or set retriever.index=exact"


def ann_problem() -> str | None:
    """Why retriever.index=ann cannot run here, or None; looked up without importing faiss."""
    return None if importlib.util.find_spec("faiss") is not None else NO_FAISS


def require_faiss():
    """The faiss module; where it is missing, a one-line UserError that says what to do."""
    try:
        import faiss
    except ImportError:
        raise UserError(f"retriever.index=ann needs faiss-cpu; {NO_FAISS}") from None
    return faiss


@contextmanager
def _threads(faiss, vectors: int):
    """faiss on one thread for calls on fewer than PARALLEL_FROM vectors."""
    if vectors >= PARALLEL_FROM:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class ScopeGraph:
    """The HNSW graph of one scope. `follow` brings it up to date with the retriever's vectors;
    `search` returns snapshot positions."""

    def __init__(self, ef_search: int, degree: int = GRAPH_DEGREE, build_effort: int = BUILD_EFFORT):
        self._faiss = require_faiss()
        self.ef_search, self.degree, self.build_effort = ef_search, degree, build_effort
        self.builds = 0  # graphs made, the first included: a test and the benchmark count rebuilds
        self.added = 0  # vectors put into any graph, for the same accounting
        self._index = None
        self._version: int | None = None  # encoder version of the vectors the graph holds
        self._writes = -1  # the retriever's write counter when the graph last looked for new rows
        self._generation = -1  # snapshot generation when `_dead` and the selector were last worked out
        self._in_graph = np.zeros(0, dtype=bool)  # by snapshot position
        self._dead = 0  # rows in the graph that are no longer searchable
        self._params = None
        self._bitmap = self._selector = None  # the filter's bits and selector: faiss holds raw pointers
        # A reader's mask -> (the mask, kept so its id is not reused; its bits; its selector), by id:
        # the snapshot hands out the same array until its generation moves. A few readers' grants at once.
        self._readers: dict[int, tuple[np.ndarray, np.ndarray, object]] = {}

    def __len__(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def _build(self, dim: int, version: int) -> None:
        faiss = self._faiss
        hnsw = faiss.IndexHNSWFlat(dim, self.degree, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = self.build_effort
        self._index = faiss.IndexIDMap(hnsw)  # labels are snapshot positions, added in any order
        self._version, self._writes = version, -1
        self._in_graph = np.zeros(0, dtype=bool)
        self._dead = 0
        self._params = None
        self.builds += 1

    def follow(self, vectors: np.ndarray, encoded: np.ndarray, version: int, writes: int, snap) -> None:
        """Catch up with the retriever: `vectors` ([capacity, d] float32) and `encoded` (which rows
        hold a vector) at encoder `version`; `writes` changes whenever rows were (re)encoded, so a
        search between writes costs no scan of the scope; `snap` is the scope's snapshot."""
        if self._index is None or version != self._version:
            self._build(vectors.shape[1], version)
        changed = snap.generation != self._generation
        if changed:
            rows = len(self._in_graph)
            self._dead = int(np.count_nonzero(self._in_graph & ~snap.searchable[:rows]))
            if 2 * self._dead > len(self):
                self._build(vectors.shape[1], version)
        # New rows come with a write; a row can also come back to life (tier short -> long) with
        # only a snapshot change. Either way the scan runs once per change, never per search.
        if writes != self._writes or changed:
            rows = len(encoded)
            if len(self._in_graph) < rows:
                grown = np.zeros(rows - len(self._in_graph), dtype=bool)
                self._in_graph = np.concatenate([self._in_graph, grown])
            # Rows not searchable now stay out, as a rebuild leaves the dead out; they join when back.
            fresh = np.flatnonzero(encoded & snap.searchable[:rows] & ~self._in_graph[:rows])
            if fresh.size:
                with _threads(self._faiss, fresh.size):
                    self._index.add_with_ids(
                        np.ascontiguousarray(vectors[fresh], dtype=np.float32), fresh.astype(np.int64)
                    )
                self._in_graph[fresh] = True
                self.added += fresh.size
            self._writes = writes
        if changed or self._params is None:
            self._params = self._search_params(snap.searchable if self._dead else None)
            self._generation = snap.generation
            self._readers.clear()  # masks of an older generation are not asked for again

    def set_effort(self, ef_search: int) -> None:
        """Search with this efSearch from now on (the benchmark's recall/latency frontier)."""
        self.ef_search = ef_search
        if self._params is not None:
            self._params.efSearch = ef_search

    def nbytes(self) -> int:
        """Memory the graph holds: its own copy of the vectors, the links, levels and labels."""
        if self._index is None:
            return 0
        flat = self._faiss.downcast_index(self._index.index)
        links = flat.hnsw
        return (
            flat.ntotal * flat.storage.sa_code_size()
            + links.neighbors.size() * 4
            + links.levels.size() * 4
            + links.offsets.size() * 8
            + self._index.id_map.size() * 8
        )

    def _selector_of(self, mask: np.ndarray):
        """(bits, selector) keeping the positions `mask` marks: faiss reads bit i of the bitmap as
        bitmap[i >> 3] >> (i & 7) & 1, little-endian bit order; positions past the mask are left out."""
        bitmap = np.packbits(mask, bitorder="little")
        return bitmap, self._faiss.IDSelectorBitmap(len(bitmap), self._faiss.swig_ptr(bitmap))

    def _search_params(self, searchable: np.ndarray | None):
        faiss = self._faiss
        if searchable is None:  # every row in the graph is searchable: no filter to pay for
            return faiss.SearchParametersHNSW(efSearch=self.ef_search)
        self._bitmap, self._selector = self._selector_of(searchable)
        return faiss.SearchParametersHNSW(efSearch=self.ef_search, sel=self._selector)

    def _reader_params(self, visible: np.ndarray):
        """Search parameters filtering by a reader's mask (searchable AND granted, by position)."""
        found = self._readers.get(id(visible))
        if found is None or found[0] is not visible:
            if len(self._readers) >= 16:
                self._readers.clear()
            found = self._readers[id(visible)] = (visible, *self._selector_of(visible))
        return self._faiss.SearchParametersHNSW(efSearch=self.ef_search, sel=found[2])

    def search(self, queries: np.ndarray, take: int, visible: np.ndarray | None = None) -> list[np.ndarray]:
        """Per query row, the positions of up to `take` searchable memories, nearest first; with
        `visible` (a reader's mask by position, searchable ones only), only those it marks. faiss
        walks with max(efSearch, take) candidates, so a large `take` is not starved; fewer come
        back only where the filter rejected most of what the walk met."""
        if not len(self):
            return [np.zeros(0, dtype=np.int64) for _ in queries]
        params = self._params if visible is None else self._reader_params(visible)
        with _threads(self._faiss, len(queries)):
            _, labels = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), take, params=params)
        return [row[row >= 0] for row in labels]  # -1: fewer than `take` found
