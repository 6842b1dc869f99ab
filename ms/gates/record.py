"""What metrics.json's run record keeps of a run's gate: its name and the settings its option records
(each gate's `record`, ms.gates.base.Gate.record), one typed section of the run record (ms.loop.run_record).

A field a gate does not record is None here and is left out of the record; the gate's name is the one
field every record has a value for (runs record it only where it is not the rubric gate: ms.config.added).
"""

from dataclasses import dataclass, field, fields
from typing import Any, Collection, Mapping, Optional

from ms.config.added import before, field_of

NAME = "gate"  # the run-record field that names the gate


@dataclass(frozen=True)
class GateRecord:
    name: str
    # The record fields of the built-in gates (SETTINGS), in the order they write them; each gate writes one group.
    match: Optional[str] = None  # random matched to another run: its folder, and that run's gate
    matched_gate: Optional[str] = None
    rate: Optional[float] = None  # random, unmatched: the share of pairs it admits
    utility_threshold: Optional[float] = None  # utility, both
    utility_probes: Optional[int] = None
    utility_decide_on: Optional[str] = None
    question_others: Optional[int] = None  # rubric_qdep
    question_margin: Optional[float] = None
    question_seed: Optional[int] = None
    genre_margin: Optional[float] = None  # rubric_genre
    genre_backbone: Optional[str] = None  # rubric_genre with a test backbone of its own
    # What a gate records that no built-in gate does (a plugin gate's own settings), as written.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, fields: Mapping[str, Any], others: Collection[str] = ()) -> "GateRecord":
        """The gate's section of a run record, or a gate's `record`: its fields, and every field neither
        the gate's nor among `others` (the rest of the run record's) in `extra`. A record that names no
        gate ran with the gate runs ran before the field was added; a measuring gate's record without
        utility_decide_on, with what runs decided on before it was added (ms.config.added)."""
        found = {name: fields.get(name) for name in SETTINGS}
        if found["utility_threshold"] is not None and found["utility_decide_on"] is None:
            found["utility_decide_on"] = before("gate.decide_on")
        extra = {k: v for k, v in fields.items() if k != NAME and k not in SETTINGS and k not in others}
        return cls(field_of(fields, NAME), **found, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The gate's fields as its `record` writes them, those it does not record left out; the run
        record leaves out those at the value older runs ran with (ms.config.added.recorded)."""
        found = {name: getattr(self, name) for name in SETTINGS}
        return {NAME: self.name, **{k: v for k, v in found.items() if v is not None}, **self.extra}


SETTINGS = tuple(f.name for f in fields(GateRecord) if f.name not in ("name", "extra"))
