"""Backbones: build one from its config."""

import logging
from pathlib import Path

from ms.config.parts import PROVIDERS
from ms.config.registry import UnknownPart
from ms.llm.base import LM, BackendError
from ms.llm.cache import CACHE_FILENAME, ResponseCache

__all__ = ["LM", "BackendError", "ResponseCache", "build_lm"]

log = logging.getLogger(__name__)


def build_lm(backbone, cache_dir: str | Path, use_response_cache: bool = True) -> LM:
    """`backbone` is a BackboneConfig (or any object with its fields). `cache_dir` holds the
    response cache; converted local models are kept once per machine (ms.llm.local.models_dir)."""
    log.info(
        "loading backbone %s (%s: %s)",
        backbone.name,
        backbone.provider,
        backbone.model or getattr(backbone, "gguf_package", None),
    )
    cache = ResponseCache(Path(cache_dir) / CACHE_FILENAME) if use_response_cache else None
    gen = backbone.generation
    lm = provider_class(backbone).build(
        backbone, cache=cache, max_new_tokens=gen.max_new_tokens, temperature=gen.temperature, stop=list(gen.stop)
    )
    lm.name = backbone.name  # llm_usage.json reports usage and cost per backbone config
    lm.price = price_of(backbone)
    return lm


def price_of(backbone) -> dict[str, float] | None:
    """The backbone's price per million input and output tokens, or None where it has none."""
    price = getattr(backbone, "price", None)
    if price is None or price.input_per_million is None or price.output_per_million is None:
        return None
    return {"input_per_million": float(price.input_per_million), "output_per_million": float(price.output_per_million)}


def provider_class(backbone) -> type[LM]:
    """The LM class of the backbone's provider (ms.config.parts.PROVIDERS), as it picks it for the
    backbone's settings; its class attributes say what it can do (plan mode reads them without
    building the LM)."""
    try:
        cls = PROVIDERS.load(backbone.provider)
    except UnknownPart as error:
        raise BackendError(f"{error} (backbone '{backbone.name}')") from None
    return cls.for_backbone(backbone)


def offered_variant(provider: str, what: str) -> str | None:
    """How a backbone of `provider` whose class cannot do `what` (a capability of LM: `scores_text`, ...)
    could: the setting that picks a variant that can (LM.for_backbone), in the words the variant offers
    it with (`offer`, as EchoLogprobsLM says it); None where no variant of the provider can."""
    variants = PROVIDERS.load(provider).__subclasses__()
    return next((v.offer for v in variants if getattr(v, what) is True and hasattr(v, "offer")), None)
