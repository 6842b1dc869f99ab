"""Index refresh policies: how memory vectors follow memory train (full, every_n, budget, query_tower), and
the staleness every retrieval reports. Real packaged MiniLM, real SQLite pool."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import compose_config
from test_retrieval import FACTS

from ms.loop.validation import problems
from ms.pool import Pool
from ms.retrieval import build_retriever
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.encoder import Encoder
from ms.retrieval.settings import REFRESH_POLICIES
from ms.retrieval.training import LabelledPair, RetrieverTrainer, TrainConfig

MEMORIES = len(FACTS)


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as p:
        p.add(
            [
                {"scope": "misc", "agent": "study", "domain": "plan", "question": q, "answer": a, "origin": "seed"}
                for q, a in FACTS
            ],
            step=0,
        )
        yield p


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


def after_each_step(dense: DenseRetriever, steps: int) -> list[tuple[int, int]]:
    """Take `steps` training steps (as RetrieverTrainer reports them), retrieving after each:
    (memories encoded so far, index staleness the retrieval reported) per step."""
    seen = []
    for _ in range(steps):
        dense.encoder_changed()
        dense.retrieve("a cheap trip to Japan", "misc", 2)
        seen.append((dense.encoded, dense.state("misc")["index_staleness"]))
    return seen


def test_full_re_encodes_the_pool_after_every_step(pool, encoder):
    dense = DenseRetriever(pool, encoder, refresh="full")
    dense.retrieve("anything", "misc", 1)
    assert after_each_step(dense, 3) == [(2 * MEMORIES, 0), (3 * MEMORIES, 0), (4 * MEMORIES, 0)]
    assert dense.state("misc") == {"retriever_version": 3, "index_staleness": 0}


def test_every_n_re_encodes_exactly_every_n_steps(pool, encoder):
    dense = DenseRetriever(pool, encoder, refresh="every_n", refresh_every=3)
    dense.retrieve("anything", "misc", 1)
    assert dense.encoded == MEMORIES
    seen = after_each_step(dense, 7)
    assert [encoded for encoded, _ in seen] == [MEMORIES] * 2 + [2 * MEMORIES] * 3 + [3 * MEMORIES] * 2
    assert [stale for _, stale in seen] == [1, 2, 0, 1, 2, 0, 1]
    assert dense.refreshes == 2
    # A memory added while the index is stale is encoded once, by the encoder of the moment, and the
    # staleness (steps since the last full refresh) is what it was.
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
        step=8,
    )
    assert dense.retrieve("guitar practice", "misc", 1)[0].question == "Learn guitar chords"
    assert dense.encoded == 3 * MEMORIES + 1
    assert dense.state("misc") == {"retriever_version": 7, "index_staleness": 1}


def test_budget_is_full_while_the_scope_fits_and_every_ceil_size_over_budget_steps_beyond(pool, encoder):
    fits = DenseRetriever(pool, encoder, refresh="budget", refresh_budget=MEMORIES)
    fits.retrieve("anything", "misc", 1)
    assert after_each_step(fits, 3) == [(2 * MEMORIES, 0), (3 * MEMORIES, 0), (4 * MEMORIES, 0)]
    # A budget of a third of the scope (rounded up) re-encodes every third step: the same cost per
    # step, MEMORIES / 3, whatever the scope's size.
    third = DenseRetriever(pool, encoder, refresh="budget", refresh_budget=-(-MEMORIES // 3))
    third.retrieve("anything", "misc", 1)
    seen = after_each_step(third, 7)
    assert [encoded for encoded, _ in seen] == [MEMORIES] * 2 + [2 * MEMORIES] * 3 + [3 * MEMORIES] * 2
    assert [stale for _, stale in seen] == [1, 2, 0, 1, 2, 0, 1]


def test_query_tower_trains_queries_only_and_never_re_encodes_memories(pool):
    torch.manual_seed(0)
    dense = DenseRetriever(pool, Encoder(), refresh="query_tower")
    memory_calls = []
    encode = dense.encoder.encode
    dense.encoder.encode = lambda texts, *a, **kw: memory_calls.append(len(texts)) or encode(texts, *a, **kw)
    memory_weights = {name: p.clone() for name, p in dense.encoder.state_dict().items()}
    query_weights = {name: p.clone() for name, p in dense.query_encoder.state_dict().items()}
    trainer = RetrieverTrainer(TrainConfig(lr=5e-5, replay_per_step=0), dense, BM25Retriever(pool), labeller=None)
    pairs = [
        LabelledPair("Write a poem about the sea.", "A recipe for lemon cake.", 1.0, 0.1),
        LabelledPair("Write a poem about the sea.", "Waves crash on the ocean shore.", 0.0, 0.9),
    ]

    dense.retrieve("a cheap trip to Japan", "misc", 2)
    before = dense.query_vectors(["a cheap trip to Japan"])
    for _ in range(3):
        trainer.step(pairs)
        dense.retrieve("a cheap trip to Japan", "misc", 2)
    assert memory_calls == [MEMORIES]  # encoded once, at the first retrieval
    assert dense.encoded == MEMORIES and dense.refreshes == 0
    assert all(torch.equal(p, memory_weights[name]) for name, p in dense.encoder.state_dict().items())
    assert any(not torch.equal(p, query_weights[name]) for name, p in dense.query_encoder.state_dict().items())
    assert not torch.allclose(before, dense.query_vectors(["a cheap trip to Japan"]))
    assert dense.state("misc") == {"retriever_version": 3, "index_staleness": 0}


def test_refresh_is_a_config_key_a_sweep_can_range_over(pool):
    for policy in REFRESH_POLICIES:  # what `ms-run -m retriever.refresh=full,every_n,budget,query_tower` composes
        cfg = compose_config([f"retriever.refresh={policy}", "retriever.refresh_every=3"])
        assert (cfg.retriever.refresh, cfg.retriever.refresh_every) == (policy, 3)
        assert not problems(cfg)
    assert compose_config().retriever.refresh == "budget"
    bad = compose_config(["retriever.refresh=sometimes", "retriever.refresh_every=0", "retriever.refresh_budget=0"])
    named = {line.split("=")[0].split()[-1] for line in problems(bad)}  # "invalid setting KEY=VALUE: why"
    assert {"retriever.refresh", "retriever.refresh_every", "retriever.refresh_budget"} <= named
    with pytest.raises(ValueError, match="retriever.refresh"):  # before any model loads
        build_retriever(bad.retriever, pool)


@pytest.mark.slow
def test_every_prediction_and_decision_records_version_and_staleness(tmp_path, models_cache):
    from test_pipeline import TINY

    from ms.loop.pipeline import run

    # Evaluated by ref_logprob alone: the versions are recorded whatever measures the test answers.
    refresh = ["retriever.refresh=every_n", "retriever.refresh_every=2", "eval.metrics=[ref_logprob]"]
    cfg = compose_config(TINY + [f"cache_dir={models_cache}", *refresh])
    metrics = run(cfg, tmp_path)
    assert metrics["run"]["refresh"] == "every_n"
    for name in ("predictions.jsonl", "decisions.jsonl"):
        rows = [json.loads(line) for line in (tmp_path / name).open()]
        assert rows and all(isinstance(r["retriever_version"], int) and 0 <= r["index_staleness"] < 2 for r in rows), (
            name
        )
    # The stream trained the retriever, so the last fill's predictions used a later version.
    predictions = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert max(p["retriever_version"] for p in predictions) > 0
