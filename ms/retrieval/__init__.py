"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`."""

from __future__ import annotations

from ms.pool import Pool
from ms.retrieval.base import Retriever

RETRIEVERS = ("dense", "composite", "bm25", "random")


def build_retriever(cfg, pool: Pool) -> Retriever:
    """`cfg` is a RetrieverConfig."""
    if cfg.name in ("dense", "composite"):
        from ms.retrieval.dense import DenseRetriever
        from ms.retrieval.encoder import Encoder

        dense = DenseRetriever(pool, Encoder(cfg.encoder))
        if cfg.name == "dense":
            return dense
        from ms.retrieval.composite import CompositeRetriever

        return CompositeRetriever(dense, cfg.composite)
    if cfg.name == "bm25":
        from ms.retrieval.bm25 import BM25Retriever

        return BM25Retriever(pool)
    if cfg.name == "random":
        from ms.retrieval.random import RandomRetriever

        return RandomRetriever(pool, seed=cfg.seed)
    raise ValueError(f"unknown retriever.name '{cfg.name}'; choose one of {', '.join(RETRIEVERS)}")
