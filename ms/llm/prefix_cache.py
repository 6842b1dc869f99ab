"""Key-value caches of prompt prefixes that many prompts begin with, such as the gate's system
message and rubric, which every pair of a domain is graded under. A forward pass over a prompt then
starts from its prefix's cache and reads only the rest."""

import copy
from collections import OrderedDict
from typing import Any, Callable, Sequence


def shared_length(ids: Sequence[int], prefixes: Sequence[Sequence[int]]) -> int:
    """How many leading tokens of `ids` the longest-agreeing prefix spells, leaving at least one
    token of `ids` to read (a forward pass needs one to give next-token logits). A prefix
    tokenized alone can end in a token that its continuation merges with, so only the leading
    tokens that agree count."""
    best = 0
    for prefix in prefixes:
        n = 0
        for a, b in zip(ids, prefix):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return min(best, len(ids) - 1)


class PrefixCaches:
    """The least recently used prefixes are dropped beyond `capacity`: each holds every layer's keys
    and values for its tokens (about 46 kB per token for SmolLM2-135M in fp32)."""

    def __init__(self, capacity: int = 8):
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def copy_for(self, ids: Sequence[int], compute: Callable[[list[int]], Any]) -> Any:
        """A copy of the cache of `ids`, computed by `compute(ids)` the first time; a copy, because
        a forward pass appends the rest of its prompt to the cache it is given."""
        key = tuple(ids)
        if key in self._entries:
            self._entries.move_to_end(key)
        else:
            self._entries[key] = compute(list(ids))
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return copy.deepcopy(self._entries[key])

    def __len__(self) -> int:
        return len(self._entries)
