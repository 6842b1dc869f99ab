"""A run's record: what metrics.json's `run` section says the run was, typed (ARCHITECTURE.md, "One
typed run record"). The parts that a registry can vary own their sections, declared beside their
settings: the gate's fields (ms.gates.record), the access rule's (ms.pool.access.record), the
poisoner's (ms.data.poison_record).

Vintages. A field added after runs were committed is recorded only where it departs from the value older
runs ran with (ms.config.added): reading, a record that lacks it takes that value from the table
(`field_of`); writing, `recorded` leaves it out again. A field every run wrote since the record began
but that some early vintage lacks (`refresh`) is None here and named in `absent`, so that it stays out
when written back. A key no section declares (a plugin gate's own setting) is kept with the gate's
fields (GateRecord.extra), never dropped.
"""

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from ms.common.errors import UserError
from ms.common.sections import as_json
from ms.config.added import field_of, recorded
from ms.data.poison_record import PoisonRecord
from ms.gates.record import GateRecord
from ms.pool.access.record import AccessRecord

LISTS = ("agents", "fills", "metrics")  # written as lists, held as tuples
CELL = ("backbone", "k", "pool")  # what the report groups runs by: a record without them is no finished run's


@dataclass(frozen=True)
class Retire:
    """memory.retire_below and memory.retire_after, recorded only where something could be retired."""

    below: float
    after: int

    def to_json(self) -> dict[str, float]:
        return {"below": self.below, "after": self.after}


@dataclass(frozen=True)
class RunRecord:
    backbone: str  # None only in a record that lacks it (`absent`), as no finished run's does
    k: int
    pool: str  # the pool mode
    # What the test questions retrieved with, and whether memory train learned it; the stream's own
    # retriever is stream_retriever (they differ under retriever.at_test).
    retriever: Optional[str] = None
    learned: Optional[bool] = None
    stream_retriever: Optional[str] = None
    memory: str = field_of({}, "memory")  # the memory policy
    refresh: Optional[str] = None  # what memory train refreshes (retriever.refresh); None: nothing trained
    label_method: Optional[str] = None
    agents: tuple[str, ...] = ()  # the agents that ran, in the config's order
    fills: tuple[int, ...] = ()
    seed: Optional[int] = None
    metrics: tuple[str, ...] = ()  # the metrics measured (eval.metrics less those no backbone can measure)
    scorer_read: Optional[str] = None  # what the grader read its grade from
    gate: GateRecord = field(default_factory=lambda: GateRecord(field_of({}, "gate")))
    # The fields added since runs were committed, at the value older runs ran with where they record none.
    best_of: int = field_of({}, "best_of")  # stream answers sampled per question, one kept
    select: Optional[str] = None  # with best_of > 1: how the kept one is chosen, and the sampling temperature
    temperature: Optional[float] = None
    evaluated: bool = field_of({}, "evaluated")  # False: a stream-only run, no test question answered
    stream_answers: str = field_of({}, "stream_answers")  # what the stream wrote: model | reference answers
    access: Optional[AccessRecord] = None  # None: the open rule
    poison: Optional[PoisonRecord] = None  # None: no poisoning writer
    grader: Optional[str] = None  # the backbone that graded, where not the run's own; and its threshold
    threshold: Optional[float] = None
    retire: Optional[Retire] = None  # None: nothing retired
    agent_backbones: Optional[Mapping[str, str]] = None  # agent -> its backbone; None: all on `backbone`
    absent: frozenset[str] = frozenset()  # fields of WRITTEN this record's vintage did not write

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "RunRecord":
        """The record of metrics.json's `run` section `fields`: each field as written, or where the record
        lacks it the value older runs ran with (field_of)."""
        found = {name: field_of(fields, name) for name in (*WRITTEN, *ADDED)}
        for name in LISTS:
            found[name] = tuple(found[name] or ())
        retire = found["retire"]
        found["retire"] = None if retire is None else Retire(retire["below"], retire["after"])
        found["access"] = AccessRecord.from_json(fields.get("access"))  # None: the open rule
        found["poison"] = PoisonRecord.from_json(fields.get("poison"))
        gate = GateRecord.from_json(fields, others=(*WRITTEN, *ADDED))
        return cls(**found, gate=gate, absent=frozenset(name for name in WRITTEN if name not in fields))

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], path: Optional[Path] = None) -> "RunRecord":
        """The record of a run's metrics.json (read into `metrics`, from `path`). A record from before the
        memory policy was recorded names the policy its `memory` section does, if any."""
        source = path if path is not None else "metrics.json"
        fields = metrics.get("run")
        if not isinstance(fields, Mapping):
            raise UserError(f"{source}: no run record (its `run` section)")
        found = cls.from_json(fields)
        policy = (metrics.get("memory") or {}).get("policy")
        return replace(found, memory=policy) if "memory" in found.absent and policy else found

    def to_json(self) -> dict[str, Any]:
        """metrics.json's `run` section, as runs write it: the fields in their order, those of `absent`
        and the added ones at the value older runs ran with left out."""
        out = {name: as_json(getattr(self, name)) for name in WRITTEN if name not in self.absent}
        out.update(self.gate.to_json())
        for name in ADDED:
            value = getattr(self, name)
            if value is not None or name not in ("access", "poison"):
                out[name] = as_json(value)
        return recorded(out)

    @property
    def has_cell(self) -> bool:
        """Whether the record names the run's cell (CELL), as every finished run's does."""
        return not self.absent.intersection(CELL)

    @property
    def greedy(self) -> bool:
        """Whether the stream kept the one answer it drew per question, as every run before best_of did."""
        return self.best_of == field_of({}, "best_of")

    def without(self, *names: str) -> dict[str, Any]:
        """to_json() less the fields named: what two runs that differ only in those share."""
        return {k: v for k, v in self.to_json().items() if k not in names}


_ORDER = [f.name for f in fields(RunRecord)]
# The fields every run has written since the record began, in the order they are written: the record's, up
# to the gate's; some early vintages lack one (`absent`). The first three name a run's cell (CELL).
WRITTEN = tuple(_ORDER[: _ORDER.index("gate")])
# The fields after the gate's, in the order they are written; each added after runs were committed. The
# two sections among them, access and poison, are written only where the run has one.
ADDED = tuple(_ORDER[_ORDER.index("gate") + 1 : _ORDER.index("absent")])
