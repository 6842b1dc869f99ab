"""How the report says what a run was: every registered option through one table of labels keyed by
registry (ms.report.common.labels), a condition in words (Run.words), the short keys conditions are grouped and
paired by; and under each table of runs (claims, runs, summary) how many were recorded dirty or carry no
run record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report import make_run, read_csv

from ms.config.parts import GATES, RETRIEVERS
from ms.data.poison_record import PoisonRecord
from ms.gates.record import GateRecord
from ms.pool.access.record import AccessRecord
from ms.report import find_runs, write_report
from ms.report.common.labels import (
    LABELS,
    Retrieval,
    gate_key,
    label,
    on_server,
    option,
    rank,
    retriever_key,
    said,
    unrecorded,
    words,
)

# ---- the table -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(LABELS), ids=lambda kind: kind.kind)
def test_every_registered_option_has_one_label_and_no_label_names_another(kind):
    names = [entry.name for entry in LABELS[kind].labels]
    assert sorted(names) == sorted(kind.names()) and len(set(names)) == len(names)
    assert unrecorded(kind) is None or unrecorded(kind) in names  # what a run recording none ran with
    assert unrecorded(kind) is None or words(kind, None)


def test_every_poisoner_says_its_own_words_and_the_report_says_them_after_its_victim():
    """Its class holds its words (Poisoner.in_words), so adding a poisoner touches no report module."""
    from ms.config.parts import POISONS

    own = {name: vars(writer).get("in_words") for name, writer in POISONS.loaded().items()}
    assert all(own.values()) and len(set(own.values())) == len(own), own  # none inherited, no two alike
    for name, writer in POISONS.loaded().items():
        expected = f"poisoner of pun: {writer.in_words}" if writer.active else None  # none leaves it unsaid
        assert said(POISONS, PoisonRecord(name, victim="pun")) == expected


def test_the_table_says_which_retrievers_memory_train_can_learn_as_their_classes_do():
    assert {entry.name: entry.trainable for entry in LABELS[RETRIEVERS].labels} == {
        name: RETRIEVERS.load(name).trainable for name in RETRIEVERS
    }


def test_an_option_words_read_its_settings_from_the_run_fields():
    assert words(GATES, None) == "rubric gate" and option(GATES, None) == "rubric"  # runs record no rubric gate
    assert words(GATES, GateRecord.from_json({})) == "rubric gate"
    assert words(GATES, GateRecord("random", matched_gate="both")) == "random gate matched to the both gate"
    assert words(GATES, GateRecord("random", rate=0.25)) == "random gate admitting 0.25 of the pairs"
    assert words(RETRIEVERS, Retrieval("dense", learned=True)) == "learned dense retriever"
    assert words(RETRIEVERS, Retrieval("bm25", learned=False)) == "BM25 retriever"
    rule = AccessRecord("rule", "experiments/rules/withhold_poison.yaml")
    from ms.config.parts import ACCESS_RULES, POISONS

    assert said(ACCESS_RULES, rule) == "access rule withhold_poison" and said(ACCESS_RULES, None) is None
    assert said(POISONS, None) is None and unrecorded(POISONS) == "none"
    assert said(POISONS, PoisonRecord("off_task", victim="riddle")) == "poisoner of riddle: off-task answers"
    assert rank(RETRIEVERS, "random") < rank(RETRIEVERS, "dense") < rank(RETRIEVERS, "a plugin's")


def test_the_short_keys_conditions_are_grouped_by():
    assert gate_key(GateRecord.from_json({})) == "rubric" and gate_key(GateRecord("utility")) == "utility"
    assert gate_key(GateRecord("random", match="runs/x", matched_gate="both")) == "random~both"
    assert gate_key(GateRecord("random", rate=0.5)) == "random@0.5"
    assert gate_key(GateRecord("all"), "reference") == "all+reference" and gate_key(GateRecord("all"), "model") == "all"
    assert retriever_key(Retrieval("dense", learned=False)) == "dense-frozen"
    assert retriever_key(Retrieval("composite", learned=True)) == "composite-learned"
    assert retriever_key(Retrieval("bm25", learned=False)) == "bm25"
    from ms.config.parts import POOL_BACKENDS
    from ms.report.common.saved_config import SavedConfig

    assert on_server(option(POOL_BACKENDS, SavedConfig.parse({"pool": {"backend": "postgres"}})))
    assert not on_server(option(POOL_BACKENDS, SavedConfig.parse({}))) and not on_server("a plugin's")


def test_an_option_the_table_lacks_is_named_by_its_kind():
    GATES.register("toy", "ms.gates.all:AllGate")
    try:
        assert label(GATES, "toy") is None
        assert words(GATES, GateRecord("toy")) == "toy gate" and gate_key(GateRecord("toy")) == "toy"
    finally:
        GATES.unregister("toy")


# ---- a condition in words, and what the records vouch for ----------------------------------------------

RECORD = {"commit": "a" * 40, "dirty": False, "versions": {}, "backbones": {}, "encoders": {}}


def recorded(run: Path, record) -> Path:
    metrics = json.loads((run / "metrics.json").read_text())
    if record is not None:
        metrics["provenance"] = record
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """k = 0 (clean record), k = 3 (recorded dirty) and a BM25 k = 3 run (no record): claim (a) pairs the
    first two, claim (d) the last two; the tables read the first two, runs.md lists the third among the others."""
    root = tmp_path_factory.mktemp("records")
    recorded(make_run(root, "k=0", backbone="smollm2", k=0, questions=3), RECORD)
    recorded(make_run(root, "k=3", backbone="smollm2", k=3, questions=3, base=0.5), {**RECORD, "dirty": True})
    make_run(root, "bm25", backbone="smollm2", k=3, retriever="bm25", learned=False, questions=3)
    write_report([root], root / "report")
    return root / "report"


def test_a_condition_is_said_in_words(report):
    runs = {run.name: run for run in find_runs([report.parent])[0]}
    assert runs["k=3"].words() == "smollm2 · k = 3 · Domain pool · learned dense retriever · plain memory · rubric gate"
    assert runs["bm25"].words(omit=("backbone", "k", "gate")) == "Domain pool · BM25 retriever · plain memory"
    [row] = [r for r in read_csv(report / "claims.csv") if r["claim"] == "a" and r["metric"] == "P"]
    assert row["comparison"] == "k = 3 against k = 0"
    assert row["setting"] == "smollm2 · Domain pool · learned dense retriever · plain memory · rubric gate"


def test_each_table_of_runs_says_how_many_were_recorded_dirty_or_without_a_record(report):
    claims = (report / "claims.md").read_text()
    assert "runs: 3, of which 1 recorded dirty, 1 without a run record" in claims
    runs_md = (report / "runs.md").read_text()
    in_tables, others = runs_md.split("## Other runs")
    assert "runs: 2, of which 1 recorded dirty, 0 without a run record" in in_tables
    assert "runs: 1, of which 0 recorded dirty, 1 without a run record" in others.split("## Skipped")[0]
    summary = (report / "summary.md").read_text()
    runs_part, claims_part = summary.split("## Claims")[0], summary.split("## Claims")[1].split("\n## ")[0]
    assert "runs: 3, of which 1 recorded dirty, 1 without a run record" in runs_part
    assert "runs: 3, of which 1 recorded dirty, 1 without a run record" in claims_part
