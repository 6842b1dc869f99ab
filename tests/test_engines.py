"""Generation engines of the hf provider (backbone.engine) on the real packaged SmolLM2: llama.cpp
in-process against transformers, their cache keys, and the error when an engine's package is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, compose_config, gguf_path

from ms.llm import BackendError, ResponseCache, build_lm
from ms.llm.hf import make_generator


@pytest.fixture(scope="session")
def llamacpp(models_cache):
    cfg = compose_config(["backbone.engine=llamacpp"])
    return build_lm(cfg.backbone, models_cache, use_response_cache=False)


def test_llamacpp_gives_hf_greedy_text_where_they_agree(smollm2, llamacpp):
    # A prompt whose greedy reply both engines were seen to share: the engines differ in
    # arithmetic only (4-bit activations in llama.cpp), so a short factual reply stays the same.
    prompt = ["What is 2+2?"]
    hf = smollm2.generate(prompt, max_new_tokens=12)[0]
    fast = llamacpp.generate(prompt, max_new_tokens=12)[0]
    assert fast.split()[:6] == hf.split()[:6], (hf, fast)


def test_llamacpp_stops_at_max_new_tokens_and_counts_usage(llamacpp):
    before = llamacpp.usage.completion_tokens, llamacpp.usage.prompt_tokens
    out = llamacpp.generate(["Write a long story about a dragon.", "List ten fruits."], max_new_tokens=5)
    assert all(text.strip() for text in out)
    assert llamacpp.usage.completion_tokens - before[0] == 10  # neither reply can end in 5 tokens
    prompt_tokens = sum(
        len(llamacpp._encode(llamacpp.chat_context(p)))
        for p in ["Write a long story about a dragon.", "List ten fruits."]
    )
    assert llamacpp.usage.prompt_tokens - before[1] == prompt_tokens


def test_llamacpp_honours_stop_strings(llamacpp):
    prompt = ["Count from 1 to 10, separated by commas."]
    free = llamacpp.generate(prompt, max_new_tokens=30)[0]
    assert "," in free
    before = llamacpp.usage.completion_tokens
    cut = llamacpp.generate(prompt, max_new_tokens=30, stop=[","])[0]
    assert "," not in cut and free.startswith(cut)
    assert llamacpp.usage.completion_tokens - before < 30  # it stopped decoding at the stop string


def test_llamacpp_batch_gives_the_texts_of_one_at_a_time(llamacpp):
    prompts = [
        "What is the capital of France?",
        "Name three colours.",
        "Write one word: a color.",
        "Give me a haiku about rain.",
    ]
    alone = [llamacpp.generate([p], max_new_tokens=16)[0] for p in prompts]
    together = llamacpp.generate(prompts, max_new_tokens=16)
    assert together == alone


def test_cache_keys_name_a_non_hf_engine(smollm2, llamacpp, tmp_path):
    # hf's keys are what they were before engines existed, so existing caches still hit.
    assert smollm2._key_model("generate") == smollm2.cache_model
    assert llamacpp._key_model("generate") != smollm2._key_model("generate")
    # Scoring runs on transformers under either engine, so its cached values are shared.
    assert llamacpp._key_model("loglikelihood") == smollm2._key_model("loglikelihood")
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        smollm2.cache = llamacpp.cache = cache
        smollm2.generate(["Name a fruit."], max_new_tokens=4)
        misses = llamacpp.usage.cache_misses
        llamacpp.generate(["Name a fruit."], max_new_tokens=4)  # hf's reply is not replayed
        assert llamacpp.usage.cache_misses == misses + 1
        llamacpp.generate(["Name a fruit."], max_new_tokens=4)  # its own is
        assert llamacpp.usage.cache_misses == misses + 1
    finally:
        smollm2.cache = llamacpp.cache = None
        cache.close()


@pytest.mark.parametrize("engine,package", [("llamacpp", "llama_cpp"), ("ct2", "ctranslate2")])
def test_missing_engine_package_is_a_one_line_error(monkeypatch, smollm2, engine, package):
    monkeypatch.setitem(sys.modules, package, None)  # `import package` now raises ImportError
    with pytest.raises(BackendError) as error:
        make_generator(engine, gguf_path(), smollm2.net.name_or_path, smollm2.tokenizer, batch_size=4, max_length=512)
    message = str(error.value)
    assert f"backbone.engine={engine}" in message and "\n" not in message


def test_unknown_engine_is_a_clear_error(models_cache):
    cfg = compose_config(["backbone.engine=hf"])
    cfg.backbone.engine = "vllm"
    with pytest.raises(BackendError, match="backbone.engine"):
        build_lm(cfg.backbone, models_cache, use_response_cache=False)


CT2_CHECK = """
import sys
sys.path.insert(0, "tests")
from conftest import compose_config
from ms.llm import build_lm

ct2 = build_lm(compose_config(["backbone.engine=ct2"]).backbone, sys.argv[1], use_response_cache=False)
prompts = ["What is the capital of France?", "Write a long story about a dragon."]
alone = [ct2.generate([p], max_new_tokens=6)[0] for p in prompts]
assert all(text.strip() for text in alone), alone
before = ct2.usage.completion_tokens
assert ct2.generate(prompts, max_new_tokens=6) == alone
assert ct2.usage.completion_tokens - before <= 12
cut = ct2.generate(["Count from 1 to 10, separated by commas."], max_new_tokens=30, stop=[","])[0]
assert cut and "," not in cut, cut
"""


def test_ct2_generates_stops_and_batches_like_one_at_a_time(models_cache):
    # In a process of its own: CTranslate2's OpenMP runtime and llama.cpp's, loaded together in
    # this session's process, aborted it at exit (seen here, rc 134). A run loads one engine.
    done = subprocess.run(
        [sys.executable, "-c", CT2_CHECK, str(models_cache)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_llamacpp_f16_gives_hf_greedy_text(smollm2, models_cache):
    # f16 holds the packaged Q4_1 weights' values and keeps activations in f16 (no 8-bit
    # activations as with Q4_1): 49 of 50 agent prompts gave hf's exact greedy text in the benchmark.
    cfg = compose_config(["backbone.engine=llamacpp-f16"])
    f16 = build_lm(cfg.backbone, models_cache, use_response_cache=False)
    prompts = ["What is 2+2?", "Name three colours.", "What is the capital of France?"]
    assert f16.generate(prompts, max_new_tokens=16) == smollm2.generate(prompts, max_new_tokens=16)
