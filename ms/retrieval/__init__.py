"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`."""

from __future__ import annotations

from ms.pool import Pool
from ms.retrieval.base import Retriever

RETRIEVERS = ("dense", "composite", "bm25", "random")
AT_TEST = ("bm25", "random", "dense_frozen")


def build_retriever(cfg, pool: Pool, name: str | None = None) -> Retriever:
    """`cfg` is a RetrieverConfig; `name`, when given, replaces its name."""
    name = name or cfg.name
    if name in ("dense", "composite"):
        from ms.retrieval.dense import DenseRetriever
        from ms.retrieval.encoder import Encoder

        dense = DenseRetriever(pool, Encoder(cfg.encoder))
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
    return build_retriever(cfg, pool, name="dense" if cfg.at_test == "dense_frozen" else cfg.at_test)
