"""Generation on a transformers causal LM (ms.llm.hf.HFLM): greedy and seeded-sampled replies decoded by
transformers, or greedy ones by another engine (backbone.engine, ms.config.parts.ENGINES), each cut at
its first stop string."""

from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from ms.config.parts import ENGINES
from ms.llm.base import BackendError, Message
from ms.llm.engine import Engine
from ms.llm.sampling import seeded_sampler


class HFGeneration:
    """HFLM's generation hooks (`_generate`, `_sample`), one of its bases: they use what HFLM loads (net,
    tokenizer, prompt_format, generator, device) and its settings, counters and tokenizing helpers."""

    @torch.inference_mode()
    def _generate(
        self, chats: list[list[Message]], *, max_new_tokens: int, temperature: float, stop: list[str]
    ) -> list[str]:
        encoded = [self._encode(self.chat_context(c))[-self.max_length :] for c in chats]
        stop = [*stop, *self.prompt_format.stop]
        if self.generator is not None and temperature == 0:
            return self._engine_generate(encoded, max_new_tokens, stop)
        # Sampling (temperature > 0) stays here: the engines decode greedily only.
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        return self._transformers_generate(encoded, max_new_tokens, stop, lambda batch: sampling)

    @torch.inference_mode()
    def _sample(
        self, chats: list[list[Message]], seeds: list[int], *, max_new_tokens: int, temperature: float, stop: list[str]
    ) -> list[str]:
        # On transformers whatever the engine (the engines decode greedily only); each row draws from its own
        # generator (ms.llm.sampling), so a sample does not depend on the rest of its batch.
        from transformers import LogitsProcessorList

        encoded = [self._encode(self.chat_context(c))[-self.max_length :] for c in chats]
        return self._transformers_generate(
            encoded,
            max_new_tokens,
            [*stop, *self.prompt_format.stop],
            lambda batch: {
                "do_sample": False,
                "logits_processor": LogitsProcessorList(
                    [seeded_sampler([seeds[i] for i in batch], temperature, self.device)]
                ),
            },
        )

    def _transformers_generate(
        self, encoded: list[list[int]], max_new_tokens: int, stop: list[str], decoding: Callable[[list[int]], dict]
    ) -> list[str]:
        """Replies decoded by transformers, `decoding(batch)` giving generate's arguments for the requests
        `batch` (their indices). Similar lengths share a batch, so little compute goes to padding."""
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out: list[str] = [""] * len(encoded)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            ids, mask, _ = self._left_padded([encoded[i] for i in batch])
            generated = self.net.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                top_p=None,
                top_k=None,
                **decoding(batch),
            )
            new_tokens = generated[:, ids.shape[1] :]
            for row, i in enumerate(batch):
                tokens = new_tokens[row]
                self.usage.prompt_tokens += len(encoded[i])
                self.usage.completion_tokens += int((tokens != self.tokenizer.pad_token_id).sum())
                out[i] = truncate_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), stop).strip()
            self._answered(len(batch))
        return out

    def _engine_generate(self, encoded: list[list[int]], max_new_tokens: int, stop: list[str]) -> list[str]:
        eos = self.net.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        # A stop string spans at most as many tokens as it has characters, so the reply's tail
        # shows it; stopping there only saves steps, the text is cut at the stop below as on hf.
        tail = max((len(s) for s in stop), default=0) + 1

        def done(_: int, tokens: list[int]) -> bool:
            text = self.tokenizer.decode(tokens[-tail:], skip_special_tokens=True)
            return any(s and s in text for s in stop)

        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths together
        replies = self.generator.generate(
            [encoded[i] for i in order], max_new_tokens=max_new_tokens, eos=eos, done=done if stop else None
        )
        out: list[str] = [""] * len(encoded)
        for i, tokens in zip(order, replies):
            self.usage.prompt_tokens += len(encoded[i])
            self.usage.completion_tokens += len(tokens)
            out[i] = truncate_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), stop).strip()
        return out


def make_generator(engine: str, gguf: Path | None, folder: str | None, tokenizer, **settings) -> Optional[Engine]:
    """The engine that does greedy generation (ms.config.parts.ENGINES), loaded once, as `Engine.load`
    says; None: transformers does it."""
    if engine not in ENGINES:
        raise BackendError(ENGINES.unknown(engine))
    return ENGINES.load(engine)(engine, gguf, folder, tokenizer, **settings)


def transformers_generator(engine: str, gguf: Path | None, folder: str | None, tokenizer, **settings) -> None:
    """backbone.engine=hf: no engine of its own, transformers generates (exact)."""
    return None


def truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    cut = min((text.find(s) for s in stop if s and s in text), default=len(text))
    return text[:cut]
