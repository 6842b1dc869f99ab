"""Who may read whose memories: an access rule maps each reading agent to the writers whose memories
it may retrieve, a writer filter within the scope it reads (docs/concepts/access.md). A rule may also
grant `seed` as a writer of its own: every seed pair, whoever it was seeded for. A reader holds its
grants as a frozenset, so readers with the same grants can be searched as one batch, and each index
keeps one mask per distinct set of grants.
"""

from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

SEED = "seed"  # the writer name that grants every seed pair
ALL = "all"  # in a rule file: every writer


@dataclass(frozen=True)
class Reader:
    """An agent as a reader, with the writers its rule grants it; `writers` None: every writer.
    Two readers with the same `writers` see the same memories."""

    agent: str
    writers: Optional[frozenset[str]] = None

    @property
    def open(self) -> bool:
        return self.writers is None

    def allows(self, memory: Any) -> bool:
        """Whether this reader may retrieve `memory` (anything with `agent` and `origin`)."""
        w = self.writers
        return w is None or memory.agent in w or (memory.origin == SEED and SEED in w)


class AccessRule:
    """A registered access rule. `reader(agent)` is all the loop asks of it; the classmethods say
    what the run's checks and record need without building it."""

    @classmethod
    def build(cls, cfg, agents: Sequence[str]) -> "AccessRule":
        """The rule `cfg` (an AccessConfig) describes, for the configured `agents`."""
        raise NotImplementedError(f"{cls.__name__} does not say how it is built from the access config")

    @classmethod
    def problems(cls, cfg, agents: Sequence[str], running: Sequence[str], plan: bool = False) -> Iterator[str]:
        """Its settings' problems, one line each naming the key (and the file and line where it reads
        one), before anything opens; `agents`: every configured agent, `running`: those that run."""
        return iter(())

    def reader(self, agent: str) -> Reader:
        raise NotImplementedError

    def grants(self) -> Optional[dict[str, Optional[list[str]]]]:
        """reader -> its writers, sorted (None: every writer); None for a rule that grants everything."""
        return None

    def record(self) -> dict:
        """What metrics.json's `run` records of the rule: {} for the open rule, so runs under it stay one
        condition with runs from before rules existed."""
        return {}
