"""The config layer, at the bottom of ms: every config dataclass and choice (`schema`), the fields'
declared limits (`fields`), where the configs live (`store`), and a run folder's file names
(`files`), and the registered parts, by name (`registry`, `parts`). It imports no other part of ms and no torch, so a bad setting is reported before any
heavy import."""

from ms.config.fields import Check, setting
from ms.config.schema import (
    AGE_UNITS, AT_TEST, AgentConfig, BackboneConfig, CompositeConfig, Config,
    DataConfig, ENGINES, EVAL_METRICS, METRICS, POOL_BACKENDS, EvalConfig, GATES, GateConfig, GenerationConfig, HFDataConfig, LABEL_METHODS,
    MemoryConfig, POLICIES, POOL_MODES, PROMPT_LOGPROBS, PROVIDERS, PoolConfig,
    PriceConfig, PromptConfig, READS, REFRESH_POLICIES, REF_LOGPROB, RETRIEVERS,
    RUBRIC_TOTAL, RetrieverConfig, STREAM_ANSWERS, ScorerConfig, StmLtmConfig, StreamConfig, TrainConfig,
)
from ms.config.store import CONF_DIR, register

__all__ = ["CONF_DIR", "Check", "register", "setting", "AGE_UNITS", "AT_TEST", "AgentConfig",
           "BackboneConfig", "CompositeConfig", "Config", "DataConfig", "ENGINES", "EVAL_METRICS", "METRICS", "POOL_BACKENDS",
           "EvalConfig", "GATES", "GateConfig", "GenerationConfig", "HFDataConfig", "LABEL_METHODS", "MemoryConfig",
           "POLICIES", "POOL_MODES", "PROMPT_LOGPROBS", "PROVIDERS", "PoolConfig", "PriceConfig",
           "PromptConfig", "READS", "REFRESH_POLICIES", "REF_LOGPROB", "RETRIEVERS",
           "RUBRIC_TOTAL", "RetrieverConfig", "STREAM_ANSWERS", "ScorerConfig", "StmLtmConfig", "StreamConfig",
           "TrainConfig"]
