"""One small interface for every retrieval strategy."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Sequence

from ms.pool import Memory, Pool

_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_]+", re.UNICODE)  # CJK one character per token, else words


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def memory_text(memory: Memory) -> str:
    """The memory side of retrieval sees question and answer; the query side only a question."""
    return f"{memory.question}\n{memory.answer}"


class Retriever(ABC):
    def __init__(self, pool: Pool):
        self.pool = pool

    def searchable(self, scope: str) -> list[Memory]:
        """What a search may return: long-term memories that were not folded into a summary. Under
        the plain pool that is every memory; short-term memory is searched by its own policy."""
        return self.pool.memories(scope, tier="long", include_consolidated=False)

    @abstractmethod
    def retrieve(self, query: str, scope: str, k: int, exclude: Sequence[int] = ()) -> list[Memory]:
        """The k best memories of `scope` for `query`, best first, never one whose id is in `exclude`."""

    def retrieve_batch(self, queries: Sequence[str], scope: str, k: int) -> list[list[Memory]]:
        return [self.retrieve(q, scope, k) for q in queries]
