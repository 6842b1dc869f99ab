"""Exact scores through an OpenAI-compatible server (backbone.prompt_logprobs=echo): the real
llama-cpp-python server runs the packaged SmolLM2 GGUF, and its scores must agree with the
in-process `hf` provider running the same GGUF. The server computes an echo's log-probs in Python
(about 0.2 s a prompt token here), so the prompts are short."""

from __future__ import annotations

import json
import urllib.request

import fault_server as faults
import pytest
import torch
from conftest import compose_config

from ms.llm import BackendError, build_lm, provider_class
from ms.llm.openai import EchoLogprobsLM, OpenAILM
from ms.loop.validation import ConfigError, validate

# Both run the same Q4_1 GGUF, but hf de-quantizes it to float32 while llama.cpp multiplies the
# quantized blocks with 8-bit activations: a token's log-prob differs by up to ~0.5 nats (measured:
# more for unlikely tokens), a continuation's sum by up to 10% or 0.5 nats, whichever is more. The
# candidates below lie further apart than that (about -2, -5, -11, -18 nats), so their order is exact.
LOGPROB_TOLERANCE = dict(rel=0.1, abs=0.5)  # on a continuation's summed log-prob
PROBABILITY_TOLERANCE = 0.02  # on an option's probability

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def served(llama_server, smollm2):
    """The server as an echo backbone named by the converted GGUF's folder, so that its scored
    contexts use the model's chat template (llama-cpp-python ignores the request's model name)."""
    return EchoLogprobsLM(
        smollm2.tokenizer.name_or_path, base_url=f"{llama_server}/v1", timeout_s=300, max_concurrency=1
    )


def test_chat_context_is_the_hf_one(served, smollm2):
    # llama-cpp-python formats chats with the GGUF's own template, the one hf's tokenizer carries.
    assert served.chat_context(CHAT) == smollm2.chat_context(CHAT)
    assert served.chat_context(CHAT).startswith("<|im_start|>system\nAnswer briefly.<|im_end|>")


def test_loglikelihood_ranks_like_hf(served, smollm2):
    context = smollm2.chat_context(CHAT)
    candidates = ["The capital of France is Paris.", "Paris", "London", "Banana"]
    server = served.loglikelihood([context] * 4, candidates)
    local = smollm2.loglikelihood([context] * 4, candidates)
    assert [n for _, n in server] == [n for _, n in local]  # same tokens scored
    assert sorted(candidates, key=lambda c: -server[candidates.index(c)][0]) == sorted(
        candidates, key=lambda c: -local[candidates.index(c)][0]
    )
    for (s, _), (h, _) in zip(server, local):
        assert s == pytest.approx(h, **LOGPROB_TOLERANCE)
    assert served.usage.prompt_tokens > 0


def test_option_probabilities_match_hf(served, smollm2):
    chat = [
        {"role": "system", "content": "Reply with a number only."},
        {"role": "user", "content": "How many legs does a spider have?"},
    ]
    options = [str(v) for v in range(11)]  # "10" is two tokens here: "1", then "0"
    assert served._token_path("10") == ("1", "0")
    (server,) = served.option_probabilities([chat], options)
    (local,) = smollm2.option_probabilities([chat], options)
    assert server == pytest.approx(local, abs=PROBABILITY_TOLERANCE)
    assert max(server) > 0 and server[10] > 0


def completes(url: str, prompt: str) -> dict:
    body = {"prompt": prompt, "max_tokens": 1, "logprobs": 5, "temperature": 0}
    request = urllib.request.Request(
        f"{url}/v1/completions", data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    return json.load(urllib.request.urlopen(request, timeout=300))["choices"][0]


def test_next_tokens_where_the_reply_would_end(served, smollm2, llama_server):
    """llama-cpp-python sends no log-probs when its greedy next token ends the reply; the grammar
    that keeps it going must leave the log-probs as they are."""
    prompt = smollm2.chat_context(CHAT) + "The capital of France is Paris."
    reply = completes(llama_server, prompt)
    assert reply["text"] == "" and not reply["logprobs"]["tokens"]  # the case this test is about
    top = served._next_tokens(prompt, {"\n", " It"})
    with torch.inference_mode():
        local = smollm2._next_token_logprobs(smollm2._encode(prompt), [()])[()]
    for text in ("\n", " It"):
        (token,) = smollm2.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert top[text] == pytest.approx(float(local[token]), **LOGPROB_TOLERANCE)


def test_shifted_logprobs_are_an_error(served):
    # llama-cpp-python 0.3 pairs each token of a prompt that does not begin with the BOS token
    # (SmolLM2's <|im_start|>) with the next position's log-prob; reading them would be wrong.
    with pytest.raises(BackendError, match="shifted"):
        served.loglikelihood(["The quick brown fox"], [" jumps"])


# ---- servers without prompt log-probs ------------------------------------------------------------


@pytest.fixture(scope="module")
def fault():
    with faults.FaultServer() as running:
        yield running


@pytest.mark.parametrize(
    "reply",
    [faults.text_completion("a prompt and more"), faults.refused(404), faults.refused(400)],
    ids=["no-logprobs", "404", "400"],
)
def test_a_server_without_prompt_logprobs_is_a_clear_error(fault, reply):
    fault.play(reply)
    lm = EchoLogprobsLM("test", base_url=f"{fault.url}/v1", max_retries=2, backoff_s=0.05, timeout_s=5)
    with pytest.raises(BackendError, match="backbone.prompt_logprobs=echo") as caught:
        lm.loglikelihood(["a prompt"], [" and more"])
    assert fault.url in str(caught.value) and "prompt_logprobs=none" in str(caught.value)
    assert len(fault.hits) == 1  # not retried: asking again would not help


def test_a_server_that_does_not_echo_is_a_clear_error(fault):
    tokens = {"tokens": [" and"], "text_offset": [8], "token_logprobs": [-1.0], "top_logprobs": [{" and": -1.0}]}
    fault.play(faults.text_completion(" and", tokens))
    lm = EchoLogprobsLM("test", base_url=f"{fault.url}/v1", max_retries=0, timeout_s=5)
    with pytest.raises(BackendError, match="does not echo the prompt"):
        lm.loglikelihood(["a prompt"], [" and more"])


# ---- the setting ---------------------------------------------------------------------------------


def test_the_setting_picks_the_echo_backbone(tmp_path):
    plain = compose_config(["backbone=openai-compatible"]).backbone
    echo = compose_config(["backbone=openai-compatible", "backbone.prompt_logprobs=echo"]).backbone
    assert provider_class(plain) is OpenAILM and not OpenAILM.scores_text
    assert provider_class(echo) is EchoLogprobsLM
    assert EchoLogprobsLM.scores_text and EchoLogprobsLM.reads_probabilities
    lm = build_lm(echo, tmp_path, use_response_cache=False)
    assert isinstance(lm, EchoLogprobsLM) and lm.base_url == echo.base_url


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match="backbone.prompt_logprobs") as caught:
        validate(compose_config(["backbone=openai-compatible", "backbone.prompt_logprobs=vllm"]))
    assert "none, echo" in str(caught.value)


def test_prompt_logprobs_is_no_setting_of_an_in_process_backbone():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="backbone.prompt_logprobs") as caught:
        compose_config(["backbone.prompt_logprobs=echo"])  # the default backbone runs in-process
    assert "not in 'HFSettings'" in str(caught.value.__cause__)
