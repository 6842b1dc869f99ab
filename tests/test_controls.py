"""Admission controls (ms.gates.all, ms.gates.random): gate=all, gate=random at a rate, gate=random matched to a finished
run's admissions per agent and micro-batch; and a stream written with the references."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, compose_config
from scipy.stats import binomtest

from ms.common.errors import UserError
from ms.gates.all import AllGate
from ms.gates.random import MatchedRandomGate, RandomGate, matched_counts
from ms.gates.replay import Candidate


def candidates(agent_counts: dict[str, int]) -> list[Candidate]:
    return [
        Candidate(agent, "scope", f"{agent} q{i}", f"{agent} a{i}")
        for agent, n in agent_counts.items()
        for i in range(n)
    ]


def test_all_admits_every_candidate_and_reads_no_score():
    decisions = AllGate().judge(candidates({"riddle": 3, "pun": 2}))
    assert [d.accepted for d in decisions] == [True] * 5
    assert all(d.score is None and not d.unscored and d.read == "all" for d in decisions)


def test_random_admits_a_share_consistent_with_its_rate_and_the_seed_fixes_which():
    pool = candidates({"riddle": 2000})
    decisions = RandomGate(0.3, seed=7).judge(pool)
    admitted = sum(d.accepted for d in decisions)
    assert binomtest(admitted, len(pool), 0.3).pvalue > 0.001, admitted
    assert not any(d.unscored for d in decisions)
    again = RandomGate(0.3, seed=7).judge(pool)
    assert [d.accepted for d in again] == [d.accepted for d in decisions]
    other = RandomGate(0.3, seed=8).judge(pool)
    assert [d.accepted for d in other] != [d.accepted for d in decisions]


def write_run(folder, steps: list[dict[str, tuple[int, int]]]) -> None:
    """A finished run's decisions.jsonl: per step, agent -> (candidates, admitted)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "decisions.jsonl").open("w") as f:
        for step, agents in enumerate(steps, 1):
            for agent, (n, admitted) in agents.items():
                for i in range(n):
                    f.write(json.dumps({"step": step, "agent": agent, "accepted": i < admitted}) + "\n")


def test_matched_random_copies_each_agents_count_at_each_step_and_the_seed_fixes_which(tmp_path):
    steps = [{"riddle": (4, 1), "pun": (4, 3)}, {"riddle": (4, 0), "pun": (3, 3)}]
    write_run(tmp_path / "run", steps)
    assert matched_counts(tmp_path / "run") == {
        1: {"riddle": (4, 1), "pun": (4, 3)},
        2: {"riddle": (4, 0), "pun": (3, 3)},
    }
    runs = []
    for _ in range(2):
        gate = MatchedRandomGate(tmp_path / "run", seed=0)
        chosen = []
        for agents in steps:
            decisions = gate.judge(candidates({a: n for a, (n, _) in agents.items()}))
            for agent, (_, admitted) in agents.items():
                assert sum(d.accepted for d in decisions if d.agent == agent) == admitted
            chosen.append([d.accepted for d in decisions])
        runs.append(chosen)
    assert runs[0] == runs[1]


def test_matched_random_refuses_a_stream_that_is_not_the_matched_runs(tmp_path):
    write_run(tmp_path / "run", [{"riddle": (4, 1)}])
    with pytest.raises(UserError, match="micro-batch 1 holds candidates per agent"):
        MatchedRandomGate(tmp_path / "run", seed=0).judge(candidates({"riddle": 3}))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "decisions.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(UserError, match="line 1"):
        matched_counts(tmp_path / "bad")


def test_gate_match_must_name_a_finished_run_and_only_random_reads_it(tmp_path):
    from ms.cli.compose import jobs
    from ms.common.errors import UserError
    from ms.loop.validation import problems

    found = problems(compose_config(["gate=random", f"gate.match={tmp_path}"]))
    assert any("gate.match" in p and "decisions.jsonl" in p for p in found), found
    with pytest.raises(UserError) as refused:  # gate=all declares no match: refused as it is composed
        jobs(["gate=all", f"gate.match={tmp_path}"], multirun=False)
    assert (
        str(refused.value)
        == "unknown key gate.match under gate=all: a setting of gate=random only; gate=all has only the key name"
    )


def test_plan_mode_counts_no_grading_for_the_controls():
    from ms.plan.planner import plan_run

    for gate in ("all", "random"):
        rows = {r.role: r for r in plan_run(compose_config(["experiment=quick", f"gate={gate}"])).rows}
        assert rows["score"].calls == 0 and rows["answer"].calls > 0
        assert "utility" not in rows or rows["utility"].calls == 0


TINY = [
    "data.agents=[riddle]",
    "fills=[50,100]",
    "micro_batch=4",
    "train.candidates=3",
    "train.labelled=2",
    "backbone.generation.max_new_tokens=24",
    "eval.metrics=[ref_logprob]",
]


def riddles(folder):
    """A riddle data folder with explicit splits: 4 seeds, 3 stream questions (the second without a
    reference, as in the authors' stream files) and 1 test question."""
    folder.mkdir()
    source = [json.loads(line) for line in (REPO / "data" / "riddle.jsonl").read_text().splitlines()][:8]
    splits = ["seed"] * 4 + ["stream"] * 3 + ["test"]
    rows = [
        {**r, "split": split, "answer": "" if i == 5 else r["answer"]}
        for i, (r, split) in enumerate(zip(source, splits))
    ]
    (folder / "riddle.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {r["question"]: r["answer"] for r in rows if r["split"] == "stream" and r["answer"]}


@pytest.mark.slow
def test_a_reference_written_stream_generates_nothing_and_skips_questions_without_a_reference(tmp_path, models_cache):
    from ms.loop.pipeline import run
    from ms.plan.planner import plan_run

    references = riddles(tmp_path / "data")
    stream = ["gate=all", "stream.answers=reference", "retriever=dense_frozen"]  # no memory train: not read here
    cfg = compose_config(TINY + [f"data.dir={tmp_path / 'data'}", f"cache_dir={models_cache}", *stream])
    metrics = run(cfg, tmp_path / "out")
    assert metrics["stream"]["skipped_without_reference"] == {"riddle": 1}
    assert metrics["run"]["gate"] == "all" and metrics["run"]["stream_answers"] == "reference"
    roles = metrics["usage"]["backbones"]["smollm2"]["roles"]
    assert roles.get("answer", {}).get("calls", 0) == 0 and roles.get("score", {}).get("calls", 0) == 0
    decisions = [json.loads(line) for line in (tmp_path / "out" / "decisions.jsonl").open()]
    assert len(decisions) == 2 and all(d["accepted"] for d in decisions)
    assert {d["question"]: d["answer"] for d in decisions} == references
    assert metrics["stream"]["questions"] == 2 and sum(metrics["stream"]["accepted"].values()) == 2
    planned = {r.role: r.calls for r in plan_run(cfg).rows}
    assert planned["answer"] == 0 and planned["score"] == 0
