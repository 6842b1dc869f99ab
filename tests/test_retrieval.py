"""Retrievers over a real SQLite pool, with the real packaged encoder for the dense one."""

from __future__ import annotations

import pytest

from ms.pool import Pool
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.random import RandomRetriever

FACTS = [
    ("How do I bake sourdough bread?", "Feed the starter, mix flour and water, fold, proof overnight, bake hot."),
    ("Plan a week in Kyoto on a budget.", "Stay in a guesthouse, buy a bus pass, visit temples early."),
    ("Write a limerick about a cat.", "A cat with a hat on its head / declined to get out of its bed."),
    ("What has keys but opens no locks?", "A piano: its keys play notes instead of opening doors."),
    ("Make a beginner running plan.", "Run-walk three days a week, add five minutes each week, rest between."),
]


@pytest.fixture
def pool(tmp_path):
    p = Pool(tmp_path / "pool.sqlite")
    p.add(
        [
            {"scope": "misc", "agent": "study", "domain": "plan", "question": q, "answer": a, "origin": "seed"}
            for q, a in FACTS
        ],
        step=0,
    )
    p.add(
        [
            {
                "scope": "other",
                "agent": "pun",
                "domain": "logic",
                "question": "Bread riddle?",
                "answer": "sourdough bread",
                "origin": "seed",
            }
        ],
        step=0,
    )
    return p


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder()


def test_bm25_finds_the_matching_memory_and_respects_exclude(pool):
    bm25 = BM25Retriever(pool)
    top = bm25.retrieve("sourdough bread recipe", "misc", 2)
    assert top[0].question == FACTS[0][0]
    assert all(m.scope == "misc" for m in top)
    again = bm25.retrieve("sourdough bread recipe", "misc", 2, exclude=[top[0].id])
    assert top[0].id not in [m.id for m in again] and len(again) == 2


def test_bm25_never_returns_the_pair_itself_when_excluded(pool):
    bm25 = BM25Retriever(pool)
    for memory in pool.memories("misc"):
        mined = bm25.retrieve(f"{memory.question} {memory.answer}", "misc", 10, exclude=[memory.id])
        assert memory.id not in {m.id for m in mined}
        assert len(mined) == len(FACTS) - 1


def test_bm25_sees_new_memories(pool):
    bm25 = BM25Retriever(pool)
    assert bm25.retrieve("volcano", "misc", 1)[0].question != "Volcano facts?"
    pool.add(
        [
            {
                "scope": "misc",
                "agent": "study",
                "domain": "plan",
                "question": "Volcano facts?",
                "answer": "Volcanoes vent magma.",
                "origin": "stream",
            }
        ],
        step=1,
    )
    assert bm25.retrieve("volcano", "misc", 1)[0].question == "Volcano facts?"


def test_dense_retrieves_by_meaning_and_caches_embeddings(pool, encoder):
    dense = DenseRetriever(pool, encoder)
    top = dense.retrieve("Which instrument has black and white keys?", "misc", 1)
    assert top[0].question == FACTS[3][0]
    assert dense.encoded == len(FACTS)
    dense.retrieve_batch(["jogging schedule for a novice", "cheap trip to Japan"], "misc", 2)
    assert dense.encoded == len(FACTS)  # nothing re-encoded
    pool.add(
        [
            {
                "scope": "misc",
                "agent": "study",
                "domain": "plan",
                "question": "Learn guitar chords",
                "answer": "Practice C, G and D daily.",
                "origin": "stream",
            }
        ],
        step=1,
    )
    found = dense.retrieve_batch(["jogging schedule for a novice", "cheap trip to Japan"], "misc", 2)
    assert dense.encoded == len(FACTS) + 1  # only the new memory
    assert found[0][0].question == FACTS[4][0] and found[1][0].question == FACTS[1][0]
    dense.encoder_changed()
    dense.retrieve("anything", "misc", 1)
    assert dense.encoded == 2 * (len(FACTS) + 1)  # a new encoder version re-encodes the scope


def test_dense_scores_are_cosines(pool, encoder):
    dense = DenseRetriever(pool, encoder)
    memories, scores = dense.similarities(["bread"], "misc")
    assert scores.shape == (1, len(memories))
    assert float(scores.max()) <= 1.0 + 1e-5 and float(scores.min()) >= -1.0 - 1e-5


def test_random_is_seeded_and_scoped(pool):
    a = [m.id for m in RandomRetriever(pool, seed=1).retrieve("x", "misc", 3)]
    b = [m.id for m in RandomRetriever(pool, seed=1).retrieve("x", "misc", 3)]
    assert a == b and len(set(a)) == 3
    assert RandomRetriever(pool).retrieve("x", "other", 5)[0].scope == "other"


def test_k_zero_and_empty_scope_return_nothing(pool, encoder):
    for retriever in (BM25Retriever(pool), DenseRetriever(pool, encoder), RandomRetriever(pool)):
        assert retriever.retrieve("bread", "misc", 0) == []
        assert retriever.retrieve("bread", "nobody", 3) == []


@pytest.mark.parametrize(
    "overrides, built",
    [
        (["retriever=bm25", "retriever.at_test=dense_frozen"], DenseRetriever),  # dense's defaults: bm25 has none
        (["retriever=composite", "retriever.at_test=random", "retriever.seed=4"], RandomRetriever),
        (["retriever=random", "retriever.at_test=bm25"], BM25Retriever),
    ],
)
def test_the_test_questions_retriever_is_built_whatever_the_streams_retriever_declares(pool, overrides, built):
    """retriever.at_test under any retriever: built on the section where it holds that retriever's settings
    (the shared seed), else on its own defaults (dense_frozen under bm25: the encoder as shipped, exact)."""
    from conftest import compose_config

    from ms.retrieval import build_retriever, build_test_retriever

    cfg = compose_config(overrides)
    retriever = build_test_retriever(cfg.retriever, pool)
    assert type(retriever) is built
    if built is DenseRetriever:
        assert (retriever.refresh, retriever.index_kind) == ("full", "exact")
    if built is RandomRetriever:
        assert retriever.rng.random() == RandomRetriever(pool, seed=4).rng.random()
    if cfg.retriever.name == "bm25":  # a section without `learn`: nothing to train
        assert build_retriever(cfg.retriever, pool).trainable is None
