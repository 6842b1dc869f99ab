"""Gate sanity: corrupted copies of seed pairs, each gate's scores, and the AUC that says whether a
gate separates good pairs from corrupted ones."""

from __future__ import annotations

import csv
import itertools
import json
import math

import pytest

from ms.data import Example
from ms.gates.both import both_order
from ms.gates.check import gate_scores
from ms.gates.check_auc import auc, auc_with_ci, summarize
from ms.gates.check_corruptions import (
    CORRUPTIONS,
    EMPTY_ANSWER,
    GOOD,
    GRADER_DIRECTED,
    GRADER_POOL,
    corrupted_copies,
    truncated,
)
from ms.gates.check_praise import MODEL_PRAISE, PRAISE_KINDS, WRITTEN_BY
from ms.gates.replay import Utility
from ms.gates.scorer import Decision


def example(agent: str, i: int, answer: str) -> Example:
    return Example(id=f"{agent}-{i}", agent=agent, domain="logic", question=f"{agent} question {i}", answer=answer)


def decision(score, accepted=None):
    return Decision(
        agent="riddle",
        question="q",
        answer="a",
        score=score,
        accepted=bool(score and score >= 50) if accepted is None else accepted,
        reason="",
        attempts=1,
        raw="",
    )


def test_corrupted_copies_cover_every_kind_and_take_answers_from_the_right_donor():
    seeds = {
        "riddle": [example("riddle", i, f"riddle answer {i}\nsecond line") for i in range(3)],
        "pun": [example("pun", i, f"pun answer {i} with several words in one line") for i in range(2)],
    }
    own_answers = {agent: {e.answer for e in pairs} for agent, pairs in seeds.items()}
    jobs = corrupted_copies(seeds)
    assert len(jobs) == 5 * (1 + len(CORRUPTIONS))
    for agent, kind, e, answer in jobs:
        assert e.agent == agent
        if kind == GOOD:
            assert answer == e.answer
        elif kind == "swapped":
            assert answer != e.answer and answer.split()[0] != agent  # the other agent's answer
        elif kind == "other_question":  # the same agent's answer to another of its questions
            assert answer != e.answer and answer in own_answers[agent]
        elif kind == "truncated":
            assert answer != e.answer and e.answer.startswith(answer)
        else:
            assert kind == "empty" and answer == EMPTY_ANSWER


def test_an_agent_with_one_pair_has_no_other_question_to_give():
    jobs = corrupted_copies({"riddle": [example("riddle", 0, "only answer")], "pun": [example("pun", 0, "pun answer")]})
    assert [j.kind for j in jobs if j.agent == "riddle"] == [GOOD, "swapped", "truncated", "empty"]


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


def test_summarize_treats_unscored_as_rejected_and_gives_each_corruption_its_auc():
    rows = [
        ("riddle", GOOD, 80),
        ("riddle", GOOD, None),
        ("riddle", "empty", 10),
        ("riddle", "truncated", 30),
        ("riddle", "other_question", 90),
    ]
    [result] = summarize(rows)
    assert result.missing == 1 and result.overall.n_good == 2 and result.overall.n_corrupted == 3
    # 80 beats 10 and 30 but not 90; the unscored pair (0) beats none: 2 of 6
    assert result.overall.auc == pytest.approx(2 / 6)
    assert set(result.by_kind) == {"all", "empty", "truncated", "other_question"}
    assert result.by_kind["empty"].auc == pytest.approx(0.5)  # 80 > 10, 0 < 10
    assert result.by_kind["other_question"].auc == 0.0
    assert result.by_kind["truncated"].mean_corrupted == 30.0
    [admits] = summarize([("riddle", GOOD, None), ("riddle", "empty", 1.0)], missing_as=math.inf)
    assert admits.overall.auc == 1.0  # the utility gate admits what it could not measure


def test_both_ranks_every_pair_the_rubric_rejects_below_every_pair_it_admits():
    admitted = [True, True, False, False, True]
    u = [-0.5, 0.2, 3.0, -1.0, 0.2]
    ranks = both_order(admitted, u)
    assert max(r for r, a in zip(ranks, admitted) if not a) < min(r for r, a in zip(ranks, admitted) if a)
    assert ranks[1] > ranks[0] and ranks[2] > ranks[3]  # u orders each side
    assert ranks[1] == ranks[4]  # equal (admitted, u): a tie, which the AUC counts as half


def test_gate_scores_derive_both_from_the_rubric_and_utility_measurements():
    decisions = [decision(90, True), decision(10, False), decision(None, False)]
    utilities = [Utility(-0.1, None, None), Utility(0.4, None, None), Utility(None, None, None)]
    scores = gate_scores(["rubric", "utility", "both"], decisions, utilities)
    assert scores["rubric"] == [90, 10, None] and scores["utility"] == [-0.1, 0.4, None]
    # admitted first whatever its u; among the rejected, the unmeasured u (admitted by utility) ranks high
    assert scores["both"][0] > scores["both"][2] > scores["both"][1]


def test_youden_threshold_admits_what_separates_best_and_prefers_zero_on_a_tie():
    from ms.gates.check_auc import youden_threshold

    t, j = youden_threshold([0.3, 0.2, -0.05], [-0.1, -0.2, 0.1])
    assert t == -0.1 and j == pytest.approx(2 / 3)  # admits every good pair and one corrupted pair of three
    assert youden_threshold([1.0, 2.0], [-1.0, -2.0]) == (0.0, 1.0)  # every t in [-1, 1) separates: 0 wins


@pytest.mark.slow
def test_gate_check_command_on_the_default_backbone(tmp_path, models_cache, monkeypatch, capsys):
    """Every gate on the same pairs, with the real SmolLM2: a utility for every pair, an AUC per
    gate, agent and corruption. One seed pair per agent keeps it to 8 pairs (a lone pair has no
    other question to give: test_an_agent_with_one_pair_has_no_other_question_to_give), k=1 to one
    shot per utility prompt, and gate.probes=1 to one probe per pair (the check measures utility with
    the probes of the config's gate where that gate measures it: gate=utility's here). The backbone
    writes 16 tokens of praise, not 96: decoding them was about a sixth of this test's time, and what
    is checked of it (one praise written per seed pair, then graded or screened) does not depend on its length."""
    import ms.gates.check_praise
    from ms.cli.data import main

    monkeypatch.setattr(ms.gates.check_praise, "PRAISE_TOKENS", 16)

    out = tmp_path / "gate"
    assert (
        main(
            [
                "gate-check",
                "--per-agent",
                "1",
                "--gate",
                "rubric,utility,both",
                "--out",
                str(out),
                "data.agents=[riddle,pun]",
                "k=1",
                "gate=utility",
                "gate.probes=1",
                f"cache_dir={models_cache}",
            ]
        )
        == 0
    )
    # Each long stage shows a progress bar; the praise the backbone writes too (one reply per seed pair).
    assert "gate-check praise by smollm2 (2 pairs): 2reply" in capsys.readouterr().err
    with (out / "gate_check.csv").open() as f:
        rows = list(csv.DictReader(f))
    ordinary = [kind for kind in CORRUPTIONS if kind != "other_question"]
    kinds = ["all", *ordinary, GRADER_POOL, *GRADER_DIRECTED]
    assert [(r["gate"], r["agent"], r["corruption"]) for r in rows] == [
        (gate, agent, kind) for gate in ("rubric", "utility", "both") for agent in ("riddle", "pun") for kind in kinds
    ]
    for r in rows:  # `all` stays the three ordinary corruptions; the grader-directed pool is the two claims
        assert r["n_good"] == "1" and r["n_corrupted"] == {"all": "3", GRADER_POOL: "2"}.get(r["corruption"], "1")
        assert r["missing"] == "0" and 0.0 <= float(r["auc"]) <= 1.0
    pairs = [json.loads(line) for line in (out / "gate_check_decisions.jsonl").read_text().splitlines()]
    # per agent: good, 3 ordinary, 3 grader-directed, 3 plain-words praise (one written by the backbone)
    # cross_praise, third_praise and fifth_praise are written only with --praise-by, --third-by and --fifth-by
    written = [k for k in PRAISE_KINDS if k not in WRITTEN_BY]
    assert len(pairs) == 2 * (1 + len(ordinary) + len(GRADER_DIRECTED) + len(written))
    assert "rubric, pooled over agents" in (out / "gate_check.md").read_text()
    for pair in pairs:
        utility = pair["utility"]
        assert utility["u"] is not None and len(utility["probes"]) == len(utility["deltas"]) == 1
        assert pair["score"] is not None
    text = (out / "gate_check.md").read_text()
    assert "score read from probabilities" in text and "gate both" in text
    usage = json.loads((out / "llm_usage.json").read_text())["backbones"]["smollm2"]["roles"]
    # The default defence (reject) grades no grader-directed copy, nor any praise the backbone wrote in the
    # screen's words; the templated praise avoids them: every other pair is graded once.
    screened = [p for p in pairs if p["read"] == "screen"]
    assert {p["kind"] for p in screened} - {MODEL_PRAISE} == set(GRADER_DIRECTED)
    assert usage["score"]["calls"] + usage["score"]["cache_hits"] == len(pairs) - len(screened)
    assert usage["answer"]["calls"] + usage["answer"]["cache_hits"] == 2  # one praise written per seed pair
    assert usage["utility"]["calls"] > 0


def test_utility_retrieval_withholds_the_pair_and_the_donors_of_its_corrupted_answers(tmp_path):
    """While a seed pair's jobs are measured, no probe or shot may show its question or any of the
    answers its jobs carry: the pair is new to the pool, and a copied answer cannot meet itself."""
    from ms.agents import Agent, seed_memories
    from ms.gates.check_utility import measure_utility
    from ms.pool import Pool
    from ms.retrieval.bm25 import BM25Retriever

    agents = {a: Agent(a, "logic", "", "logic") for a in ("riddle", "pun")}
    seeds = {a: [example(a, i, f"{a} answer {i} about topic {i}") for i in range(4)] for a in agents}
    jobs = corrupted_copies(seeds)
    seen: dict[tuple[str, str], list] = {}

    class Meter:  # records what the retrieval it was given returns for each candidate
        def __init__(self, retrieve):
            self.retrieve = retrieve

        def measure(self, candidates):
            out = []
            for c in candidates:
                found = self.retrieve([c.question], c.scope, 20)[0]
                seen.setdefault((c.question, c.answer), []).extend(found)
                out.append(Utility(0.0, None, None, [m.id for m in found]))
            return out

    with Pool(tmp_path / "pool.sqlite") as pool:
        pool.add([row for a, pairs in seeds.items() for row in seed_memories(agents[a], pairs, "domain")], step=0)
        utilities = measure_utility(jobs, pool, BM25Retriever(pool), agents, "domain", Meter)
    assert len(utilities) == len(jobs) and all(u is not None for u in utilities)
    for job in jobs:
        group = {j.answer for j in jobs if j.example.id == job.example.id}
        found = seen[(job.example.question, job.answer)]
        assert len(found) == 8 - 3  # of the scope's 8: the pair itself and the two donors withheld
        assert all(m.question != job.example.question and m.answer not in group for m in found)


@pytest.mark.slow
def test_gate_check_runs_the_genre_test_on_the_backbone_it_names_and_says_so(tmp_path, models_cache):
    """The genre test in a real check, on the backbone gate.test_backbone names (SmolLM2 here, named, so that no
    second model loads): every pair measured after its question and the review requests, and gate_check.md
    says where it scored."""
    from ms.cli.data import main
    from ms.gates.genre import REVIEWS

    out = tmp_path / "genre"
    command = ["gate-check", "--per-agent", "1", "--gate", "rubric,rubric_genre", "--only", "praise_alone"]
    overrides = ["data.agents=[riddle,pun]", "gate=rubric_genre", "gate.test_backbone=smollm2"]
    assert main([*command, "--out", str(out), *overrides, f"cache_dir={models_cache}"]) == 0
    pairs = [json.loads(line) for line in (out / "gate_check_decisions.jsonl").read_text().splitlines()]
    assert sorted((p["agent"], p["kind"]) for p in pairs) == [
        ("pun", "good"),
        ("pun", "praise_alone"),
        ("riddle", "good"),
        ("riddle", "praise_alone"),
    ]
    assert all(len(p["genre_test"]["after"]) == len(REVIEWS) and p["genre_test"]["d"] is not None for p in pairs)
    header = (out / "gate_check.md").read_text()
    assert "requests to review a reply to it by more than 0, else 0; scored on smollm2" in header
