"""Scoring on a transformers causal LM (ms.llm.hf.HFLM): the log-likelihood of given continuations, and
the probability of each option as the start of a reply, read from next-token distributions without
decoding (every option's tokens read as a tree per forward pass, ms.llm.option_tree, with the key-value
caches of shared prefixes kept across calls, ms.llm.prefix_cache)."""

import copy
from typing import Callable, Sequence

import torch

from ms.llm.base import Message
from ms.llm.option_tree import OptionTree, cached_length, length_batches, stacked_cache, tree_inputs, tree_reach
from ms.llm.options import OptionPaths
from ms.llm.prefix_cache import shared_length


class HFScoring:
    """HFLM's scoring hooks (`_loglikelihood`, `_option_probabilities`), one of its bases: they use what
    HFLM loads (net, tokenizer, prefix_caches, device) and its settings, counters and tokenizing helpers."""

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
