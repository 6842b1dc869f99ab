"""transformers causal LMs: a hub name, a local folder, or a GGUF file (also one shipped in a package)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Callable, Sequence

import torch

from ms.config.parts import ENGINES
from ms.llm.base import LM, BackendError, Message, Prompt, as_messages
from ms.llm.gguf_chunks import assembled_gguf, chunked_package
from ms.llm.local import (
    derived_name,
    made_once,
    package_dir,
    resolve_device,
    resolve_dtype,
)
from ms.llm.local import (
    models_dir as machine_models_dir,
)
from ms.llm.option_tree import OptionTree, cached_length, length_batches, stacked_cache, tree_inputs, tree_reach
from ms.llm.options import OptionPaths
from ms.llm.prefix_cache import PrefixCaches, shared_length
from ms.llm.prompt_format import prompt_format as make_prompt_format
from ms.llm.sampling import seeded_sampler

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


def model_source(model: str | None, gguf_file: str | None, gguf_package: str | None) -> tuple[str, str | None]:
    """Where the weights are (hub name, folder, or the folder of a package that ships a GGUF file)
    and the GGUF file there, if any; found without loading anything. A package that ships its file
    in chunks gives the name of the whole file, which `assembled_gguf` makes elsewhere."""
    if gguf_package:
        folder = package_dir(gguf_package)
        if gguf_file is None:
            found = sorted(folder.rglob("*.gguf"))
            chunked = None if found else chunked_package(gguf_package)
            if chunked is not None:
                return str(folder), chunked.MODEL_NAME
            if not found:
                raise FileNotFoundError(f"no .gguf file inside package '{gguf_package}' ({folder})")
            gguf_file = str(found[0].relative_to(folder))
        return str(folder), gguf_file
    if model:
        return model, gguf_file
    raise ValueError("backbone needs `model` (hub name or folder) or `gguf_package`")


def whole_gguf(
    source: str, gguf_file: str | None, gguf_package: str | None, models_dir: str | Path | None
) -> tuple[str, str | None]:
    """`model_source`'s answer, where a package ships its GGUF file in chunks or parts the whole
    file in `models_dir`, assembled there on first use (ms.llm.gguf_chunks)."""
    if not (gguf_package and gguf_file) or (Path(source) / gguf_file).exists():
        return source, gguf_file
    if not models_dir:
        raise BackendError(
            f"package '{gguf_package}' ships its GGUF file in chunks, which are "
            "assembled into a models_dir (build_lm gives one)"
        )
    assembled = assembled_gguf(gguf_package, Path(models_dir))
    return str(assembled.parent), assembled.name


def model_id(source: str, gguf_file: str | None, prompt_format: str = "chat", dtype: str = "float32") -> str:
    """The model's name in response-cache keys. A chat's reply depends on how it is rendered, so a
    format other than the chat template names itself (chat keys stay as they always were); so does a
    float type other than float32 (`dtype`, resolved), whose scores differ, so that a bfloat16 run on a
    warm cache never replays float32 replies."""
    name = f"{source}::{gguf_file}" if gguf_file else source
    name = name if prompt_format == "chat" else f"{name}#format={prompt_format}"
    return name if dtype == "float32" else f"{name}#dtype={dtype}"


def engine_model_id(model: str, engine: str) -> str:
    """The model as generate's cache keys name it: hf keeps the bare id (existing caches still
    hit); another engine's greedy text can differ from hf's, so its replies get keys of their own."""
    return model if engine == "hf" else f"{model}#engine={engine}"


class HFLM(LM):
    provider = "hf"
    scores_text = True
    reads_probabilities = True
    runs_locally = True
    # Option probabilities of batch_size chats per forward pass (ms.llm.option_tree); False: one chat at
    # a time, the path before batching, which tests and benchmarks/option_batching.py compare it with.
    option_batching = True

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
        self.generator = make_generator(
            engine,
            gguf,
            None if gguf_file else source,
            self.tokenizer,
            batch_size=batch_size,
            max_length=max_length,
            models_dir=models_dir,
        )

    def _key_model(self, kind: str) -> str:
        return engine_model_id(self.cache_model, self.engine) if kind == "generate" else self.cache_model

    @classmethod
    def build(cls, backbone, **common) -> "HFLM":
        """Converted models are kept once per machine (ms.llm.local.models_dir)."""
        return cls(
            backbone.model,
            gguf_file=backbone.gguf_file,
            gguf_package=backbone.gguf_package,
            device=backbone.device,
            dtype=backbone.dtype,
            batch_size=backbone.batch_size,
            max_length=backbone.max_length,
            models_dir=machine_models_dir(),
            engine=getattr(backbone, "engine", "hf"),
            prompt_format=getattr(backbone, "prompt_format", "chat"),
            **common,
        )

    @classmethod
    def cache_model_of(cls, backbone, kind: str) -> str:
        model = model_id(
            *model_source(backbone.model, backbone.gguf_file, backbone.gguf_package),
            backbone.prompt_format,
            resolve_dtype(backbone.dtype, backbone.device),
        )
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
            source, gguf_file = whole_gguf(
                *model_source(backbone.model, backbone.gguf_file, backbone.gguf_package),
                backbone.gguf_package,
                machine_models_dir(),
            )
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

    # ---- generation -------------------------------------------------------------------------

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

    # ---- scoring ----------------------------------------------------------------------------

    @torch.inference_mode()
    def _loglikelihood(self, contexts: list[str], continuations: list[str]) -> list[tuple[float, int]]:
        # Context and continuation are tokenized apart and joined as ids, so the scored span is
        # exactly the continuation's tokens (joint tokenization can merge across the boundary).
        rows = []
        for context, continuation in zip(contexts, continuations):
            ctx = self._encode(context)
            cont = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
            if not cont:
                raise ValueError(f"empty continuation for context {context[:60]!r}")
            ids = (ctx + cont)[-(self.max_length + 1) :]
            rows.append((ids, len(cont)))
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        out: list[tuple[float, int]] = [(0.0, 0)] * len(rows)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            ids, mask, positions = self._left_padded([rows[i][0] for i in batch])
            # Left padding puts every continuation at the end of its row, so logits are needed for
            # the last (longest continuation + 1) positions only: the vocabulary projection over
            # whole contexts would cost more time and memory than the rest of the forward pass.
            keep = max(rows[i][1] for i in batch) + 1
            logits = self.net(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
            for row, i in enumerate(batch):
                # Row by row, over the row's own continuation only: log_softmax over the whole
                # [batch, keep, vocab] slice would copy it (it is not contiguous) and write as much
                # again, 1.5 GB at 16 rows of 234 tokens. Each position's log-probs are computed
                # alone either way, so the numbers are the same.
                n = rows[i][1]
                logprobs = torch.log_softmax(logits[row, -(n + 1) : -1].float(), dim=-1)
                out[i] = (float(logprobs.gather(-1, ids[row, -n:, None]).sum()), n)
                self.usage.prompt_tokens += len(rows[i][0])
            del logits
            self._answered(len(batch))
        return out

    # ---- reading a distribution over options ------------------------------------------------

    @torch.inference_mode()
    def _option_probabilities(
        self, chats: list[list[Message]], options: list[str], shared_prefixes: Sequence[str] = ()
    ) -> list[list[float]]:
        paths = OptionPaths([self.tokenizer(o, add_special_tokens=False)["input_ids"] for o in options])
        prefixes = [self._encode(p) for p in shared_prefixes]
        contexts = [self._encode(self.chat_context(chat))[-self.max_length :] for chat in chats]
        shared = [shared_length(context, prefixes) for context in contexts]
        tree = OptionTree(paths.prefixes)
        reach = tree_reach(self.net.config) if self.option_batching else 0
        batched = [i for i, c in enumerate(contexts) if len(c) + tree.depth <= reach]
        out: list[list[float]] = [[]] * len(chats)
        for i, read in zip(
            batched, self._tree_logprobs([contexts[i] for i in batched], [shared[i] for i in batched], tree, paths)
        ):
            out[i] = paths.probabilities(read)
        for i in sorted(set(range(len(chats))) - set(batched)):
            logprobs = self._next_token_logprobs(contexts[i], paths.prefixes, shared[i])
            out[i] = paths.probabilities(lambda prefix, token: float(logprobs[prefix][token]))
            self._answered(1)
        self.usage.prompt_tokens += sum(len(c) for c in contexts)
        return out

    def _tree_logprobs(
        self, contexts: list[list[int]], shared: list[int], tree: OptionTree, paths: OptionPaths
    ) -> list[Callable[[tuple, int], float]]:
        """`logprob(prefix, token)` for each context, up to batch_size contexts per forward pass
        (ms.llm.option_tree): similar lengths of what is read after the shared prefix together, a batch
        cut early rather than padded much (`length_batches`)."""
        tokens = sorted({t for path in paths.paths for t in path})  # the only columns options read
        column = {t: j for j, t in enumerate(tokens)}
        out: list[Callable[[tuple, int], float]] = [None] * len(contexts)
        for batch in length_batches([len(c) - n for c, n in zip(contexts, shared)], self.batch_size):
            caches, cached = self._prefix_rows([contexts[i] for i in batch], [shared[i] for i in batch])
            ids, positions, mask = tree_inputs(
                [contexts[i][n:] for i, n in zip(batch, cached)],
                cached,
                tree,
                self.tokenizer.pad_token_id,
                self.net.dtype,
            )
            past = stacked_cache(caches, cached) if max(cached) else None
            logits = self.net(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                past_key_values=past,
                use_cache=past is not None,
                logits_to_keep=len(tree) + 1,
            ).logits
            picked = torch.log_softmax(logits.float(), -1)[..., tokens].tolist()  # [rows, 1 + nodes, tokens]
            del logits, past
            for row, i in enumerate(batch):
                table = picked[row]
                out[i] = lambda prefix, token, table=table: table[tree.row_of(prefix)][column[token]]
            self._answered(len(batch))
        return out

    def _prefix_rows(self, contexts: list[list[int]], shared: list[int]) -> tuple[list, list[int]]:
        """Each context's shared-prefix cache (None: none) and the tokens it holds, 0 where a layer
        kept fewer than the prefix's tokens (a sliding window): that row is read whole.

        Kept with batching by measurement (benchmarks/option_batching.py, 64 grading pairs on SmolLM2):
        stacking the rubric caches into each batch (a copy of about 46 kB per cached token and row in
        float32) read them 2.0-2.1x faster than reading the rubric again in every row, in float32 and
        bfloat16 alike; the rubric is over half of a grading chat's tokens."""
        caches: dict[tuple[int, ...], object] = {}
        rows, cached = [], []
        for context, n in zip(contexts, shared):
            key = tuple(context[:n])
            if n and key not in caches:
                cache = self.prefix_caches.copy_for(key, self._key_values)
                caches[key] = cache if cached_length(cache) >= n else None
            cache = caches.get(key) if n else None
            rows.append(cache)
            cached.append(n if cache is not None else 0)
        return rows, cached

    def _next_token_logprobs(
        self, context: list[int], prefixes: list[tuple], shared: int = 0
    ) -> dict[tuple, torch.Tensor]:
        """Next-token log-probs after context + each prefix, one context at a time: one pass over the
        context (over its part after the first `shared` tokens, whose key-value cache is kept across
        calls), then one short pass per prefix length that reuses the context's key-value cache. The
        path for contexts the tree pass cannot read exactly (`tree_reach`), and with
        option_batching off."""
        ids = torch.tensor([context], device=self.device)
        if shared:
            cache = self.prefix_caches.copy_for(context[:shared], self._key_values)
            first = self.net(input_ids=ids[:, shared:], past_key_values=cache, use_cache=True, logits_to_keep=1)
        else:
            first = self.net(input_ids=ids, use_cache=True, logits_to_keep=1)
        found = {(): torch.log_softmax(first.logits[0, -1].float(), -1)}
        by_length: dict[int, list[tuple]] = {}
        for prefix in prefixes:
            if prefix:
                by_length.setdefault(len(prefix), []).append(prefix)
        for length, rows in by_length.items():
            cache = copy.deepcopy(first.past_key_values)
            cache.batch_repeat_interleave(len(rows))
            positions = torch.arange(len(context), len(context) + length, device=self.device).expand(len(rows), -1)
            mask = torch.ones(len(rows), len(context) + length, dtype=torch.long, device=self.device)
            logits = self.net(
                input_ids=torch.tensor(rows, device=self.device),
                past_key_values=cache,
                attention_mask=mask,
                position_ids=positions,
                logits_to_keep=1,
            ).logits[:, -1]
            found.update(zip(rows, torch.log_softmax(logits.float(), -1)))
        return found

    def _key_values(self, ids: list[int]):
        return self.net(
            input_ids=torch.tensor([ids], device=self.device), use_cache=True, logits_to_keep=1
        ).past_key_values


def make_generator(
    engine: str,
    gguf: Path | None,
    folder: str | None,
    tokenizer,
    *,
    batch_size: int,
    max_length: int,
    models_dir: str | Path | None = None,
):
    """The engine that does greedy generation (ms.config.parts.ENGINES), loaded once; None: transformers
    does it. `gguf`: the model's GGUF file, if it has one; `folder`: the transformers folder (or hub name)
    it was loaded from, None when transformers read the GGUF file directly."""
    if engine not in ENGINES:
        raise BackendError(ENGINES.unknown(engine))
    return ENGINES.load(engine)(
        engine, gguf, folder, tokenizer, batch_size=batch_size, max_length=max_length, models_dir=models_dir
    )


def transformers_generator(engine: str, gguf: Path | None, folder: str | None, tokenizer, **settings) -> None:
    """backbone.engine=hf: no engine of its own, transformers generates (exact)."""
    return None


def truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    cut = min((text.find(s) for s in stop if s and s in text), default=len(text))
    return text[:cut]
