"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`."""

from __future__ import annotations

from ms.pool import Pool
from ms.retrieval.base import Retriever

RETRIEVERS = ("dense", "composite", "bm25", "random")
AT_TEST = ("bm25", "random", "dense_frozen")
# How memory vectors follow a trained encoder (see ms.retrieval.dense): re-encoded after every step,
# after every n steps, once a per-step budget of re-encoded memories covers the scope, or never,
# because only a separate query encoder is trained.
REFRESH_POLICIES = ("full", "every_n", "budget", "query_tower")


def build_retriever(cfg, pool: Pool, name: str | None = None, learned: bool | None = None) -> Retriever:
    """`cfg` is a RetrieverConfig; `name`, when given, replaces its name, and `learned` its `learn`
    (an encoder that is never trained needs no refresh policy)."""
    name = name or cfg.name
    learned = cfg.learn if learned is None else learned
    if name in ("dense", "composite"):
        from ms.retrieval.dense import DenseRetriever
        from ms.retrieval.encoder import Encoder

        refresh = cfg.refresh if learned else "full"
        if refresh not in REFRESH_POLICIES:  # before the encoder loads
            raise ValueError(f"unknown retriever.refresh '{refresh}'; choose one of {', '.join(REFRESH_POLICIES)}")
        dense = DenseRetriever(pool, Encoder(cfg.encoder), refresh, cfg.refresh_every, cfg.refresh_budget)
        if name == "dense":
            return dense
        from ms.retrieval.composite import CompositeRetriever

        return CompositeRetriever(dense, cfg.composite)
    if name == "bm25":
        from ms.retrieval.bm25 import BM25Retriever

        return BM25Retriever(pool)
    if name == "random":
        from ms.retrieval.random import RandomRetriever

        return RandomRetriever(pool, seed=cfg.seed)
    raise ValueError(f"unknown retriever.name '{name}'; choose one of {', '.join(RETRIEVERS)}")


def build_test_retriever(cfg, pool: Pool) -> Retriever:
    """The retriever `retriever.at_test` names; dense_frozen is the encoder as shipped, untrained."""
    if cfg.at_test not in AT_TEST:
        raise ValueError(f"unknown retriever.at_test '{cfg.at_test}'; choose one of {', '.join(AT_TEST)}")
    return build_retriever(cfg, pool, name="dense" if cfg.at_test == "dense_frozen" else cfg.at_test, learned=False)
