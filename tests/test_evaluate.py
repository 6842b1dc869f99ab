import pytest

from ms.metrics.evaluate import MINILM_LAYERS, BERTScore, EvalConfig, num_layers_for, summarize


@pytest.fixture(scope="module")
def bertscore():
    return BERTScore(EvalConfig(device="cpu"))


def test_identical_text_scores_near_one(bertscore):
    [(p, r, f1)] = bertscore.score(
        ["The train leaves at nine and reaches Kyoto by noon."], ["The train leaves at nine and reaches Kyoto by noon."]
    )
    assert f1 > 0.99 and p > 0.99 and r > 0.99


def test_paraphrase_beats_unrelated(bertscore):
    reference = "Study for two hours every evening and review everything on Sunday."
    paraphrase, unrelated = bertscore.score(
        [
            "Spend two hours each night studying, with a full review on Sundays.",
            "The volcano erupted and covered the village in grey ash.",
        ],
        [reference, reference],
    )
    assert paraphrase[2] > unrelated[2]
    assert all(0.0 <= x <= 1.0 for x in paraphrase + unrelated)


def test_one_result_per_pair_and_empty_text_scores_zero(bertscore):
    candidates = ["A shadow.", "", "   ", "It is a piano."]
    references = ["The answer is a shadow.", "A map.", "A map.", ""]
    scores = bertscore.score(candidates, references)
    assert len(scores) == len(candidates)
    assert scores[1] == scores[2] == scores[3] == (0.0, 0.0, 0.0)
    assert scores[0][2] > 0.5
    assert bertscore.score([], []) == []


def test_mismatched_lengths_are_refused(bertscore):
    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        bertscore.score(["a", "b"], ["a"])


def test_describe_names_model_and_layer(bertscore):
    described = bertscore.describe()
    assert described["num_layers"] == MINILM_LAYERS
    assert "MiniLM" in described["model"] and described["rescaled"] is False


def test_layer_defaults():
    assert num_layers_for(EvalConfig()) == MINILM_LAYERS
    assert num_layers_for(EvalConfig(model="roberta-large")) == 17
    assert num_layers_for(EvalConfig(model="microsoft/deberta-xlarge-mnli")) == 40
    assert num_layers_for(EvalConfig(model="roberta-large", num_layers=9)) == 9
    with pytest.raises(ValueError, match="num_layers"):
        num_layers_for(EvalConfig(model="someone/unknown-model"))


def test_summarize_means_per_agent_and_overall_with_cis():
    from ms.common.stats import mean_ci

    rows = [
        {"agent": "pun", "P": 0.8, "R": 0.6, "F1": 0.7, "ref_logprob": -1.5},
        {"agent": "pun", "P": 0.4, "R": 0.2, "F1": 0.3, "ref_logprob": -2.5},
        {"agent": "riddle", "P": 0.3, "R": 0.4, "F1": 0.2},
    ]
    summary = summarize(rows)
    pun = summary["per_agent"]["pun"]
    assert {m: pun[m] for m in ("P", "R", "F1", "ref_logprob")} == pytest.approx(
        {"P": 0.6, "R": 0.4, "F1": 0.5, "ref_logprob": -2.0}
    )
    assert pun["n"] == {"P": 2, "R": 2, "F1": 2, "ref_logprob": 2}
    assert pun["ci"]["P"] == [None, None]  # two questions: too few for an interval
    estimate = mean_ci([0.8, 0.4, 0.3])
    assert summary["overall"]["ci"]["P"] == [estimate.lo, estimate.hi] and estimate.lo < 0.5 < estimate.hi
    riddle = summary["per_agent"]["riddle"]
    assert "ref_logprob" not in riddle  # not measured: absent, never 0
    assert riddle["ci"]["P"] == [None, None]  # one question: no interval
    # n counts the values measured, not the rows: the riddle row has no ref_logprob.
    assert summary["overall"]["n"] == {"P": 3, "R": 3, "F1": 3, "ref_logprob": 2}
    assert summary["overall"]["ref_logprob"] == pytest.approx(-2.0)
    assert summarize([]) == {"overall": {"n": {}, "ci": {}}, "per_agent": {}}
