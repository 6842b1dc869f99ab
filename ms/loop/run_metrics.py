"""A run's metrics.json, typed: one object for the whole file, each section read into attributes
(`run`: ms.loop.run_record; `stream` and `memory`: ms.loop.stream_record; `fills` and the metrics'
descriptions: ms.metrics.summary_record; `usage`: ms.llm.usage_record; `provenance` and `cell`:
ms.loop.provenance_record). The pipeline builds it as a run ends and writes `to_json()`; the report reads
every committed vintage back with `from_json` and reads its attributes, never its keys.

The sections are written in one order: complete, run, the metrics' descriptions (each metric's record_key,
None where the run did not use it), fills, stream, memory, usage, provenance, wall_seconds, cell. A section
a vintage lacks (provenance and cell, before they were recorded) is None and stays out when written back;
so does a section a test's hand-written run leaves out.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from ms.common.errors import UserError
from ms.common.sections import as_json
from ms.llm.usage_record import UsageRecord
from ms.loop.provenance_record import CellRecord, Provenance
from ms.loop.run_record import RunRecord
from ms.loop.stream_record import MemoryRecord, StreamRecord
from ms.metrics.summary_record import BertScoreRecord, FillSummary, description_of

SECTIONS = ("complete", "run", "fills", "stream", "memory", "usage", "provenance", "wall_seconds", "cell")


@dataclass(frozen=True)
class RunMetrics:
    run: RunRecord
    complete: bool = False  # True once the run finished
    # record_key -> what produced a metric's numbers (typed where ms.metrics.summary_record knows its type)
    described: Mapping[str, Any] = field(default_factory=dict)
    fills: Mapping[int, FillSummary] = field(default_factory=dict)  # fill -> its summary; none for a stream-only run
    stream: StreamRecord = field(default_factory=StreamRecord)
    memory: MemoryRecord = field(default_factory=MemoryRecord)
    usage: UsageRecord = field(default_factory=UsageRecord)
    provenance: Optional[Provenance] = None
    wall_seconds: Optional[float] = None
    cell: Optional[CellRecord] = None
    absent: frozenset[str] = frozenset()  # of SECTIONS, those the file lacks

    @classmethod
    def from_json(cls, metrics: Mapping[str, Any], path: Optional[Path] = None) -> "RunMetrics":
        """The metrics of a run's metrics.json (read into `metrics`, from `path`); a UserError naming the
        file where it holds no run record."""
        if not isinstance(metrics, Mapping):
            raise UserError(f"{path if path is not None else 'metrics.json'}: not a JSON object")
        return cls(
            run=RunRecord.from_metrics(metrics, path),
            complete=metrics.get("complete") is True,
            described={key: description_of(key, value) for key, value in metrics.items() if key not in SECTIONS},
            fills={int(fill): FillSummary.from_json(summary) for fill, summary in (metrics.get("fills") or {}).items()},
            stream=StreamRecord.from_json(metrics.get("stream") or {}),
            memory=MemoryRecord.from_json(metrics.get("memory") or {}),
            usage=UsageRecord.from_json(metrics.get("usage")),
            provenance=Provenance.from_json(metrics.get("provenance")),
            wall_seconds=metrics.get("wall_seconds"),
            cell=CellRecord.from_json(metrics.get("cell")),
            absent=frozenset(name for name in SECTIONS if name not in metrics),
        )  # fmt: skip

    @classmethod
    def read(cls, path: Path) -> "RunMetrics":
        """A run's metrics.json, typed; a UserError naming the file where it cannot be read as one."""
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")), path)
        except (OSError, json.JSONDecodeError) as error:
            raise UserError(f"{path}: {getattr(error, 'strerror', None) or error}") from None

    def to_json(self) -> dict[str, Any]:
        """metrics.json, as runs write it: its sections in their order, those of `absent` left out."""
        sections = {name: as_json(getattr(self, name)) for name in SECTIONS if name != "fills"}
        sections["fills"] = {str(fill): summary.to_json() for fill, summary in self.fills.items()}  # keys: text
        out = {name: sections[name] for name in ("complete", "run") if name not in self.absent}
        out.update((key, as_json(described)) for key, described in self.described.items())
        out.update((name, sections[name]) for name in SECTIONS[2:] if name not in self.absent)
        return out

    @property
    def bertscore(self) -> Optional[BertScoreRecord]:
        """What produced the run's BERTScore numbers; None where it measured none (or predates the record)."""
        found = self.described.get("bertscore")
        return found if isinstance(found, BertScoreRecord) else None

    @property
    def last_fill(self) -> Optional[FillSummary]:
        """The summary at the run's last fill; None for a stream-only run."""
        return self.fills[max(self.fills)] if self.fills else None
