"""What metrics.json says of a run's stream (`stream`) and of its memory policy (`memory`), typed: the
pipeline builds them as the stream ends (ms.loop.pipeline), the report reads their attributes.

Vintages: runs from before the stream recorded what wrote its answers lack `answers`; a section written by
hand (a test's run) may lack others. A key a file lacks is named in `absent` and stays out when written
back. The keys written only where they apply (`skipped_without_reference` under reference answers, `poison`
under a poisoning writer, `retired` where memories can be retired) are None where a run did not write them.
"""

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Optional

from ms.common.sections import Section, read

WHERE_THEY_APPLY = ("skipped_without_reference", "poison")  # None: not written


def total(counts: Optional[Mapping[str, int]]) -> Optional[int]:
    """The sum of one of the stream's per-agent counts (StreamRecord.accepted, say); None where not recorded."""
    return sum(int(n) for n in counts.values()) if isinstance(counts, Mapping) else None


@dataclass(frozen=True)
class PoisonCounts:
    """A poisoning writer's pairs: how many the gate judged, admitted and refused."""

    asked: int
    accepted: int
    rejected: int

    @classmethod
    def from_json(cls, fields: Optional[Mapping[str, Any]]) -> Optional["PoisonCounts"]:
        return None if fields is None else cls(fields["asked"], fields["accepted"], fields["rejected"])

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class StreamRecord(Section):  # its fields are the stream's keys, in the order runs write them (ms.common.sections)
    questions: Optional[int] = None  # stream questions asked; 0 where the stream was skipped (k = 0)
    k: Optional[int] = None  # memories each stream question retrieved
    seeded: Optional[int] = None  # seed memories the pool began with
    answers: Optional[str] = None  # what the stream wrote: model | reference answers
    skipped_without_reference: Optional[Mapping[str, int]] = None  # agent -> questions left out, no reference
    accepted: Optional[Mapping[str, int]] = None  # agent -> stream answers the gate admitted
    rejected: Optional[Mapping[str, int]] = None
    unscored: Optional[int] = None  # rejected because no score could be read
    unscored_by_agent: Optional[Mapping[str, int]] = None
    pool_by_agent: Optional[Mapping[str, Mapping[str, int]]] = None  # fill -> writer -> memories in the pool
    train_losses: tuple[float, ...] = ()  # memory train's losses, step by step
    poison: Optional[PoisonCounts] = None
    absent: frozenset[str] = frozenset()  # keys this section's vintage did not write

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "StreamRecord":
        found = read(cls, fields, train_losses=lambda losses: tuple(losses or ()), poison=PoisonCounts.from_json)
        return replace(found, absent=found.absent | {name for name in WHERE_THEY_APPLY if fields.get(name) is None})

    @classmethod
    def of(cls, **fields: Any) -> "StreamRecord":
        """The section of a run that wrote `fields`, the keys written only where they apply left out where None."""
        return cls(**fields, absent=frozenset(name for name in WHERE_THEY_APPLY if fields.get(name) is None))


@dataclass(frozen=True)
class MemoryRecord(Section):
    policy: Optional[str] = None  # the memory policy
    consolidation: Optional[Mapping[str, int]] = None  # what consolidation did: summaries, summarized, moved ...
    retired: Optional[Mapping[str, int]] = None  # writer -> memories retired; None where nothing could be
    absent: frozenset[str] = frozenset()

    @classmethod
    def of(cls, policy: str, consolidation: Mapping[str, int], retired: Optional[Mapping[str, int]]) -> "MemoryRecord":
        return cls(policy, consolidation, retired, absent=frozenset({"retired"} if retired is None else ()))
