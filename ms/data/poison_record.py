"""What metrics.json's run record keeps of a run's poisoning writer (`run.poison`, written by the
poisoner's `record`: ms.data.poison), one typed section of the run record (ms.loop.run_record). A clean
run records no section."""

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

KNOWN = ("kind", "victim", "writer", "marker")


@dataclass(frozen=True)
class PoisonRecord:
    kind: str  # the poisoner's registered name
    victim: Optional[str] = None  # whose stream questions it answers
    writer: Optional[str] = None  # the name its pairs are written under
    marker: Optional[str] = None  # injection: the marker its instruction asks for
    extra: Mapping[str, Any] = field(default_factory=dict)  # what a plugin poisoner records besides, as written

    @classmethod
    def from_json(cls, section: Optional[Mapping[str, Any]]) -> Optional["PoisonRecord"]:
        """The section as recorded; None where the run records none (no poisoning writer)."""
        if not section:
            return None
        extra = {k: v for k, v in section.items() if k not in KNOWN}
        return cls(section["kind"], section.get("victim"), section.get("writer"), section.get("marker"), extra)

    def to_json(self) -> dict[str, Any]:
        found = {"kind": self.kind, "victim": self.victim, "writer": self.writer}
        return {**found, **({"marker": self.marker} if self.marker is not None else {}), **self.extra}
