"""The typed metrics.json (ms.loop.run_metrics): every committed run's whole file reads back to the same
dict, section for section, key for key and in order; a vintage's missing keys and sections stay missing,
and the keys written only where they apply stay out where they did not."""

from __future__ import annotations

import json

import pytest
from test_run_record import OLD, committed_metrics

from ms.common.errors import UserError
from ms.loop.run_metrics import RunMetrics
from ms.loop.stream_record import MemoryRecord, StreamRecord


def test_every_committed_metrics_json_reads_back_to_the_dict_it_was_written_as():
    paths = committed_metrics()
    assert paths, "no committed metrics.json under results/"
    for path in paths:
        metrics = json.loads(path.read_text(encoding="utf-8"))
        written = RunMetrics.from_json(metrics, path).to_json()
        assert json.dumps(written) == json.dumps(metrics), path  # the same keys in the same order, nested too


def test_the_committed_vintages_are_read_into_attributes():
    """Between them, the committed runs hold each vintage: with and without provenance, cell and the
    stream's `answers`; the older usage shape; stream-only runs, without fills."""
    read = [RunMetrics.read(p) for p in committed_metrics()]
    assert any(m.provenance is None for m in read) and any(m.provenance is not None for m in read)
    assert any(m.cell is None for m in read) and any(m.cell and m.cell.code_sha256 for m in read)
    assert any("answers" in m.stream.absent for m in read) and any(m.stream.answers == "model" for m in read)
    assert any(m.usage.older for m in read) and any(m.usage.backbones for m in read)
    assert all(m.complete and (m.last_fill is not None) == m.run.evaluated for m in read)  # stream-only: no fills
    for m in filter(lambda m: m.run.evaluated, read):
        overall = m.last_fill.overall
        assert all(overall.n_of(key) > 0 for key in overall.measured)


MINIMAL = {  # a test's hand-written run: no memory, usage, provenance or cell; a stream of three keys
    "complete": True,
    "run": OLD,
    "bertscore": {"model": "minilm", "num_layers": 6},
    "fills": {"100": {"overall": {"n": 4, "ci": {"P": [0.1, 0.3]}, "P": 0.2}, "per_agent": {}}},
    "stream": {"questions": 18, "seeded": 45, "accepted": {"riddle": 4, "pun": 2}},
    "wall_seconds": 1.0,
}


def test_a_partial_file_reads_what_it_holds_and_writes_back_only_that():
    metrics = RunMetrics.from_json(MINIMAL)
    assert metrics.bertscore.model == "minilm" and metrics.bertscore.rescored_from is None
    assert metrics.stream.questions == 18 and metrics.stream.k is None and metrics.stream.poison is None
    assert metrics.provenance is None and metrics.cell is None and not metrics.usage.kept
    assert metrics.last_fill.overall.mean("P") == 0.2 and metrics.last_fill.scores("pun").n_of("P") == 0
    assert json.dumps(metrics.to_json()) == json.dumps(MINIMAL)


def test_sections_written_only_where_they_apply_are_left_out_where_they_do_not():
    stream = dict(questions=2, k=3, seeded=5, answers="model", accepted={}, rejected={}, unscored=0)
    stream |= dict(unscored_by_agent={}, pool_by_agent={}, train_losses=())
    plain = StreamRecord.of(**stream, skipped_without_reference=None, poison=None).to_json()
    assert "poison" not in plain and "skipped_without_reference" not in plain and plain["train_losses"] == []
    assert MemoryRecord.of("plain", {}, None).to_json() == {"policy": "plain", "consolidation": {}}
    assert MemoryRecord.of("plain", {}, {"pun": 1}).to_json()["retired"] == {"pun": 1}


def test_metrics_without_a_run_record_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "metrics.json"
    with pytest.raises(UserError, match=f"{path}: no run record"):
        RunMetrics.from_json({"complete": True}, path)


def test_a_file_that_cannot_be_read_is_named_in_one_line(tmp_path):
    broken = tmp_path / "metrics.json"
    broken.write_text('{"complete": true, "run": ', encoding="utf-8")
    with pytest.raises(UserError, match=r"metrics\.json: Expecting value"):
        RunMetrics.read(broken)
    with pytest.raises(UserError, match=r"gone[/\\]metrics\.json: No such file"):
        RunMetrics.read(tmp_path / "gone" / "metrics.json")
