"""Each retriever's and each memory policy's own settings: one dataclass per registered option that has
any, extending the section every option of its group shares (ms.config.RetrieverConfig: the name, the
test questions' retriever and the seed of random draws; ms.config.MemoryConfig: the policy and what every
policy reads), registered as the schema of its option in the `retriever` and `memory` groups
(ms.config.options; conf/retriever/<name>.yaml and conf/memory/<policy>.yaml name it in their defaults
list). A key an option does not declare is refused at composition under that option, in one line
(ms.cli.compose); bm25 and random retrievers and the plain policy declare nothing of their own.

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ms.config.fields import setting
from ms.config.schema import (
    ANN_EF,
    ANN_MIN_SIZE,
    INDEXES,
    REFRESH_POLICIES,
    CompositeConfig,
    MemoryConfig,
    RetrieverConfig,
    StmLtmConfig,
)


@dataclass
class DenseSettings(RetrieverConfig):
    """retriever=dense: the bi-encoder, fine-tuned by memory train as the pool grows unless `learn` is off
    (conf/retriever/dense_frozen.yaml)."""

    encoder: Optional[str] = None  # None: the packaged all-MiniLM-L6-v2; or any HF encoder
    learn: bool = True  # keep fine-tuning the encoder with memory train
    # How memory vectors follow memory train (see ms.retrieval.dense): full re-encodes the pool after every
    # step; every_n after every `refresh_every` steps, using stale vectors meanwhile; budget once the steps
    # since the last refresh x `refresh_budget` cover the scope (full while a scope holds <= refresh_budget
    # memories, bounded cost per step beyond); query_tower trains a separate query encoder, so memory
    # vectors never go stale. budget is the default: it is full at every pool size whose quality was
    # measured (results/refresh_offline) and keeps a step's cost flat as the pool grows (results/benchmarks).
    refresh: str = setting("budget", choices=REFRESH_POLICIES)
    refresh_every: int = setting(8, ge=1)
    refresh_budget: int = setting(1000, ge=1)  # memories re-encoded per training step, on average
    # exact: one matrix product per search, exact at every size (about 15 ms per search at 100k on this
    # 2-core CPU, linear in the scope). ann: an approximate HNSW graph (faiss-cpu, the `ann` extra) for
    # scopes of at least ann_min_size searchable memories; smaller scopes stay exact.
    index: str = setting("exact", choices=INDEXES)
    # 50,000: below it an exact search costs under about 8 ms, a fifth of encoding the query with MiniLM
    # here (about 40 ms), so an approximate one saves little and would give up exactness and the graph's
    # memory and build time; above it exact search grows linearly (an estimated 150 ms at 1M, ten times
    # the 100k figure).
    ann_min_size: int = setting(ANN_MIN_SIZE, ge=1)
    # HNSW search effort (faiss efSearch): candidates kept while walking the graph. 128 gave recall@10
    # 0.999 at 100k structured vectors (0.997 at 64) in the library comparison, a margin for 1M (README,
    # "Approximate index"; benchmarks/retrieval.py --index ann measures the frontier).
    ann_ef: int = setting(ANN_EF, ge=1)
    # Keep the fine-tuned encoder in the run folder (retriever/, about 87 MB with MiniLM). Nothing in ms
    # reads it back: tables, claims and figures come from the run's JSON files. On by default, as a lone
    # run's trained retriever cannot be had without running it again; the *_offline sweeps turn it off
    # (conf/experiment/offline.yaml).
    save: bool = True

    def problems(self):
        """index=ann needs faiss (the `ann` extra): said before the encoder loads (see ms.loop.validation)."""
        if self.index == "ann":
            from ms.retrieval.ann import ann_problem

            if missing := ann_problem():
                yield "index", missing

    @classmethod
    def encoder_of(cls, section: Any) -> Optional[str]:
        """The text encoder under the retriever section `section`: its own where its retriever encodes
        (dense, composite), else the packaged MiniLM (None), which memory=stm_ltm and
        retriever.at_test=dense_frozen encode with under any retriever."""
        return getattr(section, "encoder", cls.encoder)

    @classmethod
    def saves(cls, section: Any) -> bool:
        """Whether the run keeps its fine-tuned encoder: `save` where its retriever has one to keep."""
        return bool(getattr(section, "save", False))


@dataclass
class CompositeSettings(DenseSettings):
    """retriever=composite: dense top-N candidates re-ranked by importance, recency, similarity and
    measured utility (ms.retrieval.composite); its cosines are dense's, whose settings it shares."""

    composite: CompositeConfig = field(default_factory=CompositeConfig)


@dataclass
class StmLtmSettings(MemoryConfig):
    """memory=stm_ltm: a short-term store per agent, consolidated into long-term memory by LLM summaries
    (ms.retrieval.memory)."""

    stm_ltm: StmLtmConfig = field(default_factory=StmLtmConfig)
