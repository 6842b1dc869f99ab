"""Every next-token distribution that an option's probability needs, for a batch of prompts, in one
forward pass: the options' proper prefixes form a tree (OptionPaths.prefixes), whose nodes are
appended to every prompt, each node attending to its prompt and to its own ancestors only, at the
position it would have if it alone followed the prompt. A node's logits are then the next-token
logits after prompt + its prefix, as a separate pass over prompt + prefix would give them; for the
scores "0" to "100" that is 10 tokens more per prompt (1..9, then 10 on the way to 100) instead of
a cache copied for 9 rows and two more passes per prompt.

The prompts are left-padded; each may start from a key-value cache of a prefix it shares with
others (ms.llm.prefix_cache), left-padded as well, so rows of different rubrics share a batch.
"""

import math
from typing import Any, Sequence

import torch


class OptionTree:
    """The non-empty proper prefixes of the options as appended tokens: node a is the prefix
    `nodes[a]`, spelled by its last token after its parent's."""

    def __init__(self, prefixes: Sequence[tuple]):
        self.nodes = sorted((tuple(p) for p in prefixes if p), key=lambda p: (len(p), p))
        index = {p: a for a, p in enumerate(self.nodes)}
        self._rows = {(): 0, **{p: 1 + a for p, a in index.items()}}
        self.tokens = [p[-1] for p in self.nodes]
        self.depths = torch.tensor([len(p) for p in self.nodes], dtype=torch.long)
        # sees[a, b]: node a attends to node b, which is a or one of its ancestors. An ancestor of a
        # proper prefix is a proper prefix too, so it is a node.
        self.sees = torch.zeros(len(self.nodes), len(self.nodes), dtype=torch.bool)
        for a, p in enumerate(self.nodes):
            for k in range(1, len(p) + 1):
                self.sees[a, index[p[:k]]] = True
        self.depth = max((len(p) for p in self.nodes), default=0)

    def __len__(self) -> int:
        return len(self.nodes)

    def row_of(self, prefix: tuple) -> int:
        """Where the distribution after `prefix` is among the logits kept: 0 for the prompt itself,
        then one per node."""
        return self._rows[tuple(prefix)]


def tree_inputs(
    rests: Sequence[Sequence[int]], cached: Sequence[int], tree: OptionTree, pad_id: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, position ids, additive attention mask [rows, 1, queries, keys]) for prompts whose
    last tokens are `rests` (left-padded to the longest), each after `cached[i]` tokens held in a
    key-value cache that is left-padded to max(cached) (see `stacked_cache`), then the tree's nodes.
    The logits of the last len(tree) + 1 positions are then the distributions after each prompt
    and after each node."""
    rows, width, n = len(rests), max(len(r) for r in rests), len(tree)
    past = max(cached)
    lengths = torch.tensor([len(r) for r in rests])
    cached_t = torch.tensor(list(cached))
    ids = torch.tensor([[pad_id] * (width - len(r)) + list(r) + tree.tokens for r in rests], dtype=torch.long)
    slot = torch.arange(width)
    real = slot[None, :] >= (width - lengths)[:, None]  # [rows, width]: not padding
    # A prompt's tokens count from its cached prefix on, padding not counted, as `_left_padded` does;
    # a node sits where the last token of its prefix would, right after the prompt.
    rest_positions = (cached_t[:, None] + slot[None, :] - (width - lengths)[:, None]).clamp(min=0)
    node_positions = (cached_t + lengths)[:, None] + tree.depths[None, :] - 1
    positions = torch.cat([rest_positions, node_positions], dim=1)

    queries = width + n
    cache_keys = torch.arange(past)[None, :] >= (past - cached_t)[:, None]  # [rows, past]: not padding
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    # Prompt tokens attend causally to the prompt and to no node; nodes to the whole prompt and to their ancestors.
    prompt_keys = torch.cat([causal, torch.ones(n, width, dtype=torch.bool)])[None] & real[:, None, :]
    node_keys = torch.cat([torch.zeros(width, n, dtype=torch.bool), tree.sees])[None].expand(rows, -1, -1)
    allowed = torch.cat([cache_keys[:, None, :].expand(-1, queries, -1), prompt_keys, node_keys], dim=2)
    # Every query sees at least itself: a padding query that sees nothing has an undefined softmax
    # (NaN in some kernels), and its values reach real rows in the next layer as 0 * NaN.
    allowed[:, torch.arange(queries), past + torch.arange(queries)] = True
    mask = torch.zeros(rows, 1, queries, past + queries, dtype=dtype)
    mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    return ids, positions, mask


# A batch is cut early where left padding would pass this share of its real tokens. Padding is computed
# like any token, and on a CPU a pass costs about the same per token from a few hundred tokens on, so
# smaller batches lose little: of 64 grading chats in calls of 32 (the rest after the rubric prefix runs
# from 100 to 500 tokens), batches of 16 cut by size only added 34-43% padding, cut so 14-17%, and read
# 1.1-1.3x faster (benchmarks/option_batching.py, `batched_uncut`; results/benchmarks/README.md).
PADDING_SLACK = 0.25


def length_batches(lengths: Sequence[int], size: int, slack: float = PADDING_SLACK) -> list[list[int]]:
    """Indices of `lengths`, shortest first, in batches of at most `size`, each cut before the row that
    would make its padding (each row left-padded to the longest) exceed `slack` times its tokens."""
    batches: list[list[int]] = []
    batch: list[int] = []
    total = 0
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if batch and (len(batch) >= size or (len(batch) + 1) * lengths[i] > (1 + slack) * (total + lengths[i])):
            batches.append(batch)
            batch, total = [], 0
        batch.append(i)
        total += lengths[i]
    return batches + [batch] if batch else batches


def layer_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (keys, values), [batch, heads, tokens, head dim], of a transformers cache."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))  # transformers before 5


def stacked_cache(caches: Sequence[Any], cached: Sequence[int]):
    """One cache of len(caches) rows from single-row caches (None: nothing cached for that row) of
    `cached[i]` tokens, each left-padded with zeros to the longest; `tree_inputs` masks the padding."""
    from transformers import DynamicCache

    past = max(cached)
    layers = [layer_tensors(c) if c is not None else None for c in caches]
    like = next(t for t in layers if t is not None)
    stacked = []
    for depth, (keys, values) in enumerate(like):
        shape = (len(caches), keys.shape[1], past, keys.shape[3])
        k = keys.new_zeros(shape)
        v = values.new_zeros((shape[0], values.shape[1], past, values.shape[3]))
        for row, (tensors, n) in enumerate(zip(layers, cached)):
            if tensors is not None and n:
                k[row, :, past - n :] = tensors[depth][0][0, :, -n:]
                v[row, :, past - n :] = tensors[depth][1][0, :, -n:]
        stacked.append((k, v))
    return DynamicCache(stacked)


def cached_length(cache: Any) -> int:
    """Tokens that every layer of `cache` holds (a sliding-window layer may hold fewer than were read)."""
    return min(keys.shape[-2] for keys, _ in layer_tensors(cache))


def tree_reach(config: Any) -> float:
    """The longest sequence (prompt and option prefix) whose tree pass is exact under `config`: a
    custom mask replaces every layer's own, so a sliding-window layer is matched only within its
    window, and layers that are not attention (linear, recurrent) not at all (0)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(text, "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
        return 0  # flash and flex kernels take no dense custom mask
    types = set(getattr(text, "layer_types", None) or ["full_attention"])
    if not types <= {"full_attention", "sliding_attention"}:
        return 0
    window = getattr(text, "sliding_window", None)
    sliding = "sliding_attention" in types or (
        getattr(text, "layer_types", None) is None and getattr(text, "use_sliding_window", True)
    )
    return window if window and sliding else math.inf
