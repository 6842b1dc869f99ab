"""What was added when: every setting and run-record field that runs were committed without, with the value
those older runs ran with. One table, read by the resume identity (ms.loop.cell), the typed run record
(ms.loop.run_record), and the report's labels and pairing (ms.report.common.labels, ms.report.common.runs).

A run records an added field only where it departs from the value older runs ran with, so that a run of
today and one from before the field stay one condition in the report; a cell record lacking an added
setting ran with its older value, so the run resumes as the same cell. Adding a setting or a field that
committed runs lack is one row here.
"""

from dataclasses import dataclass
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class Added:
    setting: Optional[str]  # the dotted setting; None for a record field no one setting holds
    before: Any  # what every run before it ran with (its field then recorded nothing)
    field: Optional[str] = None  # its run-record field (metrics.json `run`), recorded only where not `before`
    with_field: tuple[str, ...] = ()  # fields recorded with it, and left out with it
    # Added after runs began recording their cell: a cell record without it resumes at `before`. Settings
    # every cell record holds (the gate's name) are in the table for their record field only.
    cell: bool = False
    kept: bool = False  # recorded whatever its value (runs since it was added record it at `before` too)


ADDED: tuple[Added, ...] = (
    # Added after runs began recording their cell (in the order the cell record's settings take them).
    Added("access.name", "open", field="access", cell=True),  # recorded by the rule (AccessRule.record)
    Added("access.file", None, cell=True),
    Added("poison.name", "none", field="poison", cell=True),  # recorded by the poisoner (Poisoner.record)
    Added("scorer.defence", "none", cell=True),
    Added("eval.enabled", True, field="evaluated", cell=True),
    Added("stream.best_of", 1, field="best_of", with_field=("select", "temperature"), cell=True),
    Added("memory.retire_below", None, field="retire", cell=True),  # no memory retired (ms.pool.retirement)
    Added("memory.retire_after", 6, cell=True),  # not read while nothing is retired: any value reproduces those runs
    # kept in the cell only under the gates that declare it (cell.declared_only); recorded by the gate
    Added("gate.decide_on", "mean", field="utility_decide_on", cell=True),
    Added("gate.test_backbone", None, field="genre_backbone", cell=True),  # None: each agent's own backbone
    # Settings every cell record holds, whose run-record field runs record only where not `before`.
    Added("gate.name", "rubric", field="gate"),  # recorded by the gate (Gate.record)
    Added("stream.answers", "model", field="stream_answers"),
    Added("scorer.backbone", None, field="grader", with_field=("threshold",)),  # None: the answering backbone
    Added(None, None, field="agent_backbones"),  # None: every agent on the run's backbone
    # Recorded by every run since it was added, whatever its value; records from before it lack it.
    Added("memory.policy", "plain", field="memory", kept=True),
    # Read from a run's saved config, not its record.
    Added("pool.backend", "sqlite"),
)


def since_cell() -> dict[str, Any]:
    """setting -> the value a cell record that lacks it ran with."""
    return {row.setting: row.before for row in ADDED if row.cell and row.setting}


def before(setting: str) -> Any:
    """The value runs from before `setting` was added ran with; None for a setting every run recorded."""
    return next((row.before for row in ADDED if row.setting == setting), None)


def recorded(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A run record less each added field at the value older runs ran with, and the fields recorded with it."""
    gone = {
        name
        for row in ADDED
        if not row.kept and row.field in fields and fields[row.field] == row.before
        for name in (row.field, *row.with_field)
    }
    return {k: v for k, v in fields.items() if k not in gone}


def field_of(fields: Mapping[str, Any], name: str) -> Any:
    """A run record's field, or where the record lacks it the value runs that do not record it ran with."""
    return fields[name] if name in fields else next((row.before for row in ADDED if row.field == name), None)
