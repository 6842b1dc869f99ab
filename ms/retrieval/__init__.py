"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`; the encoder,
memory train (training), and the memory policies (memory: how admitted pairs enter the pool and how
retrieval sees them)."""

from __future__ import annotations

from typing import Callable

from ms.config.parts import RETRIEVERS
from ms.config.schema import AT_TEST
from ms.pool import Pool
from ms.retrieval.base import Built, Retriever


def build_retriever(
    cfg, pool: Pool, name: str | None = None, learned: bool | None = None, clock: Callable[[], int] | None = None
) -> Built:
    """The retriever `cfg.name` names (ms.config.parts.RETRIEVERS), by its class's `build`. `cfg` is a
    RetrieverConfig; `name`, when given, replaces its name, and `learned` its `learn` (an encoder that
    is never trained needs no refresh policy). `clock` gives the composite its current pool step; the
    composite built here marks nothing, since the run marks what the stream retrieves itself and
    evaluation must not change the pool the stream goes on to use."""
    name = name or cfg.name
    learned = cfg.learn if learned is None else learned
    return RETRIEVERS.load(name).build(cfg, pool, learned=learned, clock=clock)


def at_test_retriever(at_test: str | None) -> str | None:
    """The registered retriever (RETRIEVERS) a `retriever.at_test` choice names: dense_frozen is the dense
    one, its encoder as shipped (built untrained: build_test_retriever); None is none."""
    return "dense" if at_test == "dense_frozen" else at_test


def build_test_retriever(cfg, pool: Pool) -> Retriever:
    """The retriever `retriever.at_test` names, untrained."""
    if cfg.at_test not in AT_TEST:
        raise ValueError(f"unknown retriever.at_test '{cfg.at_test}'; choose one of {', '.join(AT_TEST)}")
    return build_retriever(cfg, pool, name=at_test_retriever(cfg.at_test), learned=False).retriever
