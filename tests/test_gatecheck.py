"""Gate sanity: corrupted copies of seed pairs, and the AUC that says whether a grader separates them."""

from __future__ import annotations

import csv
import itertools
import json

import pytest

from ms.data import Example
from ms.gatecheck import EMPTY_ANSWER, auc, auc_with_ci, corrupted_copies, summarize, truncated
from ms.scorer import Decision


def example(agent: str, i: int, answer: str) -> Example:
    return Example(id=f"{agent}-{i}", agent=agent, domain="logic", question=f"{agent} question {i}", answer=answer)


def test_corrupted_copies_cover_every_kind_and_swap_in_another_agents_answer():
    seeds = {"riddle": [example("riddle", i, f"riddle answer {i}\nsecond line") for i in range(3)],
             "pun": [example("pun", i, f"pun answer {i} with several words in one line") for i in range(2)]}
    jobs = corrupted_copies(seeds)
    assert len(jobs) == 5 * 4
    for agent, kind, e, answer in jobs:
        assert e.agent == agent
        if kind == "good":
            assert answer == e.answer
        elif kind == "swapped":
            assert answer != e.answer and answer.split()[0] != agent  # the other agent's answer
        elif kind == "truncated":
            assert answer != e.answer and e.answer.startswith(answer)
        else:
            assert kind == "empty" and answer == EMPTY_ANSWER


def test_truncated_keeps_the_first_line_or_a_third_of_a_one_line_answer():
    assert truncated("line one\nline two") == "line one"
    assert truncated("a b c d e f") == "a b"


def test_auc_counts_pairs_won_with_ties_as_half():
    good, bad = [3.0, 2.0, 5.0], [1.0, 2.0, 4.0, 0.0]
    by_hand = sum(1.0 if g > b else 0.5 if g == b else 0.0 for g, b in itertools.product(good, bad))
    assert auc(good, bad) == pytest.approx(by_hand / 12)
    point, lo, hi = auc_with_ci([9, 8, 7, 9, 8], [1, 2, 1, 3, 2, 1])
    assert point == 1.0 and lo == hi == 1.0  # every resample separates perfectly
    point, lo, hi = auc_with_ci([5, 1, 4, 2, 3, 5], [1, 5, 2, 4, 3, 2])
    assert lo < point < hi and lo < 0.5 < hi  # no separation: the interval covers chance


def test_summarize_treats_unscored_as_rejected_and_writes_means(tmp_path):
    def decision(score):
        return Decision(agent="riddle", question="q", answer="a", score=score, accepted=bool(score and score >= 50),
                        reason="", attempts=1, raw="")

    rows = [("riddle", "good", decision(80)), ("riddle", "good", decision(None)),
            ("riddle", "empty", decision(10)), ("riddle", "truncated", decision(30))]
    [result] = summarize(rows)
    assert result.unscored == 1 and result.n_good == 2 and result.n_corrupted == 2
    assert result.auc == pytest.approx(0.5)  # 80 beats both; the unscored pair (0) beats neither
    assert result.mean_by_kind == {"truncated": 30.0, "empty": 10.0}


@pytest.mark.slow
def test_gate_check_command_on_the_default_backbone(tmp_path, models_cache):
    from ms.datacli import main

    out = tmp_path / "gate"
    assert main(["gate-check", "--per-agent", "2", "--out", str(out), "data.agents=[riddle,pun]",
                 f"cache_dir={models_cache}"]) == 0
    with (out / "gate_check.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["agent"] for r in rows] == ["riddle", "pun"]
    assert all(r["n_good"] == "2" and r["n_corrupted"] == "6" and r["unscored"] == "0" for r in rows)
    assert all(0.0 <= float(r["auc"]) <= 1.0 for r in rows)
    assert "score read from probabilities" in (out / "gate_check.md").read_text()
    score = json.loads((out / "llm_usage.json").read_text())["backbones"]["smollm2"]["roles"]["score"]
    assert score["calls"] + score["cache_hits"] == 2 * 2 * 4  # agents x pairs x (good + 3 corrupted)
