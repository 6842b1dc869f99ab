"""What every section of a report draws from (ms.report.sections): the runs and their conditions, as
write_report reads them once, and what the sections drew that later ones and the site use."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from ms.report.common.conditions import Condition
from ms.report.common.render import Table
from ms.report.common.runs import Cell, Run, Skipped
from ms.report.tables.claims import ClaimRow, Comparison
from ms.report.tables.paper import PaperTables


@dataclass
class Report:
    roots: Sequence[Path]
    out: Path  # the folder each section writes its files into
    metric: str
    paper: PaperTables
    runs: Sequence[Run]  # the runs that answered test questions
    screens: Sequence[Run]  # stream-only runs (eval.enabled=false): only what reads decisions shows them
    skipped: Sequence[Skipped]
    conds: Sequence[Condition]  # seed replicates pooled
    chosen: dict[Cell, Condition]  # the condition that speaks for each table cell
    why_not: dict[str, str]  # run name -> why no table uses it
    sharing_fill: Optional[int] = None  # None: each run's last
    exclude_tests: Optional[Path] = None  # the file of the test ids left out (`excluded`)
    excluded: frozenset[str] = frozenset()
    # What the sections drew, for later ones (the records check the claims' runs) and the site, figures by title:
    tables: dict[str, Table] = field(default_factory=dict)
    compared: Sequence[Comparison] = ()
    claim_rows: Sequence[ClaimRow] = ()
    untested: Sequence[str] = ()
    figures: dict[str, Path] = field(default_factory=dict)
