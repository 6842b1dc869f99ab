"""The settings of the parts that need torch (the learned retriever's training, the memory policy,
the composite ranking), kept apart from that code so `ms.config` imports no torch: a bad setting is
reported by `ms.validation` in a second, before any heavy import (ms/cli.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ms.validation import setting


# ---- memory train (ms.training) ----

LABEL_METHODS = ("likelihood", "verbalized")


@dataclass
class TrainConfig:
    enabled: bool = True  # false: the dense retriever stays frozen
    candidates: int = setting(10, ge=2)  # n: BM25 candidates mined per accepted pair
    labelled: int = setting(6, ge=2)  # v: v/2 positives + v/2 negatives
    label_method: str = setting("likelihood", choices=LABEL_METHODS)
    lr: float = setting(2e-5, gt=0.0)  # encoder
    head_lr: float = setting(1e-2, gt=0.0)  # s and b
    init_scale: float = 10.0
    init_bias: float = -5.0
    replay_size: int = setting(2048, ge=0)  # labelled pairs kept for replay
    replay_per_step: int = setting(24, ge=0)  # replayed pairs mixed into each step
    steps: int = setting(1, ge=1)  # optimizer steps per update
    seed: int = 0
    # The verbalized label prompt, with {example}, {query} and {answer}; None: VERBALIZED_PROMPT.
    verbalized_prompt: Optional[str] = None
    backbone: Optional[str] = None  # a conf/backbone name to label with; None: the run's `backbone`

    def problems(self):
        """Cross-field limits (see ms.validation): v labelled candidates are picked from the n mined."""
        if self.labelled > self.candidates:
            yield "labelled", (f"must be at most train.candidates ({self.candidates}): "
                               f"v labelled are picked from n mined")


# ---- memory policy (ms.memory) ----

POLICIES = ("plain", "stm_ltm")


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


@dataclass
class MemoryConfig:
    policy: str = setting("plain", choices=POLICIES)
    # What a stream memory stores as its question: the query alone, or the whole prompt the agent
    # saw, retrieved examples included (the authors' code; protocol=paper).
    question: str = setting("query", choices=("query", "prompt"))
    stm_ltm: StmLtmConfig = field(default_factory=StmLtmConfig)


# ---- composite ranking (ms.retrieval.composite) ----

AGE_UNITS = ("steps", "hours")


@dataclass
class CompositeConfig:
    importance_weight: float = setting(1.0, ge=0.0)
    recency_weight: float = setting(1.0, ge=0.0)
    similarity_weight: float = setting(1.0, ge=0.0)
    candidates: int = setting(20, ge=1)  # dense top-N re-ranked per query (raised to k when k is larger)
    decay: float = setting(0.995, gt=0.0, le=1.0)  # recency = decay ** age
    age_unit: str = setting("steps", choices=AGE_UNITS)  # steps: pool steps (stream batches) | hours: wall-clock time
    # Importance of a memory with neither a rubric score nor an LLM-assigned importance (seed pairs
    # under the plain policy): the middle of the scale, so it neither outranks nor trails graded
    # memories by default.
    default_importance: float = setting(0.5, ge=0.0, le=1.0)
    debug: bool = False  # log every query's candidate table (see `format_ranking`)

    def problems(self):
        """Cross-field limits (see ms.validation): with every weight 0 all candidates tie."""
        if self.importance_weight == self.recency_weight == self.similarity_weight == 0:
            yield "similarity_weight", "the three weights are all 0; give at least one a positive weight"
