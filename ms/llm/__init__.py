"""Backbones: build one from its config."""

from __future__ import annotations

import logging
from pathlib import Path

from ms.config.schema import PROVIDERS
from ms.llm.base import LM, BackendError, LoglikelihoodUnsupported, Usage
from ms.llm.cache import CACHE_FILENAME, ResponseCache
from ms.llm.local import models_dir


__all__ = ["LM", "BackendError", "LoglikelihoodUnsupported", "Usage", "ResponseCache", "build_lm"]

log = logging.getLogger(__name__)


def build_lm(backbone, cache_dir: str | Path, use_response_cache: bool = True) -> LM:
    """`backbone` is a BackboneConfig (or any object with its fields). `cache_dir` holds the
    response cache; converted local models are kept once per machine (ms.llm.local.models_dir)."""
    log.info("loading backbone %s (%s: %s)", backbone.name, backbone.provider,
             backbone.model or backbone.gguf_package)
    lm = _provider_lm(backbone, cache_dir, use_response_cache)
    lm.name = backbone.name  # llm_usage.json reports usage and cost per backbone config
    lm.price = price_of(backbone)
    return lm


def price_of(backbone) -> dict[str, float] | None:
    """The backbone's price per million input and output tokens, or None where it has none."""
    price = getattr(backbone, "price", None)
    if price is None or price.input_per_million is None or price.output_per_million is None:
        return None
    return {"input_per_million": float(price.input_per_million),
            "output_per_million": float(price.output_per_million)}


def provider_class(backbone) -> type[LM]:
    """The LM class of the backbone's provider; its class attributes say what it can do (plan mode
    reads them without building the LM)."""
    if backbone.provider == "hf":
        from ms.llm.hf import HFLM

        return HFLM
    if backbone.provider == "openai":
        from ms.llm.openai import EchoLogprobsLM, OpenAILM

        # A class of its own, so that what it can do stays readable from the class.
        return EchoLogprobsLM if getattr(backbone, "prompt_logprobs", "none") == "echo" else OpenAILM
    if backbone.provider == "mistral":
        from ms.llm.mistral import MistralLM

        return MistralLM
    raise BackendError(f"unknown backbone.provider '{backbone.provider}' (backbone '{backbone.name}'); "
                       f"choose one of {', '.join(PROVIDERS)}")


def _provider_lm(backbone, cache_dir: str | Path, use_response_cache: bool) -> LM:
    cls = provider_class(backbone)
    cache = ResponseCache(Path(cache_dir) / CACHE_FILENAME) if use_response_cache else None
    gen = backbone.generation
    common = dict(cache=cache, max_new_tokens=gen.max_new_tokens, temperature=gen.temperature, stop=list(gen.stop))
    if backbone.provider == "hf":
        return cls(backbone.model, gguf_file=backbone.gguf_file, gguf_package=backbone.gguf_package,
                   device=backbone.device, dtype=backbone.dtype, batch_size=backbone.batch_size,
                   max_length=backbone.max_length, models_dir=models_dir(),
                   engine=getattr(backbone, "engine", "hf"),
                   prompt_format=getattr(backbone, "prompt_format", "chat"), **common)
    return cls(backbone.model, api_key_env=backbone.api_key_env, base_url=backbone.base_url,
               max_concurrency=backbone.max_concurrency, timeout_s=backbone.timeout_s,
               max_retries=backbone.max_retries, backoff_s=backbone.backoff_s,
               max_retry_wait_s=backbone.max_retry_wait_s, **common)
