"""A scope's memories held in memory, caught up with the pool file before every search.

Ids only grow (the pool never reuses one) and a memory's content never changes, so catching up means reading the memories
with an id above the last one seen, plus the rows the pool's change log names (tier,
consolidation, importance, retirement and retrieval times change in place; rows may be deleted). While the
file's change token stands still nothing is read at all, so a search between writes costs no SQL,
and a write by another process sharing the file is seen on the next search.

Positions are fixed: the memory at position i stays there for the snapshot's life, so indexes
built beside a snapshot (dense vectors, BM25 postings) extend by position and never reshuffle.
One snapshot per (Pool object, scope) is shared by every retriever reading through that Pool.

An access rule (ms.pool.access) is a writer filter within the scope: `visible(reader)` is the searchable
mask ANDed with the positions whose writer the reader is granted, kept per distinct set of grants
(a memory's writer never changes, so that part only grows with the snapshot).
"""

import threading
import weakref

import numpy as np

from ms.pool import Memory, Pool
from ms.pool.access import Reader


def is_searchable(memory: Memory) -> bool:
    """What a search may return: long-term memories that were not folded into a summary nor retired
    (ms.pool.retirement). Under the plain policy that is every memory not retired; short-term memory
    is searched by its own policy."""
    return memory.tier == "long" and not memory.consolidated and memory.retired_step is None


class ScopeSnapshot:
    def __init__(self, pool: Pool, scope: str):
        # A weak reference: the registry below is keyed by the pool, and a strong one would keep it alive.
        self._pool = weakref.ref(pool)
        self.scope = scope
        self.memories: list[Memory | None] = []  # by position, in id order; None once deleted
        self.searchable = np.empty(0, dtype=bool)
        self.searchable_count = 0
        self.positions: dict[int, int] = {}  # memory id -> position
        self.generation = 0  # bumped whenever anything changed, so dependent indexes know to look
        self._last_id = 0
        self._last_change = 0
        self._token: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._granted: dict[frozenset[str], np.ndarray] = {}  # grants -> writer granted, by position
        self._visible: dict[frozenset[str], tuple[int, np.ndarray, int]] = {}  # grants -> (generation, mask, count)

    def __len__(self) -> int:
        return len(self.memories)

    def sync(self) -> "ScopeSnapshot":
        """Catch up with the pool file; returns self."""
        pool = self._pool()
        if pool is None:
            raise RuntimeError(f"the pool behind the snapshot of scope {self.scope!r} was closed and collected")
        # The token is read before the rows, so a write landing in between moves it again and the
        # next sync reads that write, rather than the snapshot settling on a token it never saw.
        token = pool.change_token()
        if token == self._token:
            return self
        with self._lock:
            if token == self._token:
                return self
            found = pool.changes(self.scope, self._last_id, self._last_change)
            for memory in found.changed:
                i = self.positions[memory.id]
                self.memories[i] = memory
                self.searchable[i] = is_searchable(memory)
            for memory_id in found.deleted:
                i = self.positions[memory_id]
                self.memories[i] = None
                self.searchable[i] = False
            if found.new:
                self._append(found.new)
                self._last_id = found.new[-1].id
            if found.new or found.changed or found.deleted:
                self.searchable_count = int(self.searchable.sum())
                self.generation += 1
            self._last_change = found.last_change
            self._token = token
        return self

    def _append(self, memories: list[Memory]) -> None:
        start = len(self.memories)
        self.memories.extend(memories)
        self.positions.update((m.id, start + i) for i, m in enumerate(memories))
        self.searchable = np.concatenate([self.searchable, np.fromiter(map(is_searchable, memories), bool)])

    def visible(self, reader: Reader | None) -> tuple[np.ndarray | None, int]:
        """(mask by position of the searchable memories `reader` may retrieve, how many): (None,
        searchable_count) where it may retrieve every one. The mask is shared: do not change it."""
        if reader is None or reader.writers is None:
            return None, self.searchable_count
        key = reader.writers
        with self._lock:
            cached = self._visible.get(key)
            if cached is not None and cached[0] == self.generation and len(cached[1]) == len(self.memories):
                return cached[1], cached[2]
            granted = self._granted.get(key, np.zeros(0, dtype=bool))
            if len(granted) < len(self.memories):
                fresh = [m is not None and reader.allows(m) for m in self.memories[len(granted) :]]
                granted = self._granted[key] = np.concatenate([granted, np.array(fresh, dtype=bool)])
            mask = self.searchable & granted[: len(self.searchable)]
            count = int(mask.sum())
            self._visible[key] = (self.generation, mask, count)
            return mask, count

    def searchable_positions(self) -> np.ndarray:
        return np.flatnonzero(self.searchable)

    def searchable_memories(self) -> list[Memory]:
        return [self.memories[i] for i in self.searchable_positions()]


_SNAPSHOTS: weakref.WeakKeyDictionary[Pool, dict[str, ScopeSnapshot]] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def snapshot(pool: Pool, scope: str) -> ScopeSnapshot:
    """The shared snapshot of `scope` through `pool`, caught up with the file."""
    with _REGISTRY_LOCK:
        scopes = _SNAPSHOTS.setdefault(pool, {})
        found = scopes.get(scope)
        if found is None:
            found = scopes[scope] = ScopeSnapshot(pool, scope)
    return found.sync()
