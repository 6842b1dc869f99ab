"""What metrics.json keeps of a run's LLM calls (`usage`, the run's llm_usage.json: ms.llm.usage.usage_report),
typed. Runs from before usage was kept per backbone wrote an older shape, kept here as written (`older`)
and read in today's shape through `upgraded` (ms.llm.usage.upgraded_usage)."""

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

from ms.llm.usage import upgraded_usage


@dataclass(frozen=True)
class BackboneUsage:
    model: Optional[str]
    provider: Optional[str]
    price: Optional[Mapping[str, float]]  # per million input and output tokens; None: unpriced
    roles: Mapping[str, Mapping[str, Any]]  # role -> its counters (ms.llm.accounting.Usage)
    total: Mapping[str, Any]
    cost: Optional[Mapping[str, Optional[float]]] = None  # role (and "total") -> estimated cost; only where priced

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "BackboneUsage":
        return cls(
            fields.get("model"), fields.get("provider"), fields.get("price"), fields["roles"], fields["total"],
            fields.get("cost"),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        return out if self.cost is not None else {name: v for name, v in out.items() if name != "cost"}


@dataclass(frozen=True)
class UsageRecord:
    backbones: Mapping[str, BackboneUsage] = field(default_factory=dict)  # by backbone config name
    total: Optional[Mapping[str, Any]] = None
    cost: Optional[float] = None  # None unless every backbone is priced
    older: Optional[Mapping[str, Any]] = None  # a shape from before usage was kept per backbone, as written

    @classmethod
    def from_json(cls, fields: Optional[Mapping[str, Any]]) -> "UsageRecord":
        """The record of a `usage` section (or an llm_usage.json) of any shape ms has written; {} or None: none."""
        if not fields or "backbones" not in fields:
            return cls(older=fields)
        backbones = {name: BackboneUsage.from_json(b) for name, b in fields["backbones"].items()}
        return cls(backbones, fields["total"], fields.get("cost"))

    def to_json(self) -> Optional[dict[str, Any]]:
        if self.total is None:
            return None if self.older is None else dict(self.older)
        backbones = {name: b.to_json() for name, b in self.backbones.items()}
        return {"backbones": backbones, "total": self.total, "cost": self.cost}

    @property
    def kept(self) -> bool:
        """Whether the run kept any usage."""
        return bool(self.backbones or self.older)

    def upgraded(self, backbone: str) -> Optional[dict[str, Any]]:
        """The usage in today's shape (usage_report's, which ms.llm.usage reads); `backbone` names the
        run's, which older shapes credit the agents' calls to; None for none."""
        return upgraded_usage(self.to_json() or {}, backbone)
