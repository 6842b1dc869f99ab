"""What metrics.json's run record keeps of the access rule a run read its pool under (`run.access`, written
by the rule's `record`: ms.pool.access.table), one typed section of the run record (ms.loop.run_record).
A run under the open rule records no section."""

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

KNOWN = ("rule", "file", "grants", "default", "learned")


@dataclass(frozen=True)
class AccessRecord:
    rule: str  # the rule's registered name
    file: Optional[str] = None  # the rule file it was read from
    grants: Mapping[str, Optional[list[str]]] = field(default_factory=dict)  # reader -> writers; None: every writer
    # The writers a reader the table does not name is granted: None, every writer; its absence (has_default
    # false), the rule file names no default.
    default: Optional[list[str]] = None
    has_default: bool = False
    learned: Optional[Mapping[str, Any]] = None  # how a learned rule was learned (ms.cli.learn_access)
    extra: Mapping[str, Any] = field(default_factory=dict)  # what a plugin rule records besides, kept as written

    @classmethod
    def from_json(cls, section: Optional[Mapping[str, Any]]) -> Optional["AccessRecord"]:
        """The section as recorded; None where the run records none (the open rule)."""
        if not section:
            return None
        return cls(
            rule=section["rule"],
            file=section.get("file"),
            grants=dict(section.get("grants") or {}),
            default=section.get("default"),
            has_default="default" in section,
            learned=section.get("learned"),
            extra={k: v for k, v in section.items() if k not in KNOWN},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            **({"file": self.file} if self.file is not None else {}),
            "grants": dict(self.grants),
            **({"default": self.default} if self.has_default else {}),
            **({"learned": self.learned} if self.learned is not None else {}),
            **self.extra,
        }
