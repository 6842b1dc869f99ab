"""Option probabilities read in batches (ms.llm.option_tree): the tree of option prefixes appended
to left-padded prompts, several chats per forward pass, gives the probabilities that one chat at a
time gives, on real grading prompts of the rubric gate."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ms.agents import default_agents
from ms.config import ScorerConfig
from ms.gates.scorer import SCORE_OPTIONS, Scorer, load_rubrics
from ms.llm.option_tree import OptionTree, length_batches, tree_inputs, tree_reach
from ms.llm.options import OptionPaths

DATA = Path(__file__).resolve().parent.parent / "data"
TOLERANCE = 1e-4  # the batch-size invariance of loglikelihood (test_llm.py), in float32


def grading_items(agents: list[str], per_agent: int = 1) -> list[tuple[str, str, str, str]]:
    """(agent, rubric, question, answer) of the first seed pairs of `agents`, as the gate grades them."""
    known = default_agents()
    items = []
    for name in agents:
        rows = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        items += [(name, known[name].rubric, r["question"], r["answer"]) for r in rows[:per_agent]]
    return items


def probabilities(lm, chats, shared, *, batching: bool, batch_size: int) -> list[list[float]]:
    saved = lm.option_batching, lm.batch_size
    lm.option_batching, lm.batch_size = batching, batch_size
    try:
        return lm.option_probabilities(chats, SCORE_OPTIONS, shared)
    finally:
        lm.option_batching, lm.batch_size = saved


def largest_difference(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


# ---- the tree and the batch it makes, without a model -------------------------------------------


def test_the_tree_holds_every_proper_prefix_once_each_seeing_its_ancestors():
    tree = OptionTree(OptionPaths([(1,), (2,), (1, 0), (1, 0, 0)]).prefixes)
    assert tree.nodes == [(1,), (1, 0)] and tree.tokens == [1, 0] and tree.depth == 2
    assert tree.sees.tolist() == [[True, False], [True, True]]
    assert [tree.row_of(p) for p in [(), (1,), (1, 0)]] == [0, 1, 2]
    # The scores 0..100 with one token per digit: 1..9, then 10 on the way to 100.
    digits = OptionTree(OptionPaths([tuple(int(c) for c in s) for s in SCORE_OPTIONS]).prefixes)
    assert len(digits) == 10 and digits.nodes[-1] == (1, 0)


def test_padding_is_masked_and_positions_count_real_tokens_after_the_cached_prefix():
    tree = OptionTree([(), (7,), (8,), (7, 9)])  # nodes (7,), (8,), (7, 9)
    ids, positions, mask = tree_inputs([[11, 12, 13], [21]], cached=[0, 2], tree=tree, pad_id=0, dtype=torch.float32)
    assert ids.tolist() == [[11, 12, 13, 7, 8, 9], [0, 0, 21, 7, 8, 9]]
    # Row 0: nothing cached, 3 tokens; row 1: 2 cached tokens, then 1. A node sits after its prompt at its depth.
    # (Padding's positions are never seen.)
    assert positions[0].tolist() == [0, 1, 2, 3, 3, 4] and positions[1, 2:].tolist() == [2, 3, 3, 4]
    seen = mask[:, 0] == 0  # [rows, queries, keys]; keys: 2 cache slots, then the 6 inputs
    assert mask.shape == (2, 1, 6, 8)
    # Row 0 has no cache: its two cache slots are padding, seen by no query but none (queries see themselves).
    assert not seen[0, :, :2].any()
    # Row 1's padding (inputs 0 and 1) is seen by no other query.
    for q in range(6):
        assert seen[1, q, 2:4].tolist() == [q == 0, q == 1]
    assert seen[1, 2].tolist() == [True, True, False, False, True, False, False, False]
    # Nodes see the prompt and their ancestors only: (7, 9) sees (7,) and itself, not its uncle (8,).
    assert seen[0, 5].tolist() == [False, False, True, True, True, True, False, True]
    assert seen[0, 4].tolist() == [False, False, True, True, True, False, True, False]
    # Prompt tokens see no node and nothing after themselves.
    assert seen[0, 1].tolist() == [False, False, True, True, False, False, False, False]
    # Options of one token each need the prompt's distribution only: no node.
    ids, positions, mask = tree_inputs([[5, 6], [7]], [0, 0], OptionTree([()]), pad_id=0, dtype=torch.float32)
    assert ids.tolist() == [[5, 6], [0, 7]] and mask.shape == (2, 1, 2, 2)


def test_batches_hold_similar_lengths_and_are_cut_before_much_padding():
    lengths = [100, 500, 110, 120, 480, 105]
    assert length_batches(lengths, 16, slack=float("inf")) == [[0, 5, 2, 3, 4, 1]]
    assert length_batches(lengths, 2, slack=float("inf")) == [[0, 5], [2, 3], [4, 1]]
    # 100..120 pad little; 480 beside them would be mostly padding, so it starts a batch of its own.
    assert length_batches(lengths, 16, slack=0.25) == [[0, 5, 2, 3], [4, 1]]
    assert length_batches([], 4) == []


def test_the_tree_pass_is_refused_beyond_a_sliding_window_and_on_layers_that_are_not_attention():
    from types import SimpleNamespace as Config

    assert tree_reach(Config(_attn_implementation="sdpa")) == float("inf")
    assert tree_reach(Config(layer_types=["full_attention"], sliding_window=4096, use_sliding_window=False)) == float(
        "inf"
    )
    assert tree_reach(Config(layer_types=["sliding_attention", "full_attention"], sliding_window=512)) == 512
    assert tree_reach(Config(sliding_window=4096)) == 4096  # an older config with no layer types: assume it slides
    assert tree_reach(Config(layer_types=["linear_attention", "full_attention"])) == 0
    assert tree_reach(Config(_attn_implementation="flash_attention_2")) == 0


# ---- real prompts on real models ---------------------------------------------------------------


def test_batched_option_probabilities_equal_one_chat_at_a_time_on_real_grading_prompts(smollm2):
    """Grading prompts of five agents under three rubrics (the rubric prefixes 296-394 tokens, the
    chats about 400-740), plus one short pair: batches mix rubrics and lengths, so rows carry left
    padding both in their stacked prefix cache and in what they read after it."""
    items = grading_items(["riddle", "limerick", "puzzle", "study", "travel"])
    items.append(("riddle", "logic", "What has keys but opens no locks?", "A piano."))
    gate = Scorer(smollm2, load_rubrics({rubric for _, rubric, _, _ in items}), ScorerConfig())
    chats = [gate.prompt(*item) for item in items]
    shared = [gate.rubric_prefix(rubric) for rubric in sorted({rubric for _, rubric, _, _ in items})]
    lengths = [len(smollm2._encode(smollm2.chat_context(c))) for c in chats]
    assert max(lengths) - min(lengths) > 200 and len(shared) == 3  # padding and mixed prefixes, really

    before = smollm2.usage.prompt_tokens
    one_by_one = probabilities(smollm2, chats, shared, batching=False, batch_size=1)
    assert smollm2.usage.prompt_tokens - before == sum(lengths)
    # The comparison is not vacuous: the grader puts real mass on the scores, and on different ones per pair.
    assert all(0.05 < sum(row) <= 1 + 1e-6 for row in one_by_one)
    assert len({max(range(101), key=row.__getitem__) for row in one_by_one}) > 1

    runs = {
        "batch 4, rubric caches": probabilities(smollm2, chats, shared, batching=True, batch_size=4),
        "batch 4, no caches": probabilities(smollm2, chats, [], batching=True, batch_size=4),
    }
    for name, batched in runs.items():
        assert largest_difference(batched, one_by_one) <= TOLERANCE, name
    before = smollm2.usage.prompt_tokens
    probabilities(smollm2, chats[:2], shared, batching=True, batch_size=2)
    assert smollm2.usage.prompt_tokens - before == sum(lengths[:2])  # accounting as one at a time


def test_gemma3_reads_in_batches_within_its_sliding_window_and_one_at_a_time_beyond(gemma3, monkeypatch):
    """Gemma 3 attends within 512 tokens on five of six layers: a custom mask would let them see
    further, so a chat longer than the window is read as before, one at a time."""
    assert tree_reach(gemma3.net.config) == 512
    items = grading_items(["riddle", "puzzle"])
    items.append(("riddle", "logic", "What has keys but opens no locks?", "A piano."))
    items.append(("riddle", "logic", "What has keys but opens no locks?", "A piano. " * 120))  # beyond 512
    gate = Scorer(gemma3, load_rubrics({rubric for _, rubric, _, _ in items}), ScorerConfig())
    chats = [gate.prompt(*item) for item in items]
    shared = [gate.rubric_prefix(rubric) for rubric in sorted({rubric for _, rubric, _, _ in items})]
    lengths = [len(gemma3._encode(gemma3.chat_context(c))) for c in chats]
    assert max(lengths) > 512 > sorted(lengths)[-2]

    one_by_one = probabilities(gemma3, chats, shared, batching=False, batch_size=1)
    alone = []
    read_alone = gemma3._next_token_logprobs
    monkeypatch.setattr(
        gemma3, "_next_token_logprobs", lambda context, *a: alone.append(context) or read_alone(context, *a)
    )
    batched = probabilities(gemma3, chats, shared, batching=True, batch_size=4)
    assert [len(c) for c in alone] == [max(lengths)]
    assert all(sum(row) > 0.01 for row in one_by_one)
    assert largest_difference(batched, one_by_one) <= TOLERANCE
