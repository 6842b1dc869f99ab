"""The composite retriever: importance + recency + similarity over dense candidates.

A stand-in encoder gives every text a chosen cosine to the query, so the terms can be held equal
or set apart exactly (the airport case with the real encoder is in test_stm_ltm.py)."""

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ms.pool import Pool
from ms.retrieval import composite
from ms.retrieval.composite import CompositeConfig, CompositeRetriever, format_ranking
from ms.retrieval.dense import DenseRetriever

CONF = Path(__file__).resolve().parent.parent / "conf"
QUERY = "the query"


class AngleEncoder:
    """Maps the query to e1 and a memory whose question is in `cosines` to a unit vector at that
    cosine from it."""

    def __init__(self, cosines: dict[str, float]):
        self.cosines = cosines

    def encode(self, texts):
        rows = []
        for text in texts:
            c = 1.0 if text == QUERY else self.cosines[text.split("\n")[0]]
            rows.append([c, math.sqrt(1 - c * c)])
        return torch.tensor(rows)


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as p:
        yield p


def add(pool, question, step=0, **fields):
    [memory_id] = pool.add(
        [
            dict(
                scope="plan",
                agent="travel",
                domain="plan",
                question=question,
                answer=f"answer to {question}",
                origin="stream",
                **fields,
            )
        ],
        step=step,
    )
    return memory_id


def retriever(pool, cosines, step=0, **cfg):
    return CompositeRetriever(DenseRetriever(pool, AngleEncoder(cosines)), CompositeConfig(**cfg), current_step=step)


def ids(memories):
    return [m.id for m in memories]


def test_newer_memory_outranks_older_all_else_equal(pool):
    old = add(pool, "old", step=0, score=70)
    new = add(pool, "new", step=5, score=70)
    now = {"step": 5}
    r = CompositeRetriever(
        DenseRetriever(pool, AngleEncoder({"old": 0.6, "new": 0.6})), current_step=lambda: now["step"]
    )
    assert ids(r.retrieve(QUERY, "plan", k=1)) == [new]
    # Age counts from the later of adding and last retrieval: a fresh retrieval makes `old` the newer.
    pool.mark_retrieved([old], step=8)
    now["step"] = 8
    assert ids(r.retrieve(QUERY, "plan", k=2)) == [old, new]


def test_more_important_memory_wins_all_else_equal(pool):
    low = add(pool, "low", score=30)
    high = add(pool, "high", score=80)
    assert ids(retriever(pool, {"low": 0.5, "high": 0.5}).retrieve(QUERY, "plan", k=2)) == [high, low]


def test_importance_comes_from_score_then_llm_importance_then_default(pool):
    add(pool, "scored", score=80, importance=0.1)
    add(pool, "rated", importance=0.9)
    add(pool, "neither")
    rows = retriever(pool, {"scored": 0.9, "rated": 0.8, "neither": 0.7}, default_importance=0.25).explain(
        QUERY, "plan"
    )
    assert {r.memory.question: r.importance for r in rows} == pytest.approx(
        {"scored": 0.8, "rated": 0.9, "neither": 0.25}
    )


def test_zero_similarity_weight_ignores_cosine(pool):
    close = add(pool, "close", score=40)
    far = add(pool, "far", score=50)
    cosines = {"close": 0.9, "far": 0.1}
    assert ids(retriever(pool, cosines).retrieve(QUERY, "plan", k=2)) == [close, far]
    assert ids(retriever(pool, cosines, similarity_weight=0).retrieve(QUERY, "plan", k=2)) == [far, close]


@pytest.mark.parametrize("zeroed", ["importance_weight", "recency_weight", "similarity_weight"])
def test_a_zero_weight_removes_its_term(pool, zeroed):
    add(pool, "a", step=0, score=90)
    add(pool, "b", step=3, importance=0.2)
    weights = {"importance_weight": 1.0, "recency_weight": 1.0, "similarity_weight": 1.0, zeroed: 0.0}
    rows = retriever(pool, {"a": 0.3, "b": 0.7}, step=40, **weights).explain(QUERY, "plan")
    for r in rows:
        terms = {"importance_weight": r.importance, "recency_weight": r.recency, "similarity_weight": r.cosine}
        assert r.total == pytest.approx(sum(w * terms[name] for name, w in weights.items()))
    recency = {r.memory.question: r.recency for r in rows}
    assert recency == pytest.approx({"a": 0.995**40, "b": 0.995**37})


def test_negative_cosine_counts_as_zero(pool):
    add(pool, "opposite", score=50)
    [row] = retriever(pool, {"opposite": -0.8}).explain(QUERY, "plan")
    assert row.cosine == pytest.approx(-0.8)
    assert row.total == pytest.approx(0.5 + 1.0)


def test_only_dense_candidates_are_reranked(pool):
    similar = add(pool, "similar", score=10)
    important = add(pool, "important", score=100)
    cosines = {"similar": 0.9, "important": 0.2}
    assert ids(retriever(pool, cosines, candidates=2).retrieve(QUERY, "plan", k=1)) == [important]
    assert ids(retriever(pool, cosines, candidates=1).retrieve(QUERY, "plan", k=1)) == [similar]


def test_retrieval_marks_what_it_returns(pool):
    chosen = add(pool, "chosen", score=60)
    other = add(pool, "other", score=60)
    r = retriever(pool, {"chosen": 0.9, "other": 0.1}, step=7)
    r.explain(QUERY, "plan")
    assert [m.last_retrieved_step for m in pool.get([chosen, other])] == [None, None]
    assert ids(r.retrieve(QUERY, "plan", k=1)) == [chosen]
    assert [m.last_retrieved_step for m in pool.get([chosen, other])] == [7, None]
    r.mark = False
    r.current_step = 9
    r.retrieve_batch([QUERY], "plan", k=2)
    assert [m.last_retrieved_step for m in pool.get([chosen, other])] == [7, None]


def test_exclude_is_never_returned(pool):
    best = add(pool, "best", score=90)
    rest = add(pool, "rest", score=10)
    assert ids(retriever(pool, {"best": 0.9, "rest": 0.1}).retrieve(QUERY, "plan", k=2, exclude=[best])) == [rest]


def test_age_in_hours(pool, monkeypatch):
    add(pool, "memo", score=50)
    r = retriever(pool, {"memo": 0.5}, age_unit="hours")
    assert r.explain(QUERY, "plan")[0].recency == pytest.approx(1.0, abs=1e-4)
    later = composite.time.time() + 100 * 3600
    monkeypatch.setattr(composite.time, "time", lambda: later)
    assert r.explain(QUERY, "plan")[0].recency == pytest.approx(0.995**100, rel=1e-3)


def test_bad_settings_fail_loudly(pool):
    dense = DenseRetriever(pool, AngleEncoder({}))
    for bad in ({"age_unit": "days"}, {"recency_weight": -1}, {"candidates": 0}, {"default_importance": 2}):
        with pytest.raises(ValueError, match="composite"):
            CompositeRetriever(dense, CompositeConfig(**bad))


def test_format_ranking_lists_candidates_best_first(pool):
    add(pool, "worse", score=10)
    add(pool, "better " + "x" * 200, score=90)
    rows = retriever(pool, {"worse": 0.5, "better " + "x" * 200: 0.5}).explain(QUERY, "plan")
    lines = format_ranking(rows, width=40).splitlines()
    assert len(lines) == 3 and "content" in lines[0]
    assert "better" in lines[1] and lines[1].endswith("...") and "worse" in lines[2]
    assert f"{rows[0].total:6.3f}" in lines[1]


def test_config_file_matches_the_dataclass():
    raw = OmegaConf.load(CONF / "retriever" / "composite.yaml")
    assert raw.name == "composite"
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(CompositeConfig), raw.composite))
    assert cfg == CompositeConfig()
