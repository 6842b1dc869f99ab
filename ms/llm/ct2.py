"""CTranslate2 with int8 weights as a greedy generation engine, many sequences per call.

Why: a decoding step reads every weight once; int8 weights are a quarter of transformers' fp32
bytes, and CTranslate2 batches sequences of one call into each step. It installs as a wheel (no
compiler), and converts the transformers copy of the model ms already keeps in its models folder
(ms.llm.local.models_dir).

As with llama.cpp, only token ids cross the boundary (CTranslate2 takes them as token strings):
ms's tokenizer and chat template make the prompt and decode the reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ms.llm.base import BackendError, engine_package
from ms.llm.llamacpp import cores
from ms.llm.local import made_once


def _import_ctranslate2():
    return engine_package("ctranslate2", "ct2", "ctranslate2>=4")


def converted_ct2(folder: Path, quantization: str = "int8") -> Path:
    """A CTranslate2 copy of a transformers model folder, made once beside it (about 30 s;
    ms.llm.local.made_once)."""
    ctranslate2 = _import_ctranslate2()

    def convert(staging: Path) -> None:
        ctranslate2.converters.TransformersConverter(str(folder)).convert(
            str(staging), quantization=quantization, force=True
        )  # a killed attempt's leftovers

    return made_once(folder.parent / f"{folder.name}.ct2-{quantization}", convert)


class CT2Generator:
    """Greedy decoding of token-id prompts with a CTranslate2 model, loaded once."""

    def __init__(self, folder: str | Path, tokenizer, *, batch_size: int = 16, n_threads: int | None = None):
        ctranslate2 = _import_ctranslate2()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.net = ctranslate2.Generator(
            str(converted_ct2(Path(folder))), device="cpu", compute_type="int8", intra_threads=n_threads or cores()
        )

    def generate(
        self,
        prompts: Sequence[list[int]],
        *,
        max_new_tokens: int,
        eos: set[int],
        done: Callable[[int, list[int]], bool] | None = None,
    ) -> list[list[int]]:
        """The greedy continuation of each prompt: new token ids, up to and without an `eos` id,
        at most `max_new_tokens`. `done(i, tokens)` may end prompt i early (a stop string)."""
        out: list[list[int]] = [[] for _ in prompts]
        for start in range(0, len(prompts), self.batch_size):
            rows = list(range(start, min(start + self.batch_size, len(prompts))))

            def step(result, rows=rows) -> bool:  # True ends this sequence's decoding
                tokens = out[rows[result.batch_id]]
                tokens.append(result.token_id)
                return done(rows[result.batch_id], tokens)

            # The per-token callback costs a Python call per token: only where a stop string asks.
            results = self.net.generate_batch(
                [self.tokenizer.convert_ids_to_tokens(prompts[i]) for i in rows],
                max_length=max_new_tokens,
                include_prompt_in_result=False,
                sampling_topk=1,
                end_token=sorted(eos),
                return_end_token=False,
                callback=step if done is not None else None,
            )
            if done is None:
                for i, result in zip(rows, results):
                    out[i] = list(result.sequences_ids[0])
        # A callback also sees the end token; the reply is what precedes it.
        return [cut_at_eos(tokens[:max_new_tokens], eos) for tokens in out]


def cut_at_eos(tokens: list[int], eos: set[int]) -> list[int]:
    return next((tokens[:k] for k, t in enumerate(tokens) if t in eos), tokens)


def ct2_generator(
    engine: str,
    gguf: Path | None,
    folder: str | None,
    tokenizer,
    *,
    batch_size: int,
    max_length: int,
    models_dir: str | Path | None = None,
) -> CT2Generator:
    """backbone.engine=ct2 (ms.config.parts.ENGINES): CTranslate2 over the transformers copy of the model."""
    if folder is None:  # ct2: CTranslate2 converts from a transformers folder
        raise BackendError(
            f"backbone.engine={engine} converts the transformers copy of the model, "
            "which HFLM makes only with a models_dir (build_lm gives one)"
        )
    return CT2Generator(folder, tokenizer, batch_size=batch_size)
