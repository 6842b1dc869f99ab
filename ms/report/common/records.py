"""Each run's record (metrics.json `provenance`, ms.loop.provenance): where two runs the report pools (seed
replicates) or pairs (the claims' comparisons) differ in model files, engines or package versions (summary.md
warns of each: ms.report.tables.pages), and how many runs of a table were recorded dirty or carry none. A
different commit alone is no difference: most commits do not touch the arithmetic, and a sweep resumed after
a commit would warn on every cell."""

from typing import Any, Sequence

from ms.loop.provenance_record import Provenance
from ms.report.common.runs import Run


def compared_fields(record: Provenance) -> dict[str, Any]:
    """The record's fields that must agree between runs whose numbers are set against each other,
    by a readable name."""
    out: dict[str, Any] = {f"{package} version": v for package, v in (record.versions or {}).items()}
    for name, backbone in (record.backbones or {}).items():
        out[f"backbone {name} engine"] = backbone.engine
        out |= {f"backbone {name} file {file} SHA-256": sha for file, sha in (backbone.sha256 or {}).items()}
    for role, encoder in (record.encoders or {}).items():
        out |= {f"{role} encoder file {file} SHA-256": sha for file, sha in (encoder.sha256 or {}).items()}
    return out


def differences(a: Run, b: Run) -> list[str]:
    """One line per field in which the two runs' records differ; none where either has no record."""
    record_a, record_b = a.written.provenance, b.written.provenance
    if record_a is None or record_b is None:
        return []
    fields_a, fields_b = compared_fields(record_a), compared_fields(record_b)
    return [
        f"{key}: {fields_a.get(key, 'absent')} in {a.name}, {fields_b.get(key, 'absent')} in {b.name}"
        for key in dict.fromkeys([*fields_a, *fields_b])
        if fields_a.get(key) != fields_b.get(key)
    ]


def record_counts(runs: Sequence[Run]) -> str:
    """The line under a table of runs: how many it shows, how many of them recorded a tree that differed
    from their commit (provenance `dirty: true`) and how many carry no run record at all (written before
    metrics.json had one), e.g. "runs: 6, of which 2 recorded dirty, 1 without a run record"."""
    shown = list({run.name: run for run in runs}.values())  # a run a table names twice counts once
    records = [run.written.provenance for run in shown]  # None: written before metrics.json had one
    dirty = sum(record is not None and record.dirty is True for record in records)
    lacking = sum(record is None for record in records)
    return f"runs: {len(shown)}, of which {dirty} recorded dirty, {lacking} without a run record"
