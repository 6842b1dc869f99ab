"""Backbones: build one from its config."""

from __future__ import annotations

from pathlib import Path

from ms.llm.base import LM, BackendError, LoglikelihoodUnsupported, Usage
from ms.llm.cache import CACHE_FILENAME, ResponseCache

PROVIDERS = ("hf", "openai", "mistral")

__all__ = ["LM", "BackendError", "LoglikelihoodUnsupported", "Usage", "ResponseCache", "build_lm"]


def build_lm(backbone, cache_dir: str | Path, use_response_cache: bool = True) -> LM:
    """`backbone` is a BackboneConfig (or any object with its fields). `cache_dir` holds the
    response cache and converted local models."""
    cache = ResponseCache(Path(cache_dir) / CACHE_FILENAME) if use_response_cache else None
    gen = backbone.generation
    common = dict(cache=cache, max_new_tokens=gen.max_new_tokens, temperature=gen.temperature, stop=list(gen.stop))
    if backbone.provider == "hf":
        from ms.llm.hf import HFLM

        return HFLM(backbone.model, gguf_file=backbone.gguf_file, gguf_package=backbone.gguf_package,
                    device=backbone.device, dtype=backbone.dtype, batch_size=backbone.batch_size,
                    max_length=backbone.max_length, models_dir=Path(cache_dir) / "models", **common)
    if backbone.provider in ("openai", "mistral"):
        if backbone.provider == "openai":
            from ms.llm.openai import OpenAILM as cls
        else:
            from ms.llm.mistral import MistralLM as cls
        return cls(backbone.model, api_key_env=backbone.api_key_env, base_url=backbone.base_url,
                   max_concurrency=backbone.max_concurrency, timeout_s=backbone.timeout_s,
                   max_retries=backbone.max_retries, backoff_s=backbone.backoff_s,
                   max_retry_wait_s=backbone.max_retry_wait_s, **common)
    raise BackendError(f"unknown backbone.provider '{backbone.provider}' (backbone '{backbone.name}'); "
                       f"choose one of {', '.join(PROVIDERS)}")
