"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ms.config.schema import ANN_EF, ANN_MIN_SIZE, AT_TEST, INDEXES, REFRESH_POLICIES, RETRIEVERS
from ms.pool import Pool
from ms.retrieval.base import Retriever

if TYPE_CHECKING:  # the dense retriever imports torch; a type needs no import at run time
    from ms.retrieval.dense import DenseRetriever


class Built(NamedTuple):
    """What the loop needs of a retriever: the retriever, and the dense part that memory train
    fine-tunes (None where nothing learns)."""

    retriever: Retriever
    trainable: Optional["DenseRetriever"]


def build_retriever(cfg, pool: Pool, name: str | None = None, learned: bool | None = None,
                    clock: Callable[[], int] | None = None) -> Built:
    """`cfg` is a RetrieverConfig; `name`, when given, replaces its name, and `learned` its `learn`
    (an encoder that is never trained needs no refresh policy). `clock` gives the composite its
    current pool step; the composite built here marks nothing, since the run marks what the stream
    retrieves itself and evaluation must not change the pool the stream goes on to use."""
    name = name or cfg.name
    learned = cfg.learn if learned is None else learned
    if name in ("dense", "composite"):
        from ms.retrieval.dense import DenseRetriever
        from ms.retrieval.encoder import Encoder

        refresh = cfg.refresh if learned else "full"
        if refresh not in REFRESH_POLICIES:  # before the encoder loads
            raise ValueError(f"unknown retriever.refresh '{refresh}'; choose one of {', '.join(REFRESH_POLICIES)}")
        if cfg.index == "ann":  # before the encoder loads, too
            from ms.retrieval.ann import require_faiss

            require_faiss()
        dense = DenseRetriever(pool, Encoder(cfg.encoder), refresh, cfg.refresh_every, cfg.refresh_budget,
                               index=cfg.index, ann_min_size=cfg.ann_min_size, ann_ef=cfg.ann_ef)
        trainable = dense if learned else None
        if name == "dense":
            return Built(dense, trainable)
        from ms.retrieval.composite import CompositeRetriever

        return Built(CompositeRetriever(dense, cfg.composite, current_step=clock or 0, mark=False), trainable)
    if name == "bm25":
        from ms.retrieval.bm25 import BM25Retriever

        return Built(BM25Retriever(pool), None)
    if name == "random":
        from ms.retrieval.random import RandomRetriever

        return Built(RandomRetriever(pool, seed=cfg.seed), None)
    raise ValueError(f"unknown retriever.name '{name}'; choose one of {', '.join(RETRIEVERS)}")


def build_test_retriever(cfg, pool: Pool) -> Retriever:
    """The retriever `retriever.at_test` names; dense_frozen is the encoder as shipped, untrained."""
    if cfg.at_test not in AT_TEST:
        raise ValueError(f"unknown retriever.at_test '{cfg.at_test}'; choose one of {', '.join(AT_TEST)}")
    name = "dense" if cfg.at_test == "dense_frozen" else cfg.at_test
    return build_retriever(cfg, pool, name=name, learned=False).retriever
