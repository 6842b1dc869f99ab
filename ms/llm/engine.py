"""`Engine`: what every greedy generation engine of the hf provider shares (backbone.engine,
ms.config.parts.ENGINES names each by its `load`; hf itself has none: transformers generates).

Only token ids cross an engine's boundary: ms's transformers tokenizer and chat template make the
prompt, and the reply's ids are decoded by that same tokenizer (ms.llm.hf_generation), so engines
differ in arithmetic only, never in text handling. An engine decodes its prompts in groups, each
group's sequences sharing every step's pass over the weights, which is the lever when many answers
are due at once.
"""

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, Optional, Sequence

Done = Optional[Callable[[int, list[int]], bool]]  # done(i, tokens): True ends prompt i early (a stop string)


def cores() -> int:
    """CPU cores this process may run on (threads = cores: more threads only contend)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Engine(ABC):
    """Greedy decoding of token-id prompts with one model, loaded once."""

    batch_size: int  # the most prompts one group decodes together, unless `_groups` says otherwise

    @classmethod
    @abstractmethod
    def load(
        cls,
        engine: str,
        gguf: Path | None,
        folder: str | None,
        tokenizer,
        *,
        batch_size: int,
        max_length: int,
        models_dir: str | Path | None = None,
    ) -> "Engine":
        """The engine `engine` names (several names may share a class). `gguf`: the model's GGUF file, if
        it has one; `folder`: the transformers folder (or hub name) it was loaded from, None when
        transformers read the GGUF file directly; `max_length`: the longest prompt, in tokens;
        `models_dir`: where a derived model file may be written. A missing input is a BackendError."""

    def generate(
        self, prompts: Sequence[list[int]], *, max_new_tokens: int, eos: set[int], done: Done = None
    ) -> list[list[int]]:
        """The greedy continuation of each prompt: new token ids, up to and without an `eos` id,
        at most `max_new_tokens`. `done(i, tokens)` may end prompt i early (a stop string)."""
        out: list[list[int]] = [[] for _ in prompts]
        for group in self._groups(prompts, max_new_tokens):
            self._generate_group(prompts, group, out, max_new_tokens, eos, done)
        return out

    def _groups(self, prompts: Sequence[list[int]], max_new_tokens: int) -> list[list[int]]:
        """The prompts' indices, in the groups decoded together: consecutive runs of `batch_size`."""
        return [
            list(range(start, min(start + self.batch_size, len(prompts))))
            for start in range(0, len(prompts), self.batch_size)
        ]

    @abstractmethod
    def _generate_group(
        self,
        prompts: Sequence[list[int]],
        group: list[int],
        out: list[list[int]],
        max_new_tokens: int,
        eos: set[int],
        done: Done,
    ) -> None:
        """Decode the prompts `group` indexes together, each one's reply into out[i] as `generate` says."""
