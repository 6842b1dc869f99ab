"""Retrieval strategies behind one interface: `retrieve(query, scope, k) -> memories`; the encoder,
memory train (training), and the memory policies (memory: how admitted pairs enter the pool and how
retrieval sees them)."""

from dataclasses import fields
from typing import Callable

from ms.config.options import settings_of
from ms.config.parts import RETRIEVERS
from ms.config.schema import AT_TEST, RetrieverConfig
from ms.pool import Pool
from ms.retrieval.base import Built, Retriever


def build_retriever(
    cfg, pool: Pool, name: str | None = None, learned: bool | None = None, clock: Callable[[], int] | None = None
) -> Built:
    """The retriever `cfg.name` names (ms.config.parts.RETRIEVERS), by its class's `build`. `cfg` is the
    retriever section, typed by its option's settings (ms.retrieval.settings); `name`, when given,
    replaces its name, and is built on `cfg` where `cfg` holds that retriever's settings, else on that
    retriever's defaults (retriever.at_test=dense_frozen under retriever=bm25: the encoder as shipped).
    `learned` replaces `learn` (an encoder that is never trained needs no refresh policy; a retriever
    without `learn` learns nothing). `clock` gives the composite its current pool step; the composite
    built here marks nothing, since the run marks what the stream retrieves itself and evaluation must
    not change the pool the stream goes on to use."""
    name = name or cfg.name
    cfg = _settings_for(cfg, name)
    learned = bool(getattr(cfg, "learn", False)) if learned is None else learned
    return RETRIEVERS.load(name).build(cfg, pool, learned=learned, clock=clock)


def _settings_for(cfg, name: str):
    """`cfg` where it declares every setting of retriever `name` (dense's under composite), else `name`'s
    own settings at their defaults, with `cfg`'s shared ones (its seed)."""
    kind = settings_of("retriever", name)
    if all(hasattr(cfg, f.name) for f in fields(kind)):
        return cfg
    return kind(**{f.name: getattr(cfg, f.name) for f in fields(RetrieverConfig)} | {"name": name})


def at_test_retriever(at_test: str | None) -> str | None:
    """The registered retriever (RETRIEVERS) a `retriever.at_test` choice names: dense_frozen is the dense
    one, its encoder as shipped (built untrained: build_test_retriever); None is none."""
    return "dense" if at_test == "dense_frozen" else at_test


def build_test_retriever(cfg, pool: Pool) -> Retriever:
    """The retriever `retriever.at_test` names, untrained."""
    if cfg.at_test not in AT_TEST:
        raise ValueError(f"unknown retriever.at_test '{cfg.at_test}'; choose one of {', '.join(AT_TEST)}")
    return build_retriever(cfg, pool, name=at_test_retriever(cfg.at_test), learned=False).retriever
