"""The typed run record (ms.loop.run_record): every committed run's metrics.json `run` section reads back
to the same dict, key for key and in order; an older record takes the values of the fields added since
from ms.config.added's table, and writes them back left out; a key no section declares is kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ms.common.errors import UserError
from ms.config.added import ADDED
from ms.loop.run_record import RunRecord

REPO = Path(__file__).resolve().parents[1]


def committed_metrics() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [REPO / p for p in listed if p.endswith("/metrics.json")]


def test_every_committed_run_record_reads_back_to_the_dict_it_was_written_as():
    paths = committed_metrics()
    assert paths, "no committed metrics.json under results/"
    for path in paths:
        metrics = json.loads(path.read_text(encoding="utf-8"))
        written = RunRecord.from_metrics(metrics, path).to_json()
        assert list(written.items()) == list(metrics["run"].items()), path


OLD = {  # the record of a run from before any added field, and before `refresh` was written
    "backbone": "smollm2",
    "k": 3,
    "pool": "domain",
    "retriever": "dense",
    "learned": True,
    "stream_retriever": "dense (learned)",
    "memory": "plain",
    "label_method": "likelihood",
    "agents": ["riddle", "pun"],
    "fills": [50, 100],
    "seed": 0,
    "metrics": ["bertscore"],
    "scorer_read": "probabilities",
}


def test_an_older_record_takes_the_added_fields_values_from_the_table_of_additions():
    record = RunRecord.from_json(OLD)
    before = {row.field: row.before for row in ADDED if row.field and not row.kept}
    assert record.gate.name == before["gate"] and record.evaluated is before["evaluated"]
    assert record.best_of == before["best_of"] and record.greedy
    assert record.stream_answers == before["stream_answers"] and record.grader is before["grader"]
    assert record.access is None and record.poison is None and record.retire is None
    assert record.refresh is None and record.absent == {"refresh"}
    assert record.agents == ("riddle", "pun") and record.fills == (50, 100)
    assert list(record.to_json().items()) == list(OLD.items())


def with_refresh(refresh) -> dict:
    """OLD as runs since `refresh` was written record it: after `memory`."""
    at = list(OLD).index("memory") + 1
    return dict([*list(OLD.items())[:at], ("refresh", refresh), *list(OLD.items())[at:]])


def test_added_fields_are_written_only_where_they_depart_from_the_older_value():
    fields = {**with_refresh("query_tower"), "gate": "utility", "utility_threshold": 0.0, "utility_probes": 3}
    fields |= {"best_of": 4, "select": "rubric", "temperature": 0.7, "grader": "qwen", "threshold": 23}
    record = RunRecord.from_json(fields)
    assert record.gate.utility_decide_on == "mean"  # recorded only where lower
    assert not record.greedy and record.grader == "qwen" and record.threshold == 23
    assert list(record.to_json().items()) == list(fields.items())


def test_a_key_no_section_declares_is_kept_where_a_plugin_gate_wrote_it():
    fields = {**with_refresh(None), "gate": "toy", "toy_ratio": 2.0, "stream_answers": "reference"}
    record = RunRecord.from_json(fields)
    assert record.gate.name == "toy" and record.gate.extra == {"toy_ratio": 2.0}
    assert list(record.to_json().items()) == list(fields.items())


def test_a_record_without_its_cell_says_so_and_metrics_without_a_record_are_refused_naming_the_file(tmp_path):
    partial = RunRecord.from_json({"backbone": "smollm2", "k": 3})
    assert not partial.has_cell and RunRecord.from_json(OLD).has_cell
    assert partial.to_json() == {"backbone": "smollm2", "k": 3}
    path = tmp_path / "metrics.json"
    with pytest.raises(UserError, match=f"{path}: no run record"):
        RunRecord.from_metrics({}, path)


def test_a_record_from_before_the_memory_policy_was_recorded_names_its_memory_sections_policy():
    fields = {k: v for k, v in OLD.items() if k != "memory"}
    record = RunRecord.from_metrics({"run": fields, "memory": {"policy": "stm_ltm"}})
    assert record.memory == "stm_ltm" and "memory" not in record.to_json()
    assert RunRecord.from_json(fields).memory == "plain"
