"""access=open (the default): every reader reads every memory of its scope, as before rules existed."""

from typing import Sequence

from ms.pool.access.base import AccessRule, Reader


class OpenAccess(AccessRule):
    @classmethod
    def build(cls, cfg, agents: Sequence[str]) -> "OpenAccess":
        return cls()

    def reader(self, agent: str) -> Reader:
        return Reader(agent)
