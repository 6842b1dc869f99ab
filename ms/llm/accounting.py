"""What an LM's calls cost, counted per role: the counters (`Usage`) and the roles a call can be made
in (ROLES, and OTHER for a call made outside any)."""

from dataclasses import asdict, dataclass
from typing import Iterable


@dataclass
class Usage:
    calls: int = 0  # requests that reached the backend (a batch of n counts n)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    backend_seconds: float = 0.0
    retries: int = 0  # API requests sent again after a transient failure or an unusable reply

    @classmethod
    def total(cls, parts: Iterable["Usage"]) -> "Usage":
        out = cls()
        for part in parts:
            for name, value in asdict(part).items():
                setattr(out, name, getattr(out, name) + value)
        return out


# What a call is for. Callers tag their calls with `lm.acting_as(role)`; a call made outside any
# role counts under OTHER, so the roles always add up to the LM's total.
# `utility` is the utility gate's replay of probe questions (ms.gates.replay).
ROLES = ("answer", "score", "utility", "label", "summarize", "importance", "invert", "evaluate")
OTHER = "other"
