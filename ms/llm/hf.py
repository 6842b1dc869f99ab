"""transformers causal LMs: a hub name, a local folder, or a GGUF file (also one shipped in a package).

HFLM loads the model (its float type and device) and renders chats for it; its generation is
ms.llm.hf_generation's, its scoring ms.llm.hf_scoring's, and where its weights are and what the response
cache calls it, ms.llm.hf_source's.
"""

import logging
from pathlib import Path
from typing import Callable, Sequence

import torch

from ms.config.parts import ENGINES
from ms.llm.base import LM, BackendError, Prompt, as_messages
from ms.llm.hf_generation import HFGeneration, make_generator
from ms.llm.hf_scoring import HFScoring
from ms.llm.hf_source import engine_model_id, model_id, model_source, whole_gguf
from ms.llm.local import derived_name, made_once, resolve_device, resolve_dtype
from ms.llm.local import models_dir as machine_models_dir
from ms.llm.prefix_cache import PrefixCaches
from ms.llm.prompt_format import prompt_format as make_prompt_format

log = logging.getLogger(__name__)


def converted_gguf(folder: str, gguf_file: str, models_dir: Path) -> Path:
    """A transformers copy of a GGUF model, made once per models_dir (see ms.llm.local.made_once):
    de-quantizing and converting the GGUF tokenizer takes about 25 s on 2 cores and writes about
    517 MB for SmolLM2-135M, loading the converted copy under 1 s."""
    gguf_path = Path(folder) / gguf_file

    def convert(staging: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("converting %s to transformers format in %s, once for every run (about 25 s)", gguf_path, models_dir)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        net = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file)
        # The weights are plain dense tensors after loading; only the GGUF marker blocks saving.
        net.hf_quantizer = None
        if hasattr(net.config, "quantization_config"):
            del net.config.quantization_config
        net.save_pretrained(staging)
        tokenizer.save_pretrained(staging)

    return made_once(models_dir / derived_name(gguf_path), convert)


class HFLM(HFGeneration, HFScoring, LM):
    provider = "hf"
    scores_text = True
    reads_probabilities = True
    runs_locally = True
    # Option probabilities of batch_size chats per forward pass (ms.llm.option_tree); False: one chat at
    # a time, the path before batching, which tests and benchmarks/option_batching.py compare it with.
    option_batching = True
    # The backbone settings `build` hands the constructor, each under its own name.
    SETTINGS = ("gguf_file", "gguf_package", "device", "dtype", "batch_size", "max_length")

    def __init__(
        self,
        model: str | None = None,
        *,
        gguf_file: str | None = None,
        gguf_package: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        max_length: int = 2048,
        models_dir: str | Path | None = None,
        engine: str = "hf",
        prompt_format: str = "chat",
        **kwargs,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source, gguf_file = model_source(model, gguf_file, gguf_package)
        self.dtype = resolve_dtype(dtype, device)
        super().__init__(model=model_id(source, gguf_file, prompt_format, self.dtype), **kwargs)
        if engine not in ENGINES:  # before minutes of loading
            raise BackendError(ENGINES.unknown(engine))
        self.engine = engine
        source, gguf_file = whole_gguf(source, gguf_file, gguf_package, models_dir)
        gguf = Path(source) / gguf_file if gguf_file else None
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.max_length = max_length
        if gguf_file and models_dir:
            source, gguf_file = str(converted_gguf(source, gguf_file, Path(models_dir))), None
        load = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(source, **load)
        torch_dtype = getattr(torch, self.dtype)
        self.net = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **load).to(self.device).eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.prompt_format = make_prompt_format(prompt_format, self.tokenizer)
        self.tokenizer.padding_side = "left"
        self.prefix_caches = PrefixCaches()
        # Greedy generation may run on another engine; scoring stays on transformers, which is exact.
        folder = None if gguf_file else source
        self.generator = make_generator(
            engine, gguf, folder, self.tokenizer, batch_size=batch_size, max_length=max_length, models_dir=models_dir
        )

    def _key_model(self, kind: str) -> str:
        return engine_model_id(self.cache_model, self.engine) if kind == "generate" else self.cache_model

    @classmethod
    def build(cls, backbone, **common) -> "HFLM":
        """Converted models are kept once per machine (ms.llm.local.models_dir)."""
        return cls(
            backbone.model,
            **{key: getattr(backbone, key) for key in cls.SETTINGS},
            models_dir=machine_models_dir(),
            engine=getattr(backbone, "engine", "hf"),
            prompt_format=getattr(backbone, "prompt_format", "chat"),
            **common,
        )

    @classmethod
    def cache_model_of(cls, backbone, kind: str) -> str:
        source = model_source(backbone.model, backbone.gguf_file, backbone.gguf_package)
        model = model_id(*source, backbone.prompt_format, resolve_dtype(backbone.dtype, backbone.device))
        return engine_model_id(model, backbone.engine) if kind == "generate" else model

    @classmethod
    def local_weights(cls, backbone) -> tuple[str, str | None] | None:
        try:
            return model_source(backbone.model, backbone.gguf_file, backbone.gguf_package)
        except (FileNotFoundError, ValueError):
            return None

    # ---- prompt formatting ------------------------------------------------------------------

    def chat_context(self, prompt: Prompt) -> str:
        return self.prompt_format.render(as_messages(prompt))

    @classmethod
    def context_renderer(cls, backbone) -> Callable[[Prompt], str]:
        if backbone.prompt_format == "chat":
            # The GGUF's own tokenizer: the converted copy the LM loads was saved from it.
            from transformers import AutoTokenizer

            # A file shipped in chunks is read whole: assembled into the models folder once, as a run would.
            found = model_source(backbone.model, backbone.gguf_file, backbone.gguf_package)
            source, gguf_file = whole_gguf(*found, backbone.gguf_package, machine_models_dir())
            local = Path(source) / gguf_file if gguf_file else None
            converted = machine_models_dir() / derived_name(local) if local and local.is_file() else None
            if converted is not None and converted.is_dir():
                # Where a run converted it already, the tokenizer the run reads: the same one, loaded
                # in a second where converting a GGUF vocabulary takes seconds (23 s for Qwen's 151k).
                source, gguf_file = str(converted), None
            tokenizer = AutoTokenizer.from_pretrained(source, **({"gguf_file": gguf_file} if gguf_file else {}))
        else:
            tokenizer = None  # a plain format renders without one
        render = make_prompt_format(backbone.prompt_format, tokenizer).render
        return lambda prompt: render(as_messages(prompt))

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=self.prompt_format.adds_special_tokens)["input_ids"]

    def _left_padded(self, sequences: Sequence[list[int]]):
        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=self.device)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=self.device)
        # Positions count real tokens only, so a padded row sees the same positions as an unpadded one.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids, mask, positions
