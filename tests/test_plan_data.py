"""`ms-data gate-check|cross-grade|invert ... +plan=true` (ms.plan.data): the calls the command would
make, printed without building a model or writing a folder."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

DATA = f"data.dir={REPO / 'data'}"


@pytest.fixture
def no_models(monkeypatch, tmp_path):
    """Building any backbone fails the test; the command runs in an empty folder, which must stay empty."""
    import ms.llm
    import ms.llm.backbones

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built under +plan=true")

    monkeypatch.setattr(ms.llm.backbones, "build_backbones", refuse)
    monkeypatch.setattr(ms.llm, "build_lm", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def rows(out: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.split() and line.split()[0] in ("answer", "score", "utility", "invert", "total")
    }


def test_gate_check_plan_counts_its_calls_builds_no_model_and_writes_nothing(no_models, capsys):
    from ms.cli.data import main

    assert (
        main(
            [
                "gate-check",
                "--per-agent",
                "1",
                "--gate",
                "rubric,utility",
                DATA,
                "data.agents=[riddle,pun]",
                f"cache_dir={no_models / 'cache'}",
                "+plan=true",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # 2 agents x 1 seed pair, each as it is, swapped, truncated and empty (one pair has no other question),
    # its three grader-directed copies and its three plain-words praise copies, one of them written by the
    # backbone first: one sample per seed pair.
    assert rows(out)["score"][:2] == ["smollm2", "20"] and rows(out)["answer"][:2] == ["smollm2", "2"]
    assert rows(out)["utility"][1].startswith("~") and "20 pairs to judge" in out
    # It names the folder the command would write: under outputs/, beside ms-run's, not the repository root.
    assert "plan for outputs/gate_check/" in out and "(nothing is written)" in out
    assert list(no_models.iterdir()) == []


def test_gate_check_plan_needs_no_api_key_but_reports_a_real_mistake(no_models, capsys):
    from ms.cli.data import main

    assert main(["gate-check", "--per-agent", "1", DATA, "data.agents=[riddle]", "backbone=gpt-4o", "+plan=true"]) == 0
    # One pair as it is, truncated, empty, its three grader-directed copies and three praise copies (one agent
    # gives no other agent's answer); a grader that reads its score as text may be asked again: an estimate.
    assert rows(capsys.readouterr().out)["score"][:2] == ["gpt-4o", "~9"]
    assert main(["gate-check", DATA, "k=-1", "+plan=true"]) == 2
    assert "invalid setting k=-1" in capsys.readouterr().err
    assert list(no_models.iterdir()) == []


def test_gate_check_plan_counts_the_question_tests_passes(no_models, capsys):
    """--gate rubric_qdep tests every pair: its answer scored after its question and after the gate's m others."""
    from ms.cli.data import main

    def score_calls(gates: str, *overrides: str) -> float:
        command = ["gate-check", "--per-agent", "2", "--gate", gates, DATA, "data.agents=[riddle]", "+plan=true"]
        assert main([*command, *overrides]) == 0
        return float(rows(capsys.readouterr().out)["score"][1])

    graded = score_calls("rubric")
    assert graded == 20  # good, other_question, truncated, empty, 3 grader-directed, 3 praise; 2 seed pairs
    assert score_calls("rubric,rubric_qdep") == graded + 20 * (1 + 4)
    assert score_calls("rubric,rubric_qdep", "gate=rubric_qdep", "gate.others=2") == graded + 20 * (1 + 2)
    assert score_calls("rubric,rubric_genre") == graded + 20 * (1 + 2)  # its question and the two review requests
    # gate.test_backbone moves the genre test's passes to that backbone's row; the grader's keeps the gradings.
    command = ["gate-check", "--per-agent", "2", "--gate", "rubric,rubric_genre", DATA, "data.agents=[riddle]"]
    assert main([*command, "gate=rubric_genre", "gate.test_backbone=gemma3", "+plan=true"]) == 0
    scored = [line.split()[1:3] for line in capsys.readouterr().out.splitlines() if line.startswith("score ")]
    assert scored == [["smollm2", "20"], ["gemma3", "60"]]


def test_invert_and_cross_grade_plans_count_a_call_per_answer_and_per_graded_pair(no_models, tmp_path, capsys):
    from ms.cli.data import main

    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"agent": "riddle", "answer": f"answer {i}"}) + "\n" for i in range(3)))
    assert main(["invert", str(answers), str(tmp_path / "out.jsonl"), DATA, "+plan=true", "--backbone", "gpt-4o"]) == 0
    assert rows(capsys.readouterr().out)["invert"][:2] == ["gpt-4o", "3"]
    assert not (tmp_path / "out.jsonl").exists()

    run = REPO / "results" / "figure4_offline" / "runs" / "backbone=smollm2"
    graded = len((run / "decisions.jsonl").read_text().splitlines())
    assert main(["cross-grade", str(run), DATA, "+plan=true", "--out", str(tmp_path / "cg")]) == 0
    assert rows(capsys.readouterr().out)["total"][0] == str(2 * graded)  # smollm2 and gemma3 grade each pair
    assert not (tmp_path / "cg").exists() and list(no_models.iterdir()) == []


def test_ms_data_refuses_plan_accept_in_one_line(no_models, capsys):
    from ms.cli.data import main

    assert main(["gate-check", DATA, "+plan=true", "+plan_accept=0.5"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
