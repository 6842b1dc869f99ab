"""Which runs ms-report's claims pair, on synthetic run folders (tests/test_report.py makes them): runs
are paired only where their cells differ in what the claim compares (k, pool, retriever, gate) and nothing
that could change a value (an access rule, a grader, a threshold, the data or the agents)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import pytest
from test_report import AGENTS, make_run, merged, read_csv
from test_report_claims_verdicts import claim_rows, paired_predictors

from ms.report import write_report


def test_runs_graded_by_another_backbone_are_their_own_condition_and_claims_pair_within_one_grader(tmp_path):
    """experiment=sharing_families_offline: the same cells graded by each family in turn. Under its own
    grader k = 3 gains 0.2; graded by gemma3, nothing. Neither pair of runs replaces or borrows from the other."""
    k0, k3 = paired_predictors(0.2)
    flat0, flat3 = paired_predictors(0.0)
    make_run(tmp_path, "grader=smollm2,k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(tmp_path, "grader=smollm2,k=3", backbone="smollm2", questions=20, predict=k3)
    make_run(tmp_path, "grader=gemma3,k=0", backbone="smollm2", k=0, questions=20, predict=flat0, grader="gemma3")
    make_run(tmp_path, "grader=gemma3,k=3", backbone="smollm2", questions=20, predict=flat3, grader="gemma3")
    write_report([tmp_path], tmp_path / "report")
    rows = [
        r
        for r in read_csv(tmp_path / "report" / "claims.csv")
        if r["claim"] == "a" and r["comparison"] == "k = 3 against k = 0" and r["metric"] == "P"
    ]
    by_run = {(r["runs_a"], r["runs_b"]): r for r in rows}
    assert set(by_run) == {("grader=smollm2,k=3", "grader=smollm2,k=0"), ("grader=gemma3,k=3", "grader=gemma3,k=0")}
    own, other = by_run["grader=smollm2,k=3", "grader=smollm2,k=0"], by_run["grader=gemma3,k=3", "grader=gemma3,k=0"]
    assert own["verdict"] == "supported" and float(own["estimate"]) == pytest.approx(0.2)
    assert other["verdict"] == "inconclusive" and float(other["estimate"]) == pytest.approx(0.0, abs=1e-12)
    assert "graded by gemma3" in other["setting"] and "graded by" not in own["setting"]
    assert "replaces it" not in (tmp_path / "report" / "runs.md").read_text()


def test_runs_of_other_data_or_other_agents_are_never_paired(tmp_path):
    """A k = 3 run on other examples (its recorded fingerprint differs) or of other agents is no
    opponent for a k = 0 run; the same examples pair as before."""
    import json

    k0, k3 = paired_predictors(0.2)

    def fingerprinted(run: Path, data: str) -> None:
        metrics = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**metrics, "cell": {"data_sha256": data, "config": {}}}))

    for name, data in (("same", "aaa"), ("other", "bbb")):
        sweep = tmp_path / name
        fingerprinted(make_run(sweep, "k=0", backbone="smollm2", k=0, questions=20, predict=k0), "aaa")
        fingerprinted(make_run(sweep, "k=3", backbone="smollm2", k=3, questions=20, predict=k3), data)
        write_report([sweep], sweep / "report")
    assert claim_rows(tmp_path / "same" / "report", "a")[("k = 3 against k = 0", "P")]["verdict"] == "supported"
    assert not claim_rows(tmp_path / "other" / "report", "a")

    agents = tmp_path / "agents"
    make_run(agents, "k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(agents, "k=3", backbone="smollm2", k=3, questions=20, predict=k3, agents=["riddle", "pun"])
    write_report([agents], agents / "report")
    assert not claim_rows(agents / "report", "a")


# ---- pairing by cell record ----------------------------------------------------------------------

# What every run below ran with: the settings a run's cell record holds, in part (nested, as Hydra saves them).
# Its 18 stream questions (make_run's) go in micro-batches of 7 that stop at each fill: 0-4, 4-11, 11-18.
SETTINGS = {
    "backbone": {"batch_size": 16},
    "seed": 0,
    "fills": [20, 60, 100],
    "micro_batch": 7,
    "gate": {"name": "rubric", "match": None},
    "access": {"name": "open", "file": None},
    "scorer": {"threshold": 15.0},
    "data": {"dir": "data"},
}
RULE = {"rule": "rule", "file": "rules/half1.yaml", "grants": {a: ["seed"] for a in AGENTS}}


def cell_run(
    sweep: Path,
    folder: str,
    *,
    k: int = 3,
    pool: str = "domain",
    effect: float = 0.0,
    settings: Optional[dict] = None,
    fields: Optional[dict] = None,
    recorded: bool = True,
    finished: float = 0.0,
) -> Path:
    """A run whose cell says what it ran with: in metrics.json's cell record (`recorded`), or only in the
    .hydra/config.yaml saved beside it (a run that predates the record). `effect` is added to every
    question's value over k = 0's; `finished` moves its metrics.json time (the report's tie-breaker)."""
    k0, shifted = paired_predictors(effect)
    run = make_run(
        sweep,
        folder,
        backbone="smollm2",
        k=k,
        pool=pool,
        questions=20,
        predict=k0 if k == 0 else shifted,
        config=merged(SETTINGS, settings or {}),
        record="the same examples" if recorded else None,
        fields=fields,
    )
    if k == 0:  # zero-shot answers read no pool: the run grows none
        metrics = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**metrics, "stream": {**metrics["stream"], "questions": 0}}))
    stamp = (run / "metrics.json").stat().st_mtime + finished
    os.utime(run / "metrics.json", (stamp, stamp))
    return run


def pairs(report: Path, metric: str = "P") -> dict[tuple[str, str, str], dict]:
    """(claim, runs_a, runs_b) -> its claims.csv row, at one metric."""
    return {(r["claim"], r["runs_a"], r["runs_b"]): r for r in read_csv(report / "claims.csv") if r["metric"] == metric}


@pytest.mark.parametrize("recorded", [True, False], ids=["cell record", "saved config"])
def test_a_run_under_an_access_rule_is_never_an_open_runs_opponent(tmp_path, recorded):
    """results/access_learned_offline: a Single-pool run under a learned access rule, finished after the
    open Single-pool run and otherwise of the same cell, was paired with the open Domain-pool run as
    "Domain vs Single" (and with the open k = 0 run), under a label that does not name the rule. Its cell
    differs from theirs in access.name and access.file, which no claim varies: it pairs only with a run
    under the same rule, and the comparison says which rule."""
    rule = {"access": {"name": "rule", "file": RULE["file"]}}
    cell_run(tmp_path, "domain", pool="domain", effect=0.2, recorded=recorded)
    cell_run(tmp_path, "single", pool="single", effect=0.18, recorded=recorded)
    cell_run(
        tmp_path,
        "single,rule",
        pool="single",
        effect=0.23,
        settings=rule,
        fields={"access": RULE},
        recorded=recorded,
        finished=100,
    )  # the newest of the Single-pool runs
    cell_run(tmp_path, "k=0,single", k=0, pool="single", recorded=recorded)
    cell_run(tmp_path, "k=0,single,rule", k=0, pool="single", settings=rule, fields={"access": RULE}, recorded=recorded)
    write_report([tmp_path], tmp_path / "report")
    found = pairs(tmp_path / "report")
    [domain_vs_single] = [row for (claim, *_), row in found.items() if claim == "b"]
    assert (domain_vs_single["runs_a"], domain_vs_single["runs_b"]) == ("domain", "single")
    assert float(domain_vs_single["estimate"]) == pytest.approx(0.02) and domain_vs_single["verdict"] == "supported"
    assert "rule" not in domain_vs_single["setting"]
    k_rows = {(a, b): row["setting"] for (claim, a, b), row in found.items() if claim == "a"}
    assert k_rows == {
        ("single", "k=0,single"): "smollm2 · Single pool · learned dense retriever · plain memory · rubric gate",
        (
            "single,rule",
            "k=0,single,rule",
        ): "smollm2 · Single pool · learned dense retriever · plain memory · rubric gate · access rule half1",
    }
    claims_md = (tmp_path / "report" / "claims.md").read_text()
    assert "Which runs are paired: two conditions only where their cells" in claims_md


def test_runs_pair_across_keys_that_cannot_change_a_value_and_say_so_but_not_across_others(tmp_path):
    """Cells that differ in the claim's key and in fills pair where the fills changed no micro-batch
    (or one run grew no pool), and the setting names fills; fills that cut the stream otherwise, or a
    key no claim varies and the list does not pass over (a grading threshold), pair with nothing."""
    k = tmp_path / "k"
    cell_run(k, "k=0", k=0)
    cell_run(k, "k=3", effect=0.2, settings={"fills": [100]})  # batches 0-7, 7-14, 14-18; k = 0 took none
    cell_run(k, "k=3,threshold=23", effect=0.2, settings={"scorer": {"threshold": 23.0}}, finished=100)
    write_report([k], k / "report")
    found = pairs(k / "report")
    [(claim, a, b)] = [key for key in found if key[0] == "a"]
    assert (a, b) == ("k=3", "k=0") and float(found[claim, a, b]["estimate"]) == pytest.approx(0.2)
    assert found[claim, a, b]["setting"] == (
        "smollm2 · Domain pool · learned dense retriever · plain memory · rubric gate; the runs also differ "
        "in fills, which cannot change a paired value"
    )

    pool = tmp_path / "pool"
    cell_run(pool, "domain", effect=0.2)
    cell_run(pool, "single,fills=20,100", pool="single", effect=0.18, settings={"fills": [20, 100]})  # 0-4, 4-11, 11-18
    cell_run(pool, "single,fills=100", pool="single", effect=0.1, settings={"fills": [100]}, finished=100)  # 0-7, ...
    write_report([pool], pool / "report")
    [(claim, a, b)] = [key for key in pairs(pool / "report") if key[0] == "b"]
    assert (a, b) == ("domain", "single,fills=20,100")


def test_replicates_are_runs_whose_cells_differ_in_the_seed_alone(tmp_path):
    """Two seeds of one cell pool; a run of the same run fields whose cell differs in a setting besides
    its seed (here the split of the data into seed, stream and test) is its own condition."""
    from ms.report.common.conditions import conditions
    from ms.report.common.runs import find_runs

    cell_run(tmp_path, "seed=0", effect=0.2)
    cell_run(tmp_path, "seed=1", effect=0.2, settings={"seed": 1}, fields={"seed": 1})
    cell_run(
        tmp_path, "seed=2,split=1", effect=0.2, settings={"seed": 2, "data": {"split_seed": 1}}, fields={"seed": 2}
    )
    conds, replaced = conditions(find_runs([tmp_path])[0])
    assert sorted(c.name for c in conds) == ["seed=0 + seed=1", "seed=2,split=1"] and not replaced


def test_a_variant_whose_stream_is_cut_otherwise_still_gets_its_own_growth_claim(tmp_path):
    """Claim (c) compares a run's last fill with its first, so a variant of the Figure 4 run under another
    gate gets its row even where its fills cut the stream into other micro-batches (a reference-written
    stream that skipped questions without a reference ends its batches elsewhere): it pairs with no other
    run, but its growth is its own."""
    sweep = tmp_path / "runs"
    cell_run(sweep, "gate=rubric", effect=0.2)
    cell_run(
        sweep,
        "gate=all,fills=50,100",
        effect=0.2,
        settings={"fills": [50, 100], "gate": {"name": "all"}, "stream": {"answers": "reference"}},
        fields={"gate": "all", "stream_answers": "reference"},
    )
    write_report([sweep], tmp_path / "report")
    growth = {a for claim, a, _ in pairs(tmp_path / "report") if claim == "c"}
    assert growth == {"gate=rubric", "gate=all,fills=50,100"}
