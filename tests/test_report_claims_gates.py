"""ms-report's claims about gates and controls on synthetic run folders (tests/test_report.py makes
them): another gate against the rubric gate (claim e), each gate's growth since its first fill (claim c),
a reference-written stream against the model-written one (claim f) and a gate against the random gate
matched to it (claim g)."""

from __future__ import annotations

import pytest
from test_report import PNG_MAGIC, make_run, metrics_of, read_csv
from test_report_claims_verdicts import claim_rows, paired_predictors

from ms.report import write_report


def test_gates_are_compared_paired_and_each_gate_gets_its_growth_claim(tmp_path):
    """Claim (e): a run under another gate against the rubric-gated run of the same setting; claim (c)
    within each gate; the tables keep the rubric-gated run even where another finished later."""
    k0, k3 = paired_predictors(0.2)
    make_run(tmp_path, "gate=rubric", backbone="smollm2", questions=20, predict=k0)
    make_run(
        tmp_path,
        "gate=utility",
        backbone="smollm2",
        questions=20,
        gate="utility",
        predict=lambda a, q, fill: k3(a, q, fill) if fill == 100 else k0(a, q, fill),
    )
    write_report([tmp_path], tmp_path / "report")
    row = claim_rows(tmp_path / "report", "e")[("utility gate against rubric gate", "P")]
    assert row["verdict"] == "supported" and float(row["estimate"]) == pytest.approx(0.2)
    assert (row["runs_a"], row["runs_b"]) == ("gate=utility", "gate=rubric") and row["n"] == "180"
    growth = [r for r in read_csv(tmp_path / "report" / "claims.csv") if r["claim"] == "c" and r["metric"] == "P"]
    by_run = {r["runs_a"]: r for r in growth}
    assert set(by_run) == {"gate=rubric", "gate=utility"} and "utility gate" in by_run["gate=utility"]["setting"]
    assert by_run["gate=rubric"]["verdict"] == "inconclusive" and by_run["gate=utility"]["verdict"] == "supported"
    table = {r["agent"]: r for r in read_csv(tmp_path / "report" / "table1.csv")}
    rubric_means = metrics_of(tmp_path, "gate=rubric")["fills"]["100"]["per_agent"]
    assert float(table["pun"]["3-shot smollm2 ours"]) == pytest.approx(rubric_means["pun"]["P"])
    assert (tmp_path / "report" / "figure4_gates_smollm2.png").read_bytes().startswith(PNG_MAGIC)


def test_each_gates_change_since_its_first_fill_is_paired_per_question(tmp_path):
    from ms.report.common.conditions import conditions, select
    from ms.report.common.gates import by_gate, change_since_first_fill
    from ms.report.common.runs import find_runs

    k0, k3 = paired_predictors(0.2)
    make_run(tmp_path, "gate=rubric", backbone="smollm2", questions=20, predict=k0)
    make_run(
        tmp_path,
        "gate=both",
        backbone="smollm2",
        questions=20,
        gate="both",
        predict=lambda a, q, fill: k3(a, q, fill) if fill == 100 else k0(a, q, fill),
    )
    make_run(tmp_path, "k=1", backbone="smollm2", k=1, questions=20, gate="both", predict=k0)  # not Figure 4's
    runs, _ = find_runs([tmp_path])
    chosen, _ = select(runs)
    gates = by_gate(conditions(runs)[0], chosen)["smollm2"]
    assert list(gates) == ["both", "rubric"] and gates["both"].cell == ("smollm2", 3, "domain")
    change = change_since_first_fill(gates["both"], "P")
    assert change[20].mean == 0 and change[60].mean == pytest.approx(0, abs=1e-12)
    assert change[100].mean == pytest.approx(0.2) and change[100].lo < 0.2 < change[100].hi and change[100].n == 180
    assert change_since_first_fill(gates["rubric"], "P")[100].mean == pytest.approx(0, abs=1e-12)


def test_the_controls_pair_with_what_they_control_for(tmp_path):
    """Claim (f): a reference-written stream against the model-written run under the same gate; claim (g):
    a gate against the random gate matched to it. Neither is claim (e), which is the utility gates'."""
    k0, k3 = paired_predictors(0.2)
    grown = lambda a, q, fill: k3(a, q, fill) if fill == 100 else k0(a, q, fill)  # noqa: E731
    make_run(tmp_path, "gate=rubric", backbone="smollm2", questions=20, predict=grown)
    make_run(
        tmp_path,
        "gate=random",
        backbone="smollm2",
        questions=20,
        gate="random",
        predict=k0,
        fields={"match": "runs/gate=rubric", "matched_gate": "rubric"},
    )
    make_run(tmp_path, "gate=all", backbone="smollm2", questions=20, gate="all", predict=k0)
    make_run(
        tmp_path,
        "gate=all,reference",
        backbone="smollm2",
        questions=20,
        gate="all",
        predict=grown,
        fields={"stream_answers": "reference"},
    )
    write_report([tmp_path], tmp_path / "report")
    rows = read_csv(tmp_path / "report" / "claims.csv")
    assert not [r for r in rows if r["claim"] == "e"]
    [g] = [r for r in rows if r["claim"] == "g" and r["metric"] == "P"]
    assert (g["comparison"], g["runs_a"], g["runs_b"]) == (
        "rubric gate against a random gate matched to it",
        "gate=rubric",
        "gate=random",
    )
    assert g["verdict"] == "supported" and float(g["estimate"]) == pytest.approx(0.2)
    [f] = [r for r in rows if r["claim"] == "f" and r["metric"] == "P"]
    assert (f["runs_a"], f["runs_b"]) == ("gate=all,reference", "gate=all") and f["verdict"] == "supported"
    growth = {r["runs_a"] for r in rows if r["claim"] == "c" and r["metric"] == "P"}
    assert growth == {"gate=rubric", "gate=random", "gate=all", "gate=all,reference"}
