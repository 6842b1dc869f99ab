"""The probability that a reply begins with each of a set of options, from next-token log-probs.

Shared by every provider that reads probabilities: they differ in how they get a next-token
distribution (in-process forward passes, a server's top log-probs), not in how the options'
probabilities follow from those distributions.
"""

import math
from typing import Callable, Hashable, Sequence

Token = Hashable  # a token id (in-process) or a token's text (a server names tokens by their text)
Path = tuple  # an option's tokens


class OptionPaths:
    """The options as token paths, and which next-token distributions their probabilities need:
    the one after every proper prefix of an option. The empty prefix is the prompt itself, then
    e.g. "1" on the way to "10" and "10" on the way to "100"."""

    def __init__(self, paths: Sequence[Path]):
        self.paths = [tuple(p) for p in paths]
        if not all(self.paths) or len(set(self.paths)) != len(self.paths):
            raise ValueError("options must be non-empty and tokenize differently")
        self.prefixes = sorted({p[:i] for p in self.paths for i in range(len(p))}, key=lambda p: (len(p), p))
        # The tokens that lead on from each prefix towards some option.
        self.extensions: dict[Path, set[Token]] = {p: set() for p in self.prefixes}
        for path in self.paths:
            for i in range(len(path)):
                self.extensions[path[:i]].add(path[i])

    def probabilities(self, logprob: Callable[[Path, Token], float]) -> list[float]:
        """Each option's probability, given `logprob(prefix, token)`: log P(token | prompt + prefix)."""
        row = []
        for path in self.paths:
            logp = sum(logprob(path[:i], t) for i, t in enumerate(path))
            # A reply that goes on into a longer option belongs to that option, not to this one.
            longer = sum(math.exp(logprob(path, t)) for t in self.extensions.get(path, ()))
            row.append(math.exp(logp) * max(0.0, 1.0 - longer))
        return row
