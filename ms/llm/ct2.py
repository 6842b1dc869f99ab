"""CTranslate2 with int8 weights as a greedy generation engine, many sequences per call.

Why: a decoding step reads every weight once; int8 weights are a quarter of transformers' fp32
bytes, and CTranslate2 batches sequences of one call into each step. It installs as a wheel (no
compiler), and converts the transformers copy of the model ms already keeps in its models folder
(ms.llm.local.models_dir). The token ids that cross an engine's boundary (ms.llm.engine) go to it as
token strings.
"""

from pathlib import Path

from ms.llm.base import BackendError
from ms.llm.engine import Engine, cores
from ms.llm.engine_packages import engine_package
from ms.llm.local import made_once


def converted_ct2(folder: Path, quantization: str = "int8") -> Path:
    """A CTranslate2 copy of a transformers model folder, made once beside it (about 30 s;
    ms.llm.local.made_once)."""
    ctranslate2 = engine_package("ct2")

    def convert(staging: Path) -> None:
        ctranslate2.converters.TransformersConverter(str(folder)).convert(
            str(staging), quantization=quantization, force=True
        )  # a killed attempt's leftovers

    return made_once(folder.parent / f"{folder.name}.ct2-{quantization}", convert)


class CT2Generator(Engine):
    """Greedy decoding of token-id prompts with a CTranslate2 model, `batch_size` prompts per call."""

    def __init__(self, folder: str | Path, tokenizer, *, batch_size: int = 16, n_threads: int | None = None):
        ctranslate2 = engine_package("ct2")
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.net = ctranslate2.Generator(
            str(converted_ct2(Path(folder))), device="cpu", compute_type="int8", intra_threads=n_threads or cores()
        )

    @classmethod
    def load(cls, engine, gguf, folder, tokenizer, *, batch_size, max_length, models_dir=None) -> "CT2Generator":
        """backbone.engine=ct2: CTranslate2 over the transformers copy of the model."""
        if folder is None:  # ct2: CTranslate2 converts from a transformers folder
            raise BackendError(
                f"backbone.engine={engine} converts the transformers copy of the model, "
                "which HFLM makes only with a models_dir (build_lm gives one)"
            )
        return cls(folder, tokenizer, batch_size=batch_size)

    def _generate_group(self, prompts, group, out, max_new_tokens, eos, done) -> None:
        def step(result) -> bool:  # True ends this sequence's decoding
            tokens = out[group[result.batch_id]]
            tokens.append(result.token_id)
            return done(group[result.batch_id], tokens)

        # The per-token callback costs a Python call per token: only where a stop string asks.
        results = self.net.generate_batch(
            [self.tokenizer.convert_ids_to_tokens(prompts[i]) for i in group],
            max_length=max_new_tokens,
            include_prompt_in_result=False,
            sampling_topk=1,
            end_token=sorted(eos),
            return_end_token=False,
            callback=step if done is not None else None,
        )
        for i, result in zip(group, results):
            tokens = out[i] if done is not None else list(result.sequences_ids[0])
            # A callback also sees the end token; the reply is what precedes it.
            out[i] = cut_at_eos(tokens[:max_new_tokens], eos)


def cut_at_eos(tokens: list[int], eos: set[int]) -> list[int]:
    return next((tokens[:k] for k, t in enumerate(tokens) if t in eos), tokens)
