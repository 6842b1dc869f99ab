"""The learned access rule (issue 37, item 2): grants come from one half of the test questions alone (a
change to the other half moves none), seeds stay granted, and `ms-data learn-access` writes a rule
file the `access` group loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ms.cli.data import main as ms_data
from ms.pool.access import SEED, Reader
from ms.pool.access.table import RuleFileAccess, read_rule_file, rule_file_problems
from ms.report.common.writers import Writer
from ms.report.sharing.access_rule import learn_grants, question_halves

AGENTS = {"ann": "literary", "bob": "literary", "cal": "logic"}
QUESTIONS = [("ann", f"ann-{i:02d}") for i in range(24)] + [("cal", f"cal-{i:02d}") for i in range(8)]
# memory id -> writer: bob's and cal's stream memories, and a seed of each agent.
WRITERS = {
    1: Writer("bob", "literary", "stream", "smollm2"),
    2: Writer("cal", "logic", "stream", "smollm2"),
    3: Writer("bob", "literary", "seed", "seed"),
    4: Writer("cal", "logic", "seed", "seed"),
    5: Writer("ann", "literary", "seed", "seed"),
}
BASE = {item: -2.0 - 0.01 * i for i, item in enumerate(QUESTIONS)}


def predictions() -> tuple[dict, dict]:
    """(rows, baseline): ann's even questions hold bob's memory and gain 0.3 to 0.4; its odd ones hold cal's
    and gain +0.3 or -0.3 in turn; every prompt also holds a seed; cal reads ann's seed and bob's memory."""
    rows = {}
    for i, (agent, test_id) in enumerate(QUESTIONS):
        if agent == "ann":
            even = int(test_id[-2:]) % 2 == 0
            retrieved, gain = ([1, 3, 5], 0.3 + 0.004 * i) if even else ([2, 4, 5], 0.3 * (-1) ** (i // 2))
        else:
            retrieved, gain = [1, 5, 4], -0.1
        rows[agent, test_id] = {
            "agent": agent,
            "test_id": test_id,
            "retrieved": retrieved,
            "ref_logprob": BASE[agent, test_id] + gain,
        }
    return rows, dict(BASE)


def test_halves_split_each_agents_questions_evenly_and_by_nothing_measured():
    halves = question_halves(QUESTIONS)
    assert halves == question_halves(list(reversed(QUESTIONS)))  # the order they come in does not matter
    for agent, n in (("ann", 24), ("cal", 8)):
        assert sum(h == 0 for (a, _), h in halves.items() if a == agent) == n // 2


def test_a_writer_is_granted_where_its_gain_ci_lies_above_zero_and_seeds_always():
    rows, base = predictions()
    halves = question_halves(rows)
    for half in (0, 1):
        measured = [q for q in rows if halves[q] == half and q[0] == "ann"]
        assert sum(rows[q]["retrieved"][0] == 1 for q in measured) >= 3  # enough of bob's for a CI
        rule = learn_grants(rows, WRITERS, base, "ref_logprob", half, AGENTS)
        assert rule.grants == {"ann": frozenset({SEED, "bob"}), "bob": frozenset({SEED}), "cal": frozenset({SEED})}
        assert rule.evidence["ann"]["bob"].lo > 0 and rule.evidence["ann"]["cal"].lo <= 0
        assert rule.evidence["cal"]["bob"].mean < 0 and set(rule.evidence["cal"]) == {"bob"}  # seeds are no evidence
        assert rule.questions == len([q for q in rows if halves[q] == half])


def test_changing_the_scored_half_moves_no_grant():
    rows, base = predictions()
    learned = learn_grants(rows, WRITERS, base, "ref_logprob", 0, AGENTS)
    halves = question_halves(rows)
    changed_rows, changed_base = predictions()
    for item, h in halves.items():
        if h == 1:  # the half the rule will be scored on: every value and retrieval differs
            changed_rows[item]["ref_logprob"] = 5.0
            changed_rows[item]["retrieved"] = [2, 2, 2]
            changed_base[item] = -9.0
    again = learn_grants(changed_rows, WRITERS, changed_base, "ref_logprob", 0, AGENTS)
    assert again.grants == learned.grants and again.evidence == learned.evidence
    # The same change to the measured half does move them: the test above could have failed.
    for item, h in halves.items():
        if h == 0:
            changed_rows[item]["ref_logprob"] = -9.0
    assert learn_grants(changed_rows, WRITERS, changed_base, "ref_logprob", 0, AGENTS).grants["ann"] == {SEED}


def make_run(folder: Path, k: int, rows: dict, access: dict | None = None, pool: str = "single") -> Path:
    """A finished run folder as ms-report reads it, with its writers in memories.csv."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"backbone": {"name": "smollm2"}, "k": k, "pool": {"mode": pool}, "data": {"dir": "data"}})
    )
    (folder / "predictions.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    **row,
                    "k": k,
                    "fill": 100,
                    "question": f"question {row['test_id']}",
                    "reference": "ref",
                    "retrieved": row["retrieved"] if k else [],
                }
            )
            + "\n"
            for row in rows.values()
        )
    )
    per_agent = {a: {"ref_logprob": 0.0, "n": 1} for a in ("ann", "cal")}
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "complete": True,
                "fills": {"100": {"overall": {"ref_logprob": 0.0, "n": len(rows)}, "per_agent": per_agent}},
                "run": {
                    "backbone": "smollm2",
                    "k": k,
                    "pool": pool,
                    "retriever": "dense",
                    "learned": True,
                    "agents": ["ann", "cal"],
                    "fills": [100],
                    "seed": 0,
                    **({"access": access} if access else {}),
                },
            }
        )
    )
    (folder / "memories.csv").write_text(
        "id,agent,domain,origin,backbone\n"
        + "".join(f"{i},{w.agent},{w.domain},{w.origin},{w.backbone}\n" for i, w in WRITERS.items())
    )
    return folder


def test_learn_access_writes_a_rule_file_the_access_group_loads(tmp_path, capsys):
    rows, base = predictions()
    run = make_run(tmp_path / "sweep" / "k=3", 3, rows)
    make_run(tmp_path / "sweep" / "k=0", 0, {q: {**row, "ref_logprob": base[q]} for q, row in rows.items()})
    out = tmp_path / "rules" / "half1.yaml"
    assert ms_data(["learn-access", str(run), "--half", "1", "--out", str(out)]) == 0
    assert "ann: seed, bob" in capsys.readouterr().out
    rule = RuleFileAccess.build(type("Cfg", (), {"file": str(out)}), list(AGENTS))
    assert rule.reader("ann") == Reader("ann", frozenset({SEED, "bob"}))
    assert rule.reader("cal") == Reader("cal", frozenset({SEED}))
    learned = read_rule_file(out).learned
    assert (learned["half"], learned["scored_on"], learned["metric"]) == (1, 0, "ref_logprob")
    assert (
        learned["evidence"]["ann"]["bob"]["granted"] is True and learned["evidence"]["ann"]["cal"]["granted"] is False
    )
    assert out.read_text().startswith("# Learned by: ms-data learn-access")
    # Every reader the run had is listed: the rule covers the run it will be scored in.
    assert list(rule_file_problems(read_rule_file(out), list(AGENTS), ["ann", "cal"])) == []


def test_learn_access_refuses_a_run_without_a_k0_run_to_pair_with(tmp_path, capsys):
    rows, _ = predictions()
    run = make_run(tmp_path / "alone" / "k=3", 3, rows)
    assert ms_data(["learn-access", str(run), "--half", "0", "--out", str(tmp_path / "r.yaml")]) == 2
    assert "no k = 0 run of the same backbone" in capsys.readouterr().err


def test_the_sharing_matrix_shows_the_rules_grants_beside_the_retrievals(tmp_path):
    from ms.report.common.runs import find_runs
    from ms.report.sharing.matrices import FOLDER, write_sharing

    rows, base = predictions()
    access = {
        "rule": "rule",
        "file": "rules/half0.yaml",
        "grants": {"ann": ["bob", "seed"], "cal": ["seed"]},
        "learned": {"half": 0, "scored_on": 1, "run": "x", "metric": "ref_logprob"},
    }
    make_run(tmp_path / "sweep" / "k=3", 3, rows, access)
    make_run(tmp_path / "sweep" / "k=0", 0, {q: {**row, "ref_logprob": base[q]} for q, row in rows.items()})
    runs, _ = find_runs([tmp_path / "sweep"])
    assert write_sharing(runs, tmp_path / "out", "ref_logprob")
    table = (tmp_path / "out" / FOLDER / "k=3.csv").read_text().splitlines()
    header = table[0].split(",")
    granted = {line.split(",")[1]: dict(zip(header, line.split(","))) for line in table if line.startswith("granted,")}
    assert (granted["ann"]["agent=bob"], granted["ann"]["agent=cal"], granted["cal"]["agent=bob"]) == ("1", "0", "0")
    text = (tmp_path / "out" / FOLDER / "sharing.md").read_text()
    assert "Access rule: access=rule from `rules/half0.yaml`, learned on half 0" in text
    assert "| granted writers |" in text and "| seed, bob |" in text


def test_access_md_scores_each_learned_rule_on_its_held_out_half_and_cross_fits_both(tmp_path):
    from ms.report.common.runs import find_runs
    from ms.report.sharing.access_compare import DOMAIN, LEARNED, OPEN, comparisons, write_access

    rows, _ = predictions()
    shifted = {q: {**row, "ref_logprob": row["ref_logprob"] + 0.1} for q, row in rows.items()}
    root = tmp_path / "sweep"
    make_run(root / "open_single", 3, rows)
    make_run(
        root / "open_domain",
        3,
        {q: {**row, "ref_logprob": row["ref_logprob"] - 0.2} for q, row in rows.items()},
        pool="domain",
    )
    for half in (0, 1):
        make_run(
            root / f"learned{half}",
            3,
            shifted,
            {
                "rule": "rule",
                "file": f"half{half}.yaml",
                "grants": {},
                "learned": {"half": half, "scored_on": 1 - half},
            },
        )
    runs, _ = find_runs([root])
    found = comparisons(runs, "ref_logprob")
    halves = question_halves(rows)
    assert [len(c.values[LEARNED]) for c in found] == [16, 16, 32]
    for c, scored in zip(found, (1, 0)):  # learned0 is scored on half 1, learned1 on half 0
        assert all(halves[q] == scored for q in c.values[LEARNED]) and c.values[OPEN].keys() == c.values[LEARNED].keys()
    crossed = found[-1]
    assert crossed.difference(LEARNED, OPEN).mean == pytest.approx(0.1)
    assert crossed.difference(LEARNED, DOMAIN).mean == pytest.approx(0.3) and crossed.difference(LEARNED, OPEN).n == 32
    assert "minus open, Single-pool" in write_access(runs, tmp_path, "ref_logprob")
    assert "cross-fitted" in (tmp_path / "access.md").read_text()
