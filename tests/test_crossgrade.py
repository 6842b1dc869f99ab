"""ms-data cross-grade: every grader on the stream pairs runs graded, admissions by the backbone that
wrote each answer, the graders' agreement, and the run's own grader reproducing its recorded scores."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from conftest import compose_config

from ms.cli.data import main as data_main
from ms.gates.crossgrade import Pair, read_pairs, summary


def make_run(folder: Path, decisions: list[dict], grader: str = "smollm2", agent_backbones: dict | None = None) -> Path:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"scorer": {"backbone": grader}}))
    (folder / "metrics.json").write_text(
        json.dumps({"run": {"backbone": "smollm2", **({"agent_backbones": agent_backbones} or {})}})
    )
    (folder / "decisions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))
    return folder


def decision(agent: str, answer: str, score=None) -> dict:
    return {"agent": agent, "question": f"a question for {agent}", "answer": answer, "score": score, "rubric": "single"}


def test_read_pairs_names_the_writer_and_the_runs_grader_and_a_bad_line(tmp_path):
    run = make_run(
        tmp_path / "grader=gemma3,k=3",
        [decision("limerick", "A cat...", 30.0), decision("pun", "Ha.")],
        grader="gemma3",
        agent_backbones={"limerick": "gemma3", "pun": "smollm2"},
    )
    pairs = read_pairs(run)
    assert [(p.agent, p.writer, p.grader, p.score) for p in pairs] == [
        ("limerick", "gemma3", "gemma3", 30.0),
        ("pun", "smollm2", "gemma3", None),
    ]
    with (run / "decisions.jsonl").open("a") as f:
        f.write('{"agent": "pun"}\n')
    with pytest.raises(Exception, match=r"decisions.jsonl, line 3: no field 'rubric'"):
        read_pairs(run)


def test_summary_counts_admissions_per_grader_and_writer_at_each_threshold():
    pairs = [
        Pair("r", agent, writer, "single", "q", "a", "a-grader", recorded)
        for agent, writer, recorded in [
            ("sonnet", "gemma3", None),
            ("sonnet", "gemma3", None),
            ("pun", "smollm2", 20.0),
            ("pun", "smollm2", 10.0),
        ]
    ]
    scores = {"smollm2": [30.0, 5.0, 20.0, 10.0], "gemma3": [40.0, 25.0, None, 22.0]}
    text = summary(pairs, scores, {"smollm2": 15, "gemma3": 23})
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert (
        "| 2 | 17.5 (n<3, too small) n=2 | 1/2 (50%" in rows["**gemma3**"]
    )  # smollm2 admits one of gemma's two answers...
    assert rows["**gemma3**"].rstrip(" |").endswith("2/2 (100% [34%, 100%])")  # ...gemma admits both
    assert "| 15.0 (n<3, too small) n=2 | 1/2 (50%" in rows["**smollm2**"]
    assert "| 22.0 (n<3, too small) n=1 | 0/2 (0%" in rows["**smollm2**"]  # gemma read one score of two
    assert "pun (smollm2)" in rows and "sonnet (gemma3)" in rows
    assert "smollm2 admits its own family's answers 1/2 and the other's 1/2" in text
    assert "gemma3 admits its own family's answers 2/2 and the other's 0/2" in text
    assert "the same admission decision on 2 of 4" in text
    # with three scores or more the mean carries its bootstrap CI
    three = summary(pairs[:1] * 3, {"smollm2": [10.0, 20.0, 30.0]}, {"smollm2": 15})
    assert "| 3 | 20.0 [" in three and "] n=3 | 2/3 (67%" in three  # both admit the first pair and reject the last


def test_where_both_families_answered_a_question_own_favour_is_tested_paired():
    """Twin agents: sonnet on SmolLM2 and sonnet_gemma3 answer the same three questions. SmolLM2 admits
    only its own answer on two of them and both on the third; Gemma admits only the other's on one."""
    pairs = [
        Pair("twins", agent, writer, "literary", f"question {q}", "a", "smollm2", None)
        for q in range(3)
        for agent, writer in [("sonnet", "smollm2"), ("sonnet_gemma3", "gemma3")]
    ]
    scores = {"smollm2": [20.0, 5.0, 20.0, 5.0, 20.0, 20.0], "gemma3": [30.0, 10.0, 10.0, 10.0, 30.0, 30.0]}
    text = summary(pairs, scores, {"smollm2": 15, "gemma3": 23})
    lines = [line for line in text.splitlines() if "questions both families answered" in line]
    assert lines == [
        "  - on the 3 questions both families answered, it admits only its own family's answer on 2 "
        "and only the other's on 0; exact McNemar p = 0.5.",
        "  - on the 3 questions both families answered, it admits only its own family's answer on 0 "
        "and only the other's on 1; exact McNemar p = 1.",
    ]
    # Answers to different questions are not paired: the families runs' agents answer their own questions.
    apart = [Pair("run", p.agent, p.writer, p.rubric, f"{p.agent}: {p.question}", "a", "smollm2", None) for p in pairs]
    assert "questions both families answered" not in summary(apart, scores, {"smollm2": 15, "gemma3": 23})


@pytest.mark.slow
def test_cross_grade_with_smollm2_reproduces_the_scores_a_run_recorded(tmp_path, models_cache, capsys):
    answers = [
        ("limerick", "There once was a cat from Peru\nwho dreamt he was eating a shoe."),
        ("riddle", "The answer is a shadow: it follows you, and it vanishes in the dark."),
        ("pun", "N/A"),
    ]
    first = make_run(tmp_path / "first", [decision(a, text) for a, text in answers])
    cache = f"cache_dir={models_cache}"
    assert data_main(["cross-grade", str(first), cache, "--graders", "smollm2", "--out", str(tmp_path / "one")]) == 0
    with (tmp_path / "one" / "cross_grade.csv").open(newline="") as f:
        scores = [float(row["score_smollm2"]) for row in csv.DictReader(f)]
    assert len(scores) == 3 and all(0 <= s <= 100 for s in scores)
    # A run that recorded those scores is reproduced by its own grader, re-graded from the same pairs.
    again = make_run(tmp_path / "again", [decision(a, text, s) for (a, text), s in zip(answers, scores)])
    assert data_main(["cross-grade", str(again), cache, "--graders", "smollm2", "--out", str(tmp_path / "two")]) == 0
    assert "smollm2 re-graded the 3 pairs of the runs it graded: 3 reproduce" in capsys.readouterr().out
    assert compose_config(["grader=smollm2"]).scorer.threshold == 15


def test_cross_grade_without_a_run_folder_is_a_user_error(tmp_path, capsys):
    assert data_main(["cross-grade", str(tmp_path / "missing")]) == 2
    assert "name at least one run folder" in capsys.readouterr().err
