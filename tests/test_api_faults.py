"""API faults against a fault-injecting server on 127.0.0.1 (tests/fault_server.py): a 2xx reply
that is no usable chat completion is retried, then reported plainly; Retry-After is honoured, capped."""

from __future__ import annotations

import logging

import fault_server as faults
import pytest

from ms.llm import BackendError
from ms.llm.mistral import MistralLM
from ms.llm.openai import OpenAILM

# ---- API replies: unusable 2xx replies retried, Retry-After honoured ---------------------------


@pytest.fixture(scope="module")
def server():
    with faults.FaultServer() as running:
        yield running


def api_lm(kind: str, url: str, **kwargs):
    options = dict(max_retries=2, backoff_s=0.05, timeout_s=5, max_concurrency=1) | kwargs
    if kind == "openai":
        return OpenAILM("test", base_url=f"{url}/v1", **options)
    return MistralLM("test", base_url=url, **options)


@pytest.mark.parametrize("kind", ["openai", "mistral"])
@pytest.mark.parametrize(
    "reply, cause",
    [
        (faults.not_json(), "not JSON"),
        (faults.not_json("application/json"), "not"),  # labelled JSON, yet not JSON
        (faults.empty_choices(), "no choices"),
        (faults.no_content(), "no message content"),
    ],
)
def test_an_unusable_2xx_reply_is_retried_then_reported(server, kind, reply, cause):
    server.play(reply)
    lm = api_lm(kind, server.url)
    with pytest.raises(BackendError) as caught:
        lm.generate(["hello"])
    message = str(caught.value)
    assert len(server.hits) == 3 and lm.usage.retries == 2
    assert f"request to {server.url}" in message and "after 3 attempts" in message
    assert "no usable chat completion came back" in message and cause in message


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_a_good_reply_after_an_unusable_one_is_used(server, kind):
    server.play(faults.empty_choices(), faults.ok())
    lm = api_lm(kind, server.url)
    assert lm.generate(["hello"]) == [faults.ANSWER]
    assert len(server.hits) == 2 and lm.usage.retries == 1 and lm.usage.completion_tokens == 2


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_retry_after_in_seconds_is_honoured(server, kind, caplog):
    server.play(faults.rate_limited("1"), faults.ok())
    with caplog.at_level(logging.WARNING, logger="ms.llm.api"):
        assert api_lm(kind, server.url).generate(["hello"]) == [faults.ANSWER]
    [gap] = server.gaps()
    assert 0.95 <= gap < 3  # the backoff alone would have waited 0.05 s
    assert any("Retry-After asked (1.0s" in r.message for r in caplog.records)


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_retry_after_as_an_http_date_is_honoured(server, kind):
    server.play(lambda: faults.rate_limited(faults.http_date(3)), faults.ok())
    assert api_lm(kind, server.url).generate(["hello"]) == [faults.ANSWER]
    [gap] = server.gaps()
    assert 1.5 <= gap < 4.5  # an HTTP date has whole seconds: 3 s from now is 2 to 3 s away


def test_retry_after_is_capped_by_max_retry_wait_s(server):
    server.play(faults.rate_limited("30"), faults.ok())
    assert api_lm("openai", server.url, max_retry_wait_s=0.3).generate(["hello"]) == [faults.ANSWER]
    [gap] = server.gaps()
    assert 0.25 <= gap < 2


def test_rate_limited_to_the_end_names_the_endpoint_and_the_cause(server):
    server.play(faults.rate_limited("0"))
    with pytest.raises(BackendError, match=f"request to {server.url}/v1 failed after 2 attempts: RateLimitError"):
        api_lm("openai", server.url, max_retries=1).generate(["hello"])
