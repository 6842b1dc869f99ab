"""llama.cpp in-process as a greedy generation engine, many sequences per step.

Why llama.cpp: decoding one sequence reads every weight once per token. The packaged GGUF keeps
SmolLM2's weights in 4 bits (about 85 MB) where transformers reads 540 MB of fp32, so a step
costs several times less. Why batches: the sequences of one llama_batch share each step's pass
over the weights (each token carries its own seq_id), which is the lever when many answers are
due at once.

Only token ids cross this boundary (ms.llm.engine), so llama.cpp sees exactly the ids hf would.
"""

import ctypes
import sys
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from ms.llm.base import BackendError
from ms.llm.engine import Engine, cores
from ms.llm.engine_packages import engine_package
from ms.llm.local import derived_name, made_once


def _import_llama_cpp():
    llama_cpp = engine_package("llamacpp")
    global _log_errors_only
    if _log_errors_only is None:  # llama.cpp logs every load to stderr; keep its errors only

        @llama_cpp.llama_log_callback
        def _log_errors_only(level: int, text: bytes, _: ctypes.c_void_p) -> None:
            if level == GGML_LOG_LEVEL_ERROR:
                sys.stderr.write(text.decode("utf-8", errors="replace"))

        llama_cpp.llama_log_set(_log_errors_only, ctypes.c_void_p(0))
    return llama_cpp


GGML_LOG_LEVEL_ERROR = 3
_log_errors_only = None  # the callback must outlive every model, so it lives here


# Weight types a GGUF may be re-written in before loading (llama.cpp's own quantizer, < 1 s for
# SmolLM2). The packaged file is Q4_1, for which this CPU build has no batched (GEMM) kernel: a
# prompt is read at about the speed of decoding. f16 holds Q4_1's values almost exactly and has
# GEMM kernels; q4_0 re-quantizes (another rounding, so text drifts more) and is the fastest.
WEIGHTS = {"f16": 1, "q8_0": 7, "q4_0": 2}  # name -> llama_ftype


def requantized(gguf: Path, weights: str, models_dir: Path) -> Path:
    """`gguf` re-written with `weights`, made once per models_dir (ms.llm.local.made_once)."""
    lib = _import_llama_cpp()

    def quantize(staging: Path) -> None:
        params = lib.llama_model_quantize_default_params()
        params.ftype = WEIGHTS[weights]
        params.allow_requantize = True
        params.nthread = cores()
        if lib.llama_model_quantize(str(gguf).encode(), str(staging).encode(), ctypes.byref(params)) != 0:
            raise BackendError(f"backbone.engine=llamacpp-{weights}: llama.cpp could not re-write {gguf}")

    return made_once(models_dir / derived_name(gguf, f".{weights}.gguf"), quantize)


def _free(lib, batch, ctx, model) -> None:
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    lib.llama_model_free(model)


class LlamaCppGenerator(Engine):
    """Greedy decoding of token-id prompts with one GGUF model.

    A group is up to `n_seq_max` prompts decoded together: weights are read once per step whatever
    its size. The key-value cache holds `n_ctx` tokens. Unified, the group's sequences share it, so
    any mix of lengths fits, but each token attends over every cached cell (masked), a cost that
    grows with the group's total length; split (kv_unified=False), each sequence owns
    n_ctx / n_seq_max cells and attends over its own only.
    """

    def __init__(
        self,
        gguf_path: str | Path,
        *,
        n_seq_max: int = 16,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        kv_unified: bool = True,
    ):
        lib = self.lib = _import_llama_cpp()
        lib.llama_backend_init()
        self.model = lib.llama_model_load_from_file(str(gguf_path).encode(), lib.llama_model_default_params())
        if not self.model:
            raise BackendError(f"backbone.engine=llamacpp: llama.cpp could not load {gguf_path}")
        params = lib.llama_context_default_params()
        self.n_ctx = params.n_ctx = n_ctx
        self.n_batch = params.n_batch = min(n_ctx, 2048)
        params.n_ubatch = min(self.n_batch, 512)
        self.n_seq_max = params.n_seq_max = n_seq_max
        params.n_threads = params.n_threads_batch = n_threads or cores()
        params.kv_unified = kv_unified
        self.seq_ctx = n_ctx if kv_unified else n_ctx // n_seq_max  # most cells one sequence may use
        self.ctx = lib.llama_init_from_model(self.model, params)
        if not self.ctx:
            lib.llama_model_free(self.model)
            raise BackendError(f"backbone.engine=llamacpp: llama.cpp could not make a context (n_ctx={n_ctx})")
        self.memory = lib.llama_get_memory(self.ctx)
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))
        self.batch = lib.llama_batch_init(self.n_batch, 0, 1)
        weakref.finalize(self, _free, lib, self.batch, self.ctx, self.model)

    @classmethod
    def load(cls, engine, gguf, folder, tokenizer, *, batch_size, max_length, models_dir=None) -> "LlamaCppGenerator":
        """backbone.engine=llamacpp: the model's GGUF file in-process; llamacpp-f16 and llamacpp-q4_0 run
        the same GGUF re-written in those weights first."""
        if gguf is None:
            raise BackendError(
                f"backbone.engine={engine} runs a GGUF file: set backbone.gguf_file or "
                "backbone.gguf_package, or backbone.engine=hf"
            )
        if "-" in engine:  # llamacpp-f16, llamacpp-q4_0: the same GGUF re-written in those weights
            if models_dir is None:
                raise BackendError(f"backbone.engine={engine} writes a model file: give HFLM a models_dir")
            gguf = requantized(gguf, engine.split("-", 1)[1], Path(models_dir))
        # Each sequence owns its cells (attention then reads its own only): room for a
        # full-length prompt and a 512-token reply, 23 KB each for SmolLM2 (940 MB for 16).
        return cls(gguf, n_seq_max=batch_size, n_ctx=batch_size * (max_length + 512), kv_unified=False)

    def _groups(self, prompts: Sequence[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Consecutive prompts whose tokens, with room for their replies, fit the cache."""
        groups: list[list[int]] = []
        used = self.n_ctx + 1
        for i, prompt in enumerate(prompts):
            need = len(prompt) + max_new_tokens
            if need > self.seq_ctx:
                raise BackendError(
                    f"backbone.engine=llamacpp: a prompt of {len(prompt)} tokens plus "
                    f"{max_new_tokens} new ones exceeds the engine's {self.seq_ctx} per sequence"
                )
            if used + need > self.n_ctx or len(groups[-1]) >= self.n_seq_max:
                groups.append([])
                used = 0
            groups[-1].append(i)
            used += need
        return groups

    def _generate_group(self, prompts, group, out, max_new_tokens, eos, done) -> None:
        self.lib.llama_memory_clear(self.memory, False)  # metadata only: cells are overwritten
        # Prefill: every prompt's tokens under its own seq_id, logits at each prompt's last token.
        entries = [
            (seq, pos, tok, pos == len(prompts[i]) - 1)
            for seq, i in enumerate(group)
            for pos, tok in enumerate(prompts[i])
        ]
        nxt: dict[int, int] = {}
        for start in range(0, len(entries), self.n_batch):
            chunk = entries[start : start + self.n_batch]
            nxt.update(self._decode(chunk))
        length = {seq: len(prompts[i]) for seq, i in enumerate(group)}
        active = list(range(len(group)))
        for _ in range(max_new_tokens):
            still = []
            for seq in active:
                token = nxt[seq]
                if token in eos:
                    continue
                tokens = out[group[seq]]
                tokens.append(token)
                if len(tokens) < max_new_tokens and not (done and done(group[seq], tokens)):
                    still.append(seq)
            active = still
            if not active:
                break
            # One step: each live sequence's last token at its next position.
            nxt = self._decode(
                [(seq, length[seq] + len(out[group[seq]]) - 1, out[group[seq]][-1], True) for seq in active]
            )

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> dict[int, int]:
        """Run one batch of (seq, pos, token, wants_logits); the argmax next token per flagged seq."""
        batch = self.batch
        for k, (seq, pos, token, logits) in enumerate(entries):
            batch.token[k] = token
            batch.pos[k] = pos
            batch.n_seq_id[k] = 1
            batch.seq_id[k][0] = seq
            batch.logits[k] = logits
        batch.n_tokens = len(entries)
        status = self.lib.llama_decode(self.ctx, batch)
        if status != 0:
            raise BackendError(f"backbone.engine=llamacpp: llama_decode failed with status {status}")
        found = {}
        for k, (seq, _, _, logits) in enumerate(entries):
            if logits:
                row = ctypes.cast(self.lib.llama_get_logits_ith(self.ctx, k), ctypes.POINTER(ctypes.c_float))
                found[seq] = int(np.ctypeslib.as_array(row, shape=(self.n_vocab,)).argmax())
        return found
