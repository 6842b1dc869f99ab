"""Memory train: candidate labels, the v/2 + v/2 split, and BCE steps on the real encoder."""

from __future__ import annotations

import pytest
import torch
from fakes import FakeLM

from ms.agents import PromptTemplate
from ms.config import PromptConfig
from ms.pool import Pool
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.training import LabelledPair, Labeller, RetrieverTrainer, TrainConfig, parse_probability, split_labels

TEMPLATE = PromptTemplate(**PromptConfig().__dict__)


def test_split_labels_takes_lowest_as_positive_and_highest_as_negative():
    p_not = [0.9, 0.1, 0.5, 0.3, 0.99, 0.2, 0.7, 0.05, 0.6, 0.4]
    positives, negatives = split_labels(p_not, 6)
    assert sorted(p_not[i] for i in positives) == [0.05, 0.1, 0.2]
    assert sorted(p_not[i] for i in negatives) == [0.7, 0.9, 0.99]
    few_pos, few_neg = split_labels([0.3, 0.8, 0.5], 6)  # too few candidates: never overlap
    assert few_pos == [0] and few_neg == [1]
    assert split_labels([0.4], 6) == ([], [])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("0.7", 0.7),
        ("Probability: .35", 0.35),
        ("70%", 0.7),
        ("I think 0.2.", 0.2),
        ("about 3 or 0.6", 0.6),
        ("", None),
        ("no idea", None),
    ],
)
def test_parse_probability(text, expected):
    assert parse_probability(text) == (pytest.approx(expected) if expected is not None else None)


def test_labeller_falls_back_to_verbalized(tmp_path):
    pool = Pool(tmp_path / "p.sqlite")
    pool.add(
        [{"scope": "s", "agent": "riddle", "domain": "logic", "question": "q", "answer": "piano", "origin": "seed"}],
        step=0,
    )
    memory = pool.memories("s")[0]
    no_scores = FakeLM({"piano": "0.8"}, default="0.1")  # only generates (like an API): the labeller must fall back
    labeller = Labeller(no_scores, TEMPLATE, "likelihood")
    assert labeller.method == "verbalized"
    assert labeller.p_not([("riddle", "What has keys?", "A piano", memory)]) == [pytest.approx(0.2)]


def test_likelihood_labels_follow_the_model(smollm2, tmp_path):
    pool = Pool(tmp_path / "p.sqlite")
    pool.add(
        [
            {"scope": "logic", "agent": "riddle", "domain": "logic", "question": q, "answer": a, "origin": "seed"}
            for q, a in [("What is the capital of Italy?", "Rome"), ("Name a fruit.", "A banana")]
        ],
        step=0,
    )
    helpful, unrelated = pool.memories("logic")
    labeller = Labeller(smollm2, TEMPLATE, "likelihood")
    p_not = labeller.p_not([("riddle", "What is the capital of France?", "Paris", m) for m in (helpful, unrelated)])
    assert all(0.0 <= p <= 1.0 for p in p_not)
    assert p_not[0] < p_not[1]  # the analogous example makes the right answer likelier


def test_bce_steps_raise_positive_cosines_relative_to_negatives(tmp_path):
    from ms.retrieval.encoder import Encoder

    torch.manual_seed(0)
    pool = Pool(tmp_path / "p.sqlite")
    dense = DenseRetriever(pool, Encoder())
    trainer = RetrieverTrainer(TrainConfig(lr=5e-5, replay_per_step=0), dense, BM25Retriever(pool), labeller=None)
    # Synthetic labels that contradict plain topical similarity: the retriever must learn them.
    queries = ["Write a poem about the sea.", "Plan a trip to Rome.", "Solve this riddle about time."]
    positives = ["A recipe for lemon cake.", "How to change a bicycle tyre.", "Tips for growing tomatoes."]
    negatives = ["Waves crash on the ocean shore.", "Rome's Colosseum and Vatican tours.", "Clocks and hours riddle."]
    pairs = [LabelledPair(q, m, 1.0, 0.1) for q, m in zip(queries, positives)] + [
        LabelledPair(q, m, 0.0, 0.9) for q, m in zip(queries, negatives)
    ]

    def margin() -> float:
        with torch.no_grad():
            q = dense.encoder.encode(queries)
            return float(
                ((q * dense.encoder.encode(positives)).sum(-1) - (q * dense.encoder.encode(negatives)).sum(-1)).mean()
            )

    before = margin()
    version = dense.encoder_version
    losses = [trainer.step(pairs) for _ in range(8)]
    assert margin() > before + 0.05
    assert losses[-1] < losses[0]
    assert dense.encoder_version == version + 8  # cached embeddings are refreshed after each step
    trainer.save(tmp_path / "retriever")
    assert (tmp_path / "retriever" / "head.pt").exists() and (tmp_path / "retriever" / "config.json").exists()


def test_a_step_recomputing_activations_is_the_step_that_keeps_them(tmp_path):
    """The trainer has the encoder recompute its activations in the backward pass, to bound a
    step's memory; dropout's masks are replayed, so the step's loss and weights are the same to
    the bit as with every activation kept."""
    from ms.retrieval.encoder import Encoder

    pool = Pool(tmp_path / "p.sqlite")
    pairs = [
        LabelledPair("Write a poem about the sea at night, with a lighthouse.", "Waves on the shore.", 1.0, 0.1),
        LabelledPair("Plan a three-day trip to Rome.", "A recipe for lemon cake with a glaze.", 0.0, 0.9),
        LabelledPair("What has keys but opens no locks?", "A piano.\nIt has keys.", 1.0, 0.2),
    ]
    steps = []
    for recompute in (True, False):
        torch.manual_seed(0)
        dense = DenseRetriever(pool, Encoder())
        trainer = RetrieverTrainer(TrainConfig(replay_per_step=0), dense, BM25Retriever(pool), labeller=None)
        net = dense.encoder.net
        assert any(getattr(m, "gradient_checkpointing", False) for m in net.modules())
        if not recompute:  # transformers 5 names it activation_checkpointing_disable
            (getattr(net, "activation_checkpointing_disable", None) or net.gradient_checkpointing_disable)()
            assert not any(getattr(m, "gradient_checkpointing", False) for m in net.modules())
        torch.manual_seed(1)  # the same dropout masks
        loss = trainer.step(pairs)
        steps.append((loss, {k: v.clone() for k, v in dense.encoder.state_dict().items()}))
    (recomputed, weights), (kept, reference) = steps
    assert recomputed == kept
    assert all(torch.equal(weights[k], reference[k]) for k in reference)
    assert not all(torch.equal(weights[k], Encoder().state_dict()[k]) for k in reference)  # the step moved them


def test_replay_buffer_is_bounded_and_mixed_in(tmp_path):
    from ms.retrieval.encoder import Encoder

    pool = Pool(tmp_path / "p.sqlite")
    trainer = RetrieverTrainer(
        TrainConfig(replay_size=5, replay_per_step=3),
        DenseRetriever(pool, Encoder()),
        BM25Retriever(pool),
        labeller=None,
    )
    for i in range(4):
        trainer.step([LabelledPair(f"q{i}", f"m{i}", 1.0, 0.1), LabelledPair(f"q{i}", f"n{i}", 0.0, 0.9)])
    assert len(trainer.replay) == 5
    assert trainer.replay[-1].memory == "n3"


def test_label_mines_bm25_candidates_without_the_pair_itself(tmp_path):
    from ms.retrieval.encoder import Encoder

    pool = Pool(tmp_path / "p.sqlite")
    ids = pool.add(
        [
            {
                "scope": "plan",
                "agent": "study",
                "domain": "plan",
                "question": f"Study plan {i} for exams",
                "answer": f"Plan {i}",
                "origin": "seed",
            }
            for i in range(8)
        ],
        step=0,
    )
    seen = []

    class Recorder:
        method = "likelihood"

        def p_not(self, jobs):
            seen.extend(jobs)
            return [i / len(jobs) for i in range(len(jobs))]

    trainer = RetrieverTrainer(
        TrainConfig(candidates=5, labelled=4), DenseRetriever(pool, Encoder()), BM25Retriever(pool), Recorder()
    )
    pairs, shown = trainer.label([("study", "plan", "Study plan 3 for exams", "Plan 3", ids[3])])
    assert shown == {}  # train.utility_from_labels is off
    assert len(seen) == 5 and ids[3] not in {m.id for *_, m in seen}
    assert [p.label for p in pairs] == [1.0, 1.0, 0.0, 0.0]
    assert [p.p_not for p in pairs] == [0.0, 0.2, 0.6, 0.8]
