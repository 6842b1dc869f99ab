"""ms-report's claims on synthetic run folders (tests/test_report.py makes them): each claim is a
paired difference over the same test questions, and its verdict follows the CI and p. The claims of the
gates and the controls: test_report_claims_gates.py; which runs are paired: test_report_claims_pairing.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_report import AGENTS, Predict, assert_estimate, make_run, predicted, read_csv

from ms.common.stats import mean_ci
from ms.report import main, write_report


def paired_predictors(effect: float, questions: int = 20, ref_logprob: bool = True) -> tuple[Predict, Predict]:
    """k = 0 and k = 3 values on the same questions: k = 3 is k = 0 plus `effect` plus noise that
    sums to 0 within each agent (so effect = 0 is exactly no effect)."""
    rng = np.random.default_rng(0)
    base = {a: rng.uniform(0.3, 0.6, questions) for a in AGENTS}
    half = {a: rng.normal(0, 0.05, questions // 2) for a in AGENTS}
    noise = {a: np.concatenate([h, -h]) for a, h in half.items()}

    def values(p: float) -> dict:
        return {"P": p, "R": p - 0.05, "F1": p - 0.02} | ({"ref_logprob": p - 3} if ref_logprob else {})

    def k0(agent: str, q: int, fill: int) -> dict:
        return values(float(base[agent][q]))

    def k3(agent: str, q: int, fill: int) -> dict:
        return values(float(base[agent][q] + effect + noise[agent][q]))

    return k0, k3


def claim_rows(out: Path, claim: str) -> dict[tuple[str, str], dict]:
    """(comparison, metric) -> claims.csv row, for one claim."""
    return {(r["comparison"], r["metric"]): r for r in read_csv(out / "claims.csv") if r["claim"] == claim}


@pytest.fixture(scope="module")
def effect_report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("effect")
    k0, k3 = paired_predictors(0.2)
    make_run(root, "k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(root, "k=3", backbone="smollm2", k=3, questions=20, predict=k3)
    # A k = 1 run evaluated without ref_logprob: that metric is absent for it, not 0.
    make_run(root, "k=1", backbone="smollm2", k=1, questions=20, predict=paired_predictors(0.2, ref_logprob=False)[1])
    write_report([root], root / "report")
    return root / "report"


def test_a_big_effect_supports_claim_a(effect_report):
    rows = claim_rows(effect_report, "a")
    for metric in ("P", "ref_logprob"):
        row = rows[("k = 3 against k = 0", metric)]
        assert row["verdict"] == "supported" and row["n"] == "180" and row["agent_wins"] == "9/9"
        assert float(row["estimate"]) == pytest.approx(0.2) and 0 < float(row["ci_lo"]) < 0.2 < float(row["ci_hi"])
        assert float(row["p"]) < 0.05 and (row["runs_a"], row["runs_b"]) == ("k=3", "k=0")
    assert ("k = 1 against k = 0", "P") in rows and (
        "k = 1 against k = 0",
        "ref_logprob",
    ) not in rows  # not measured: no row
    fills = claim_rows(effect_report, "c")[("fill 100% against 20%", "P")]  # k = 3 values do not change with fill
    assert fills["verdict"] == "inconclusive" and float(fills["estimate"]) == 0
    text = (effect_report / "claims.md").read_text()
    assert (
        text.startswith("# Claims\n\nNumbers: the mean paired difference")
        and "sign-flip permutation p" in text.splitlines()[2]
    )
    assert "alpha = 0.05" in text.splitlines()[2] and str(effect_report.parent / "k=3") in text
    untested = text.split("## Not tested here (no runs)")[1]
    assert "(b) Domain-pool" in untested and "(d) learned dense" in untested and "(a)" not in untested
    assert "includes 'no detectable difference'" in text
    summary = (effect_report / "summary.md").read_text()
    assert "(claims.md)" in summary and "**supported**" in summary


def test_no_effect_leaves_claim_a_inconclusive(tmp_path):
    k0, k3 = paired_predictors(0.0, ref_logprob=False)
    make_run(tmp_path, "k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(tmp_path, "k=3", backbone="smollm2", k=3, questions=20, predict=k3)
    write_report([tmp_path], tmp_path / "report")
    rows = claim_rows(tmp_path / "report", "a")
    assert list(rows) == [("k = 3 against k = 0", "P")]  # no ref_logprob in these runs: no row for it
    row = rows[("k = 3 against k = 0", "P")]
    assert row["verdict"] == "inconclusive" and float(row["ci_lo"]) < 0 < float(row["ci_hi"])


def test_a_broken_pairing_changes_the_claims_interval(effect_report, tmp_path):
    """Claims pair the two runs by test question id. The same k = 3 values written under shuffled
    ids keep the mean difference but lose the pairing, so the interval must change (and widen:
    the questions' own spread no longer cancels)."""
    k0, k3 = paired_predictors(0.2)
    order = np.random.default_rng(1).permutation(20)
    make_run(tmp_path, "k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(tmp_path, "k=3", backbone="smollm2", k=3, questions=20, predict=lambda a, q, f: k3(a, int(order[q]), f))
    write_report([tmp_path], tmp_path / "report")
    paired_row = claim_rows(effect_report, "a")[("k = 3 against k = 0", "P")]
    broken = claim_rows(tmp_path / "report", "a")[("k = 3 against k = 0", "P")]
    assert float(broken["estimate"]) == pytest.approx(float(paired_row["estimate"]))
    width = {name: float(r["ci_hi"]) - float(r["ci_lo"]) for name, r in (("paired", paired_row), ("broken", broken))}
    assert width["broken"] > 2 * width["paired"], width


def test_ref_logprob_tables_show_only_ours(effect_report, tmp_path):
    sweep = effect_report.parent
    assert main([str(sweep), "--out", str(tmp_path), "--metric", "ref_logprob"]) == 0
    rows = {r["agent"]: r for r in read_csv(tmp_path / "table1.csv")}
    assert not any("paper" in c for c in rows["limerick"])
    assert_estimate(
        rows["limerick"], "3-shot smollm2 ours", mean_ci(predicted(sweep / "k=3", "ref_logprob", agent="limerick"))
    )
    assert rows["limerick"]["1-shot smollm2 ours"] == ""  # the k = 1 run has no ref_logprob: blank, not 0
    assert "The paper published no such number" in (tmp_path / "table1.md").read_text()
