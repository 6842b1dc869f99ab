"""What every backbone's config shares: which model, on which provider, generating how, at what price.
Each provider's own settings (hf's engine and dtype, an API's endpoint and retries) extend it in
ms.llm.settings. Part of the schema (ms.config.schema names every name here); no torch."""

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from ms.config.fields import setting
from ms.config.parts import PROVIDERS


@dataclass
class PriceConfig:
    """A backbone's list price per million tokens (USD in conf/backbone); unset: no cost is reported."""

    input_per_million: Optional[float] = setting(None, ge=0.0)
    output_per_million: Optional[float] = setting(None, ge=0.0)

    def problems(self):
        """Cross-field limits (see ms.loop.validation): half a price would report half a cost."""
        for name, other in (("input_per_million", "output_per_million"), ("output_per_million", "input_per_million")):
            if getattr(self, name) is None and getattr(self, other) is not None:
                yield name, f"is needed too once price.{other} is set (0 if those tokens are free)"


@dataclass
class GenerationConfig:
    max_new_tokens: int = setting(128, ge=1)
    temperature: float = setting(0.0, ge=0.0, le=2.0)  # 0 = greedy; only greedy calls are cached
    stop: list[str] = field(default_factory=list)


@dataclass
class BackboneConfig:
    """What every backbone's settings share, whichever provider runs it. Each provider declares the rest in a
    dataclass that extends this one (ms.llm.settings), the schema a conf/backbone file names for its
    provider (ms.config.options): backbone.dtype under an API backbone is refused at composition."""

    name: str = MISSING
    provider: str = setting(MISSING, choices=PROVIDERS)
    model: Optional[str] = None  # hub name, local folder, or API model name
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    # List price per million input and output tokens: llm_usage.json, metrics.json and ms-report
    # then estimate each run's cost. Unset: no cost is reported.
    price: PriceConfig = field(default_factory=PriceConfig)

    def problems(self):
        """Cross-field limits (see ms.loop.validation): every provider needs to know which model to run."""
        if not self.model:
            yield "model", f"backbone '{self.name}' ({self.provider}) needs backbone.model"
