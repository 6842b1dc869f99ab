"""bfloat16 through backbone.dtype: a checked setting, its resolved value in the cell record, and the
response cache keyed by it; SmolLM2's scores in bfloat16 against float32's, and their own batch-size
invariance (float32's 1e-4 stays test_llm's)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, compose_config

from ms.common.errors import UserError
from ms.llm.hf import model_id


def test_a_dtype_outside_the_choices_is_refused_naming_the_key():
    from ms.loop.validation import validate

    with pytest.raises(UserError, match=r"backbone.dtype.*bfloat16"):
        validate(compose_config(["backbone.dtype=bf16"]))


def test_the_cache_key_names_every_float_type_but_float32():
    assert model_id("m", "w.gguf") == model_id("m", "w.gguf", dtype="float32") == "m::w.gguf"  # warm caches still hit
    assert model_id("m", "w.gguf", dtype="bfloat16") == "m::w.gguf#dtype=bfloat16"


def test_the_cell_records_the_resolved_dtype_and_refuses_another(tmp_path):
    from ms.loop.cell import check_same_cell, record

    cfg = compose_config(["scorer.threshold=15"])
    cell = record(cfg, "aaa")
    assert cell["dtypes"] == {"smollm2": "float32"}  # auto, resolved on this CPU machine
    check_same_cell(tmp_path, {"complete": True, "cell": cell}, cfg, "aaa")
    on_a_gpu = {**cell, "dtypes": {"smollm2": "float16"}}  # the same settings where auto meant float16
    with pytest.raises(UserError, match="backbone smollm2's resolved dtype"):
        check_same_cell(tmp_path, {"complete": True, "cell": on_a_gpu}, cfg, "aaa")


@pytest.fixture(scope="module")
def smollm2_bf16(models_cache):
    from ms.llm import build_lm

    return build_lm(compose_config(["backbone.dtype=bfloat16"]).backbone, models_cache, use_response_cache=False)


def references():
    """Six questions and their references, two from each of three domains: one batch of 8 holds them all, one
    of 3 half. Pun's are short and sonnet's long (150 to 620 characters), so a batch pads; study's (over 1,000
    characters) are left out to keep it short: bfloat16 is slow on a CPU without bfloat16 arithmetic."""
    rows = [
        json.loads(line)
        for name in ("riddle", "sonnet", "pun")
        for line in (REPO / "data" / f"{name}.jsonl").read_text().splitlines()[:2]
    ]
    return [r["question"] for r in rows], [r["answer"] for r in rows]


def test_bfloat16_scores_stay_near_float32_and_do_not_move_with_the_batch_size(smollm2, smollm2_bf16):
    import torch

    assert smollm2_bf16.net.dtype == torch.bfloat16 and smollm2.net.dtype == torch.float32
    assert smollm2_bf16.cache_model.endswith("#dtype=bfloat16")
    questions, answers = references()
    contexts = [smollm2.chat_context(q) for q in questions]
    full = [s / n for s, n in smollm2.loglikelihood(contexts, answers)]
    per_size = {}
    for size in (1, 3, 8):
        smollm2_bf16.batch_size = size
        per_size[size] = [s / n for s, n in smollm2_bf16.loglikelihood(contexts, answers)]
    # Per token, bfloat16's 8-bit mantissa moves a score by hundredths of a nat, not tenths.
    assert max(abs(a - b) for a, b in zip(per_size[8], full)) < 0.05
    for size in (3, 8):  # padding changes the reduction order, so bfloat16 rounds differently per batch
        assert max(abs(a - b) for a, b in zip(per_size[size], per_size[1])) < 0.02
