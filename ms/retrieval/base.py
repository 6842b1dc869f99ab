"""One small interface for every retrieval strategy: the k best memories of a scope for a query, as a
reader (an agent, with the writers its access rule grants it: ms.pool.access) may see them.

Honouring a rule is the retriever's part: it draws candidates only among the positions
`snapshot(scope).visible(reader)` leaves, a mask ANDed into whatever it searches before it takes the
top k, so a withheld memory can never be returned and never takes the place of one that may be.
`reader` None, or an open reader, is every memory of the scope.
"""

import re
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, NamedTuple, Optional, Sequence

from ms.pool import Memory, Pool
from ms.pool.access import Reader
from ms.retrieval.snapshot import ScopeSnapshot, snapshot

_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_]+", re.UNICODE)  # CJK one character per token, else words


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def memory_text(memory: Memory) -> str:
    """The memory side of retrieval sees question and answer; the query side only a question."""
    return f"{memory.question}\n{memory.answer}"


class Built(NamedTuple):
    """What the loop needs of a retriever: the retriever, and the dense part that memory train
    fine-tunes (None where nothing learns)."""

    retriever: "Retriever"
    trainable: Optional[Any]  # a ms.retrieval.dense.DenseRetriever


class Retriever(ABC):
    # As a registered part (ms.config.parts.RETRIEVERS): whether it runs an encoder (the run's
    # provenance records it), and whether memory train can fine-tune it (retriever.learn).
    uses_encoder: ClassVar[bool] = False
    trainable: ClassVar[bool] = False

    def __init__(self, pool: Pool):
        self.pool = pool

    @classmethod
    def build(cls, cfg, pool: Pool, *, learned: bool, clock: Callable[[], int] | None = None) -> Built:
        """The retriever `cfg` (a RetrieverConfig) describes over `pool`; `learned`: whether memory train
        will fine-tune it; `clock`: the run's current pool step. By default built from the pool alone."""
        return Built(cls(pool), None)

    def snapshot(self, scope: str) -> ScopeSnapshot:
        """`scope`'s memories as they stand in the pool file now, without re-reading it."""
        return snapshot(self.pool, scope)

    def searchable(self, scope: str) -> list[Memory]:
        """What a search may return (see `is_searchable`), oldest first."""
        return self.snapshot(scope).searchable_memories()

    def state(self, scope: str) -> dict[str, int]:
        """What a retrieval from `scope` just used: the retriever's version (training steps it has
        taken) and how many steps stale its memory index was. A retriever that never trains has
        version 0 and is never stale."""
        return {"retriever_version": 0, "index_staleness": 0}

    def withheld(self, scope: str, reader: Reader | None) -> int:
        """How many of `scope`'s searchable memories `reader`'s rule withholds from it now (0: none)."""
        snap = self.snapshot(scope)
        return snap.searchable_count - snap.visible(reader)[1]

    @abstractmethod
    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        """The k best memories of `scope` for `query`, best first, never one whose id is in `exclude`
        nor one `reader`'s access rule withholds."""

    def retrieve_batch(
        self, queries: Sequence[str], scope: str, k: int, reader: Reader | None = None
    ) -> list[list[Memory]]:
        return [self.retrieve(q, scope, k, reader=reader) for q in queries]
