"""Sampled replies that are a function of their request: what `LM.sample` keys and seeds each sample by,
and the decoding step that draws every row of a batch with its own random stream (ms.llm.hf)."""

from typing import Any, Sequence

from ms.llm.cache import request_key


def sample_params(params: dict[str, Any], seed: int, index: int) -> dict[str, Any]:
    """The cache-key params of sample `index` of a prompt: a greedy request's params hold no seed or
    index, so a sample never replays a greedy reply, nor a greedy request a sample."""
    return {**params, "seed": seed, "index": index}


def sample_seed(chat: Sequence[dict], seed: int, index: int) -> int:
    """The random seed of sample `index` of `chat` in a run seeded `seed`: a function of these alone,
    so a sample is the same whatever else shares its batch (60 bits: any torch generator takes it)."""
    return int(request_key({"chat": list(chat), "seed": seed, "index": index})[:15], 16)


def seeded_sampler(seeds: Sequence[int], temperature: float, device):
    """A transformers logits processor for greedy decoding that samples instead: each row's next token is
    drawn at `temperature` from that row's own generator (seeded `seeds[row]`), and every other token is
    masked out, so the greedy step takes the drawn one. Row r's draws depend on its seed alone, where
    `do_sample` would draw every row from torch's one global stream, in an order set by the batch."""
    import torch
    from transformers import LogitsProcessor

    generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    class SeededSampler(LogitsProcessor):
        def __call__(self, input_ids, scores):
            probs = torch.softmax(scores.float() / temperature, dim=-1)
            picks = torch.cat([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, generators)])
            kept = torch.full_like(scores, float("-inf"))
            return kept.scatter_(1, picks[:, None], 0.0)

    return SeededSampler()
