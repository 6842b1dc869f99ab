import json

import pytest
from fakes import FakeLM

from ms.agents import Agent, default_agents
from ms.gates.scorer import (
    RETRY_PROMPT,
    SCORE_OPTIONS,
    SYSTEM_PROMPT,
    Decision,
    Scorer,
    ScorerConfig,
    append_decisions,
    load_rubric,
    load_rubrics,
    parse_score,
    rubric_for,
)

# ---- rubrics ------------------------------------------------------------------------------

# Criteria per rubric in the paper's appendix A.1.
PAPER_CRITERIA = {"literary": 11, "logic": 5, "plan": 5, "single": 5}


@pytest.mark.parametrize("name", PAPER_CRITERIA)
def test_rubric_totals_100_with_the_papers_criteria(name):
    rubric = load_rubric(name)
    assert rubric.name == name
    assert rubric.total == 100
    assert len(rubric.criteria) == PAPER_CRITERIA[name]
    assert "2404.09982" in rubric.source
    assert all(c.rewards for c in rubric.criteria)


def test_single_rubric_has_bands_and_domain_rubrics_split_points():
    single = load_rubric("single")
    assert [c.points for c in single.criteria] == [25, 20, 20, 20, 15]
    assert all(c.bands for c in single.criteria)
    logic = {c.name: c for c in load_rubric("logic").criteria}
    assert dict(logic["Creativity and originality"].parts) == {"question creativity": 15, "answer creativity": 15}
    literary = {c.name: c for c in load_rubric("literary").criteria}
    assert literary["Rhyme scheme adherence"].applies_to == ("limerick",)


def test_rubric_with_wrong_total_names_its_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\ntitle: Bad\nsource: test\ncriteria:\n"
        "  - {name: A, points: 60, rewards: a}\n  - {name: B, points: 30, rewards: b}\n"
    )
    with pytest.raises(ValueError, match=r"bad\.yaml.*total 90"):
        load_rubric("bad", tmp_path)


def test_unknown_rubric_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match="literary"):
        load_rubric("poetry")


def test_rubric_for_pool_modes():
    for agent in default_agents().values():
        assert rubric_for(agent, "domain").name == agent.domain
        assert rubric_for(agent, "single").name == "single"
    with pytest.raises(ValueError, match="pool mode"):
        rubric_for(default_agents()["sonnet"], "global")
    haiku = Agent("haiku", "poetry", "Write haiku.", rubric="poetry")
    with pytest.raises(FileNotFoundError, match="no rubric 'poetry'"):
        rubric_for(haiku, "domain")
    assert rubric_for(haiku, "single").name == "single"  # the Single-pool needs no rubric of its own


# ---- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("85", 85),
        ("Score: 85/100", 85),
        ("I'd give it 85 out of 100", 85),
        ("eighty", 80),
        ("eighty-five", 85),
        ("Eighty five.", 85),
        ("one hundred", 100),
        ("zero", 0),
        ("0", 0),
        ("100/100", 100),
        ("", None),
        (None, None),
        ("150", None),
        ("-3", None),
        ("Score: -3", None),
        ("No score.", None),
        ("N/A", None),
        # a fraction beats an earlier bare number; the "100" of "/100" is never the score
        ("Criterion 1 looks fine. Total: 72/100", 72),
        ("Total 90/100 (accuracy 25/25)", 90),
        # a labelled number beats an earlier bare one; digits beat number words
        ("Rubric item 3 is weak. Score: 41", 41),
        ("This one deserves 85.", 85),
        ("8/10", 80),
        ("7.5 out of ten", 75),
        ("80-85", 80),
        ("99.6", 100),
    ],
)
def test_parse_score(text, expected):
    assert parse_score(text) == expected


# ---- the gate, with a scripted grader ------------------------------------------------------


def grader(first: dict[str, str], retry: dict[str, str] | None = None) -> FakeLM:
    """Replies by the answer in the grading prompt: `first[answer]` to the grading prompt and
    `retry[answer]` to the reminder."""

    def by_answer(replies):
        return {f"Answer: {answer}\n": reply for answer, reply in replies.items()}

    return FakeLM(by_answer(first), retry=by_answer(retry or {}))


def items(*answers):
    return [("riddle", "logic", f"question for {a}", a) for a in answers]


def scorer(lm, **cfg):
    return Scorer(lm, load_rubrics(), ScorerConfig(**cfg))


def test_gate_accepts_at_or_above_threshold_in_one_batch():
    lm = grader({"good": "72", "bad": "Score: 31/100", "edge": "50"})
    decisions = scorer(lm).score(items("good", "bad", "edge"))
    assert lm.batches == [3]
    assert [(d.score, d.accepted, d.attempts) for d in decisions] == [(72, True, 1), (31, False, 1), (50, True, 1)]
    assert decisions[0].reason == "score 72 >= threshold 50"
    assert decisions[1].reason == "score 31 < threshold 50"
    assert decisions[0].rubric == "logic" and decisions[0].answer == "good"


def test_threshold_is_configurable():
    decisions = scorer(grader({"a": "72"}), threshold=80).score(items("a"))
    assert not decisions[0].accepted and decisions[0].reason == "score 72 < threshold 80"


def test_unparseable_reply_is_retried_once_in_a_batch():
    lm = grader({"fine": "64", "vague": "It is quite good", "shy": "Hmm"}, retry={"vague": "58", "shy": "70"})
    decisions = scorer(lm).score(items("fine", "vague", "shy"))
    assert lm.batches == [3, 2]
    assert [(d.score, d.accepted, d.attempts) for d in decisions] == [(64, True, 1), (58, True, 2), (70, True, 2)]
    assert decisions[1].raw == "58"


def test_still_unparseable_pair_is_rejected_with_reason():
    lm = grader({"x": "I cannot grade this."}, retry={"x": "Sorry, no."})
    [decision] = scorer(lm).score(items("x"))
    assert lm.batches == [1, 1]
    assert decision.score is None and not decision.accepted and decision.attempts == 2
    assert decision.reason == "unscored: unparseable reply 'Sorry, no.'" and decision.unscored


def test_retries_zero_means_no_retry():
    lm = grader({"x": "great"})
    [decision] = scorer(lm, retries=0).score(items("x"))
    assert lm.batches == [1] and decision.reason.startswith("unscored: unparseable reply")


def test_retry_keeps_the_failed_reply_in_the_chat():
    lm = grader({"x": "great"}, retry={"x": "61"})
    scorer(lm).score(items("x"))
    first, retry = lm.chats
    assert retry[:2] == first
    assert retry[2] == {"role": "assistant", "content": "great"}
    assert retry[3]["content"] == RETRY_PROMPT


def test_prompt_holds_rubric_question_and_answer():
    chat = scorer(FakeLM()).prompt("travel", "single", "Plan two days in Rome.", "Day 1: Colosseum.")
    assert chat[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert "in-context example" in SYSTEM_PROMPT
    user = chat[1]["content"]
    for expected in ("Accuracy (0-25 points)", "15-24", "Plan two days in Rome.", "Day 1: Colosseum.", "0 to 100"):
        assert expected in user


def test_unknown_rubric_fails_before_any_call():
    lm = FakeLM()
    with pytest.raises(KeyError, match="poetry"):
        scorer(lm).score([("sonnet", "poetry", "q", "a")])
    assert lm.batches == [] and scorer(lm).score([]) == []


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="threshold"):
        scorer(FakeLM(), threshold=150)


def test_append_decisions_writes_one_line_each(tmp_path):
    decisions = scorer(grader({"a": "72", "b": "9"})).score(items("a", "b"))
    path = append_decisions(tmp_path, decisions)
    append_decisions(path, decisions[:1])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert path.name == "decisions.jsonl" and len(rows) == 3
    assert rows[0] == decisions[0].as_dict()
    assert set(rows[0]) >= {"agent", "question", "answer", "score", "accepted", "reason", "attempts", "raw"}


def test_scorer_config_is_a_structured_hydra_node():
    from omegaconf import OmegaConf

    node = OmegaConf.structured(ScorerConfig)
    assert node.threshold == 50 and node.retries == 1 and node.backbone is None
    with pytest.raises(Exception, match="treshold"):
        OmegaConf.merge(node, {"treshold": 40})


# ---- the gate's probability read, with a fixed distribution -------------------------------


def test_probability_read_is_the_expected_score_renormalized_over_scores():
    lm = FakeLM(probabilities={80: 0.3, 40: 0.1, 90: 0.1})  # half the mass is on replies that are no score
    [decision] = scorer(lm).score(items("a"))
    assert decision.read == "probabilities" and decision.attempts == 1
    assert decision.score == pytest.approx((80 * 0.3 + 40 * 0.1 + 90 * 0.1) / 0.5)
    assert decision.mass == pytest.approx(0.5) and decision.accepted
    assert decision.raw.startswith("P(80)=0.300")


def test_probability_read_with_no_mass_on_any_score_is_unscored():
    [decision] = scorer(FakeLM(probabilities={}), min_mass=1e-4).score(items("a"))
    assert decision.unscored and not decision.accepted and decision.reason.startswith("unscored: only 0")


def test_read_mode_follows_the_backbone_and_the_config():
    assert scorer(FakeLM(probabilities={50: 1.0})).read == "probabilities"
    assert scorer(FakeLM(probabilities={50: 1.0}), read="text").read == "text"
    assert scorer(FakeLM()).read == "text"  # no probabilities: text parse plus retry
    with pytest.raises(ValueError, match="exposes no token probabilities"):
        scorer(FakeLM(), read="probabilities")
    with pytest.raises(ValueError, match="scorer.read"):
        scorer(FakeLM(), read="vibes")


# ---- the gate, with the real offline backbone -----------------------------------------------


def test_the_rubric_prefix_cache_leaves_the_probabilities_unchanged(smollm2):
    from ms.llm.prefix_cache import PrefixCaches

    gate = Scorer(smollm2, load_rubrics(["literary"]), ScorerConfig())
    prefix = gate.rubric_prefix("literary")
    assert load_rubric("literary").render() in prefix and prefix.endswith("written by the ")
    items = [
        (agent, "literary", f"Write a {agent} about {topic}.", answer)
        for agent, topic, answer in [
            (
                "sonnet",
                "the sea",
                "The tide returns as every evening must,\nand grey gulls settle on the harbour wall.",
            ),
            ("limerick", "a cat", "A cat with a taste for the cream\nwould plot and would purr and would scheme."),
            ("wuyanlvshi", "autumn", "Cold wind combs the hills; geese write their line on the sky."),
        ]
    ]
    chats = [gate.prompt(*item) for item in items]
    smollm2.prefix_caches = PrefixCaches()
    plain = smollm2.option_probabilities(chats, SCORE_OPTIONS)
    assert len(smollm2.prefix_caches) == 0
    reused = smollm2.option_probabilities(chats, SCORE_OPTIONS, [prefix])
    assert len(smollm2.prefix_caches) == 1  # one rubric: one prefix, computed once for all three pairs
    for a, b in zip(plain, reused):
        assert b == pytest.approx(a, abs=1e-4)
    decisions = gate.score(items)  # the gate hands the backbone its rubric's prefix by itself
    assert len(smollm2.prefix_caches) == 1
    assert [d.mass for d in decisions] == pytest.approx([round(sum(p), 6) for p in plain], abs=1e-4)


@pytest.mark.slow
def test_option_probabilities_equal_a_hand_computation_from_the_logits(smollm2):
    import torch

    lm = smollm2
    chat = [
        {
            "role": "user",
            "content": "How good is this haiku, from 0 to 100? Reply with the number only.\n"
            "An old silent pond / a frog jumps into the pond / splash! Silence again.",
        }
    ]
    probs = lm.option_probabilities([chat], SCORE_OPTIONS)[0]

    context = lm._encode(lm.chat_context(chat))
    digit = {}
    for d in range(10):
        [digit[d]] = lm.tokenizer(str(d), add_special_tokens=False)["input_ids"]  # one token per digit

    @torch.inference_mode()
    def next_token(after: list[int]) -> torch.Tensor:  # full forward passes, no cache
        return torch.softmax(lm.net(torch.tensor([context + after])).logits[0, -1].double(), -1)

    root, hand = next_token([]), {}
    hand[0] = float(root[digit[0]])  # no score starts with 0 and goes on
    for d1 in range(1, 10):
        after = next_token([digit[d1]])
        hand[d1] = float(root[digit[d1]] * (1 - sum(after[digit[d]] for d in range(10))))
        for d2 in range(10):
            hand[10 * d1 + d2] = float(root[digit[d1]] * after[digit[d2]])
    after10 = next_token([digit[1], digit[0]])
    hand[100] = hand[10] * float(after10[digit[0]])
    hand[10] -= hand[100]
    assert probs == pytest.approx([hand[v] for v in range(101)], abs=2e-5)
    assert 0.0 < sum(probs) <= 1.0 + 1e-6


@pytest.mark.slow
def test_default_backbone_scores_every_seed_pair_of_an_agent(smollm2):
    from ms.data import DataConfig, load_splits

    lm = smollm2
    seeds = load_splits(DataConfig(agents=["riddle"]))["riddle"].seed
    decisions = Scorer(lm, load_rubrics(), ScorerConfig()).score(
        [("riddle", "logic", e.question, e.answer) for e in seeds]
    )
    assert len(decisions) == len(seeds) >= 10
    assert [d for d in decisions if d.unscored] == []
    assert all(d.read == "probabilities" and 0 <= d.score <= 100 and d.mass > 1e-4 for d in decisions)
    assert len({round(d.score, 2) for d in decisions}) > 1  # a grade, not a constant


@pytest.mark.slow
def test_real_backbone_grades_three_pairs_by_text(smollm2):
    lm = smollm2
    pairs = [
        (
            "limerick",
            rubric_for(default_agents()["limerick"], "domain").name,
            "Write a limerick about a cat who loves rain.",
            "A cat who adored the wet rain\nWould dance by the drainpipe and lane\nShe'd splash in a puddle\n"
            "Then curl up to cuddle\nAnd purr till it poured down again",
        ),
        (
            "riddle",
            rubric_for(default_agents()["riddle"], "domain").name,
            "What has keys but can't open locks?",
            "A piano: it has many keys, yet none of them open a lock.",
        ),
        (
            "travel",
            rubric_for(default_agents()["travel"], "single").name,
            "Plan one day in Paris on a small budget.",
            "Morning: walk along the Seine to Notre-Dame. Noon: picnic in the Luxembourg Gardens. "
            "Afternoon: free entry to the Petit Palais. Evening: sunset from Montmartre.",
        ),
    ]
    decisions = Scorer(lm, load_rubrics(), ScorerConfig(read="text")).score(pairs)
    assert len(decisions) == 3
    for decision, (agent, *_rest) in zip(decisions, pairs):
        assert isinstance(decision, Decision) and decision.agent == agent and decision.read == "text"
        assert decision.attempts in (1, 2)
        if decision.score is None:
            assert not decision.accepted and decision.reason.startswith("unscored: unparseable reply")
        else:
            assert 0 <= decision.score <= 100
            assert decision.accepted == (decision.score >= 50)
