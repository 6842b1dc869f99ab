"""Each retriever's and each memory policy's own settings: one dataclass per registered option that has
any, extending the section every option of its group shares (ms.config.RetrieverConfig,
ms.config.MemoryConfig), registered as the schema of its option in the `retriever` and `memory` groups
(ms.config.options says how); bm25 and random retrievers and the plain policy declare nothing of their own.

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from dataclasses import dataclass, field
from typing import Any, Optional

from ms.config.fields import setting
from ms.config.schema import MemoryConfig, RetrieverConfig

# How memory vectors follow a trained encoder (see ms.retrieval.dense): re-encoded after every step,
# after every n steps, once a per-step budget of re-encoded memories covers the scope, or never,
# because only a separate query encoder is trained.
REFRESH_POLICIES = ("full", "every_n", "budget", "query_tower")
# How a dense search finds its top k (ms.retrieval.dense): one exact matrix product over the scope,
# or, in scopes of at least retriever.ann_min_size memories, an HNSW graph (ms.retrieval.ann).
INDEXES = ("exact", "ann")
ANN_MIN_SIZE, ANN_EF = 50_000, 128  # the defaults of retriever.ann_min_size and ann_ef: why, beside them
AGE_UNITS = ("steps", "hours")  # what the composite's recency counts age in


@dataclass
class CompositeConfig:
    importance_weight: float = setting(1.0, ge=0.0)
    recency_weight: float = setting(1.0, ge=0.0)
    similarity_weight: float = setting(1.0, ge=0.0)
    # A memory's measured utility (ms.gates.replay), as logistic(utility / utility_scale) in (0, 1); an
    # unmeasured memory sits at 0.5. 0 leaves rankings as they were before utility was kept.
    utility_weight: float = setting(0.0, ge=0.0)
    utility_scale: float = setting(0.05, gt=0.0)  # nats per token that move the term from 0.5 to 0.73
    candidates: int = setting(20, ge=1)  # dense top-N re-ranked per query (raised to k when k is larger)
    decay: float = setting(0.995, gt=0.0, le=1.0)  # recency = decay ** age
    age_unit: str = setting("steps", choices=AGE_UNITS)  # steps: pool steps (stream batches) | hours: wall-clock time
    # Importance of a memory with neither a rubric score nor an LLM-assigned importance (seed pairs
    # under the plain policy): the middle of the scale, so it neither outranks nor trails graded
    # memories by default.
    default_importance: float = setting(0.5, ge=0.0, le=1.0)
    debug: bool = False  # log every query's candidate table (see `format_ranking`)

    def problems(self):
        """Cross-field limits (see ms.loop.validation): with every weight 0 all candidates tie."""
        if self.importance_weight == self.recency_weight == self.similarity_weight == self.utility_weight == 0:
            yield "similarity_weight", "the four weights are all 0; give at least one a positive weight"


@dataclass
class StmLtmConfig:
    capacity: int = setting(5, ge=1)  # short-term items per agent before its store is consolidated
    interval: int = setting(3, ge=1)  # steps an item may wait in short-term memory before consolidation
    threshold: float = setting(0.5, ge=-1.0, le=1.0)  # cosine a short-term item needs to be retrieved for a query...
    importance_override: float = setting(0.8, ge=0.0, le=1.0)  # ...unless its importance is above this
    group_similarity: float = setting(0.6, ge=-1.0, le=1.0)  # cosine that puts short-term items in one group
    default_importance: float = setting(0.5, ge=0.0, le=1.0)  # when the LLM's importance reply holds no number
    importance_tokens: int = setting(8, ge=1)
    summary_tokens: int = setting(256, ge=1)
    # Items whose measured utility (ms.gates.replay) is above this move to long-term memory verbatim, never
    # summarized; the rest are grouped lowest utility first. None: utility plays no part.
    keep_above: Optional[float] = None


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
