"""summary.md's sections, in its order: each draws from the report (ms.report.context), writes its own files
into the report's folder and returns its part of summary.md ('' where it has nothing to show), and may use
what an earlier one recorded in the report. write_report (ms.report.cli) walks SECTIONS."""

from typing import Callable, NamedTuple

from ms.report.context import Report
from ms.report.figures.figure4 import figure4_section
from ms.report.figures.growth import growth_section
from ms.report.sharing.access_compare import write_access
from ms.report.sharing.matrices import write_sharing
from ms.report.sharing.poison import write_poison
from ms.report.tables.ablation import ablation_section
from ms.report.tables.claim_files import claims_section
from ms.report.tables.pages import exclusion_section, records_section, runs_section
from ms.report.tables.tables import tables_section
from ms.report.usage.quality import write_quality
from ms.report.usage.screens import screens_markdown
from ms.report.usage.usage import write_usage


class Section(NamedTuple):
    name: str
    draw: Callable[[Report], str]  # writes the section's files; returns its part of summary.md


def _part(text: str, end: str = "\n") -> str:
    """A section's text after a blank line, as summary.md sets it; '' where it has none."""
    return f"\n{text}{end}" if text else ""


SECTIONS = (
    Section("runs", runs_section),  # runs.md; the sweep, the metric and every run
    Section("claims", claims_section),  # claims.md, claims.csv
    Section("tables", tables_section),  # table1, table2 (.md, .csv, .tex)
    Section("ablation", ablation_section),  # ablation.md, ablation.csv
    Section("figure 4", figure4_section),  # figure4_<backbone>, figure4_gates_<backbone>
    Section("pool growth", growth_section),  # pool_growth_<run>.png, stream_share.md/.csv
    Section("stream-only runs", lambda r: _part(screens_markdown(r.screens) if r.screens else "", end="")),
    Section("sharing", lambda r: _part(write_sharing(r.runs, r.out, r.metric, r.sharing_fill))),  # sharing/
    Section("quality", lambda r: _part(write_quality([*r.runs, *r.screens], r.out), end="")),  # quality.md/.csv
    Section("access", lambda r: _part(write_access(r.runs, r.out, r.metric))),  # access.md
    Section("poison", lambda r: _part(write_poison(r.runs, r.out, r.metric))),  # poison.md/.csv/.png/.pdf
    Section("test questions left out", exclusion_section),
    Section("usage", lambda r: f"\n## LLM usage and cost\n\n{write_usage([*r.runs, *r.screens], r.out)}\n\n"),
    Section("records", records_section),
)
