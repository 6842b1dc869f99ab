"""The config layer, at the bottom of ms: every config dataclass and choice (`schema`), the fields'
declared limits (`fields`), where the configs live (`store`), and a run folder's file names
(`files`), and the registered parts, by name (`registry`, `parts`; `options`: the groups whose options
declare their own settings, each loaded by name from its part's light settings module). It imports no
other part of ms and no torch, so a bad setting is reported before any heavy import.

Re-exported here: `register`, and the sections whose options extend them (the docs name them
`ms.config.GateConfig` and so on); everything else is imported from its module."""

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
