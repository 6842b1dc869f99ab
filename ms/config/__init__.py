"""The config layer, at the bottom of ms (ARCHITECTURE.md, "Layers"). Re-exported here: `register`,
and the sections whose options extend them (the docs name them `ms.config.GateConfig` and so on);
everything else is imported from its module."""

from ms.config.schema import (
    AccessConfig,
    BackboneConfig,
    GateConfig,
    MemoryConfig,
    PoisonConfig,
    PoolConfig,
    PromptConfig,
    RetrieverConfig,
    ScorerConfig,
)
from ms.config.store import register

__all__ = [
    "AccessConfig",
    "BackboneConfig",
    "GateConfig",
    "MemoryConfig",
    "PoisonConfig",
    "PoolConfig",
    "PromptConfig",
    "RetrieverConfig",
    "ScorerConfig",
    "register",
]
