"""The LLM layer on real models: the packaged SmolLM2 in-process, and a real llama.cpp server
on 127.0.0.1 for the OpenAI and Mistral clients."""

from __future__ import annotations

import multiprocessing as mp
import socket
import threading
import time

import pytest
import torch
from conftest import compose_config

from ms.llm import BackendError, ResponseCache
from ms.llm.base import LoglikelihoodUnsupported
from ms.llm.mistral import MistralLM
from ms.llm.openai import OpenAILM


def test_smollm2_generates_offline(smollm2):
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    out = smollm2.generate(["What is the capital of France?", "Write one word: a color."], max_new_tokens=16)
    assert len(out) == 2 and all(isinstance(t, str) and t.strip() for t in out)
    assert smollm2.usage.completion_tokens > 0


def test_stop_strings_cut_the_output(smollm2):
    free = smollm2.generate(["Count from 1 to 10, separated by commas."], max_new_tokens=30)[0]
    assert "," in free
    cut = smollm2.generate(["Count from 1 to 10, separated by commas."], max_new_tokens=30, stop=[","])[0]
    assert "," not in cut and free.startswith(cut)


def plain_logprob(lm, context: str, continuation: str) -> float:
    """Reference: one unpadded forward pass over the joined ids, summing the continuation's log-probs."""
    ctx = lm._encode(context)
    cont = lm.tokenizer(continuation, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logprobs = torch.log_softmax(lm.net(ids).logits[0, :-1].float(), -1)
    targets = ids[0, 1:]
    return float(logprobs[torch.arange(len(targets)), targets][-len(cont) :].sum())


def test_loglikelihood_matches_forward_pass_and_batching(smollm2):
    contexts = [
        smollm2.chat_context("What is 2 + 2?"),
        smollm2.chat_context(
            "Write a long, careful description of a lighthouse at night, "
            "with its keeper, the sea, the fog, and the ships passing by."
        ),
        "The quick brown fox",
    ]
    continuations = ["4", "The lamp turns slowly above the black water.", " jumps over the lazy dog."]
    batched = smollm2.loglikelihood(contexts, continuations)
    singles = [smollm2.loglikelihood([c], [x])[0] for c, x in zip(contexts, continuations)]
    for (b_sum, b_n), (s_sum, s_n), ctx, cont in zip(batched, singles, contexts, continuations):
        assert b_n == s_n == len(smollm2.tokenizer(cont, add_special_tokens=False)["input_ids"])
        assert b_sum == pytest.approx(s_sum, abs=1e-4)
        assert b_sum == pytest.approx(plain_logprob(smollm2, ctx, cont), abs=1e-4)
        assert b_sum < 0


def test_ref_logprob_per_question_does_not_change_with_the_batch_size(smollm2):
    """lm-evaluation-harness users found scores shifting with batch size (its issues #704, #1645): here
    left padding and position ids keep every row's arithmetic its own."""
    import json

    from conftest import REPO

    rows = [
        json.loads(line)
        for name in ("riddle", "pun", "limerick")
        for line in (REPO / "data" / f"{name}.jsonl").read_text().splitlines()[:3]
    ]
    contexts = [smollm2.chat_context(r["question"]) for r in rows]  # prompts and answers of many lengths
    references = [r["answer"] for r in rows]
    saved = smollm2.batch_size
    try:
        per_batch_size = {}
        for size in (1, 3, 8):
            smollm2.batch_size = size
            per_batch_size[size] = [total / n for total, n in smollm2.loglikelihood(contexts, references)]
    finally:
        smollm2.batch_size = saved
    for size in (3, 8):
        assert per_batch_size[size] == pytest.approx(per_batch_size[1], abs=1e-4), size


def test_a_long_call_reports_progress_batch_by_batch_and_cache_hits_at_once(smollm2, tmp_path, monkeypatch):
    monkeypatch.setattr(smollm2, "batch_size", 2)
    monkeypatch.setattr(smollm2, "cache", ResponseCache(tmp_path / "responses.sqlite"))
    contexts = [smollm2.chat_context(f"Say {word}.") for word in ("yes", "no", "maybe", "never", "always")]
    done: list[int] = []
    with smollm2.reporting(done.append):
        smollm2.loglikelihood(contexts[:2], [" Sure."] * 2)  # one batch of 2
        smollm2.loglikelihood(contexts, [" Sure."] * 5)  # 2 from the cache at once, then batches of 2 and 1
    assert done == [2, 2, 2, 1]
    smollm2.loglikelihood(contexts, [" Sure."] * 5)  # outside the block nothing is reported
    assert done == [2, 2, 2, 1]


def test_loglikelihood_prefers_the_likely_continuation(smollm2):
    ctx = smollm2.chat_context("What is the capital of France? Answer in one word.")
    (likely, n1), (unlikely, n2) = smollm2.loglikelihood([ctx, ctx], ["Paris", "Banana"])
    assert likely / n1 > unlikely / n2


def test_cache_returns_identical_text_and_counts_hits(models_cache, tmp_path):
    from ms.llm import build_lm

    cfg = compose_config()
    lm = build_lm(cfg.backbone, models_cache)
    lm.cache = ResponseCache(tmp_path / "responses.sqlite")
    prompts = ["Name a fruit.", "Name a planet."]
    first = lm.generate(prompts, max_new_tokens=8)
    assert (lm.usage.cache_hits, lm.usage.cache_misses, lm.usage.calls) == (0, 2, 2)
    second = lm.generate(prompts, max_new_tokens=8)
    assert second == first
    assert (lm.usage.cache_hits, lm.usage.calls) == (2, 2)
    lm.generate(prompts, max_new_tokens=9)  # other parameters are another request
    assert lm.usage.calls == 4


def _write_entries(path: str, tag: str, n: int, barrier) -> None:
    cache = ResponseCache(path)
    barrier.wait()
    for i in range(n):
        cache.put_many({f"{tag}-{i}": {"text": f"{tag} {i}"}})


def test_two_processes_write_the_cache_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_write_entries, args=(path, tag, 200, barrier)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    found = ResponseCache(path).get_many([f"{t}-{i}" for t in "ab" for i in range(200)])
    assert len(found) == 400 and found["b-199"] == {"text": "b 199"}


# ---- API providers against a real OpenAI-compatible server ------------------------------------


def api_lm(kind: str, base_url: str, **kwargs):
    if kind == "openai":
        return OpenAILM("smollm2", base_url=f"{base_url}/v1", **kwargs)
    return MistralLM("smollm2", base_url=base_url, **kwargs)


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_api_provider_completes_a_batch_of_8(llama_server, kind):
    lm = api_lm(kind, llama_server, max_new_tokens=12, max_concurrency=4)
    prompts = [
        f"Give one word that rhymes with '{w}'." for w in ["cat", "dog", "sun", "tree", "blue", "night", "rain", "star"]
    ]
    out = lm.generate(prompts)
    assert len(out) == 8 and all(t.strip() for t in out)
    assert lm.usage.calls == 8 and lm.usage.prompt_tokens > 0 and lm.usage.completion_tokens > 0
    with pytest.raises(LoglikelihoodUnsupported, match="verbalized"):
        lm.loglikelihood(["a"], ["b"])


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_api_provider_retries_then_fails_when_server_is_down(kind, caplog):
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lm = api_lm(kind, f"http://127.0.0.1:{port}", max_retries=2, backoff_s=0.05, timeout_s=2)
    started = time.perf_counter()
    with pytest.raises(BackendError, match="after 3 attempts"):
        lm.generate(["hello"])
    assert time.perf_counter() - started >= 0.05 + 0.1  # two backoffs: 0.05 s, then 0.1 s
    assert sum("retrying" in r.message for r in caplog.records) == 2


@pytest.fixture
def silent_server():
    """A socket that accepts connections and never answers: every request times out."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("kind", ["openai", "mistral"])
def test_api_provider_times_out_retries_then_fails(kind, silent_server):
    lm = api_lm(kind, silent_server, max_retries=1, backoff_s=0.05, timeout_s=0.5)
    started = time.perf_counter()
    with pytest.raises(BackendError, match="after 2 attempts"):
        lm.generate(["hello"])
    assert time.perf_counter() - started >= 2 * 0.5


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MS_TEST_KEY", raising=False)
    with pytest.raises(BackendError, match="MS_TEST_KEY"):
        OpenAILM("gpt-4o", api_key_env="MS_TEST_KEY")
    with pytest.raises(BackendError, match="MS_TEST_KEY"):
        MistralLM("open-mistral-7b", api_key_env="MS_TEST_KEY")


def test_unknown_provider_is_a_clear_error(models_cache):
    from ms.llm import build_lm

    cfg = compose_config(["backbone.provider=anthropic"])
    with pytest.raises(BackendError, match="unknown backbone.provider 'anthropic'"):
        build_lm(cfg.backbone, models_cache)


def test_misspelled_backbone_key_fails_at_composition():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="backbone.batch_sise") as caught:
        compose_config(["backbone.batch_sise=4"])
    assert "not in 'HFSettings'" in str(caught.value.__cause__)  # smollm2's provider's settings


def test_a_cache_told_locked_while_another_process_recovers_it_waits_and_opens(tmp_path, monkeypatch):
    # SQLite can answer "database is locked" at once, without its busy timeout, while another
    # process recovers the WAL a killed writer left (seen in a resumed joblib sweep): opening waits.
    import sqlite3

    from ms.llm import cache as cache_module

    real_connect, refusals = sqlite3.connect, [2]

    class RefusingOnce:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if refusals[0] > 0 and sql.startswith("PRAGMA journal_mode"):
                refusals[0] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def __enter__(self):
            return self.conn.__enter__()

        def __exit__(self, *exc):
            return self.conn.__exit__(*exc)

    monkeypatch.setattr(cache_module.sqlite3, "connect", lambda *a, **k: RefusingOnce(real_connect(*a, **k)))
    cache = ResponseCache(tmp_path / "responses.sqlite", timeout_s=5)
    cache.put_many({"k": "v"})
    assert cache.get_many(["k"]) == {"k": "v"} and refusals[0] == 0


def test_a_request_repeated_within_one_call_is_computed_once_and_counted_as_a_hit(tmp_path):
    """The utility gate sends each probe's baseline prompt once per candidate that probes it."""
    from fakes import FakeLM

    # It records what reaches the backend; the scores are a stand-in.
    lm = FakeLM(
        default="a reply",
        scores=lambda c, x: (-float(len(c + x)), len(x)),
        cache=ResponseCache(tmp_path / "responses.sqlite"),
    )
    out = lm.loglikelihood(["a", "bb", "a", "a"], ["x", "y", "x", "z"])
    assert out == [(-2.0, 1), (-3.0, 1), (-2.0, 1), (-2.0, 1)]
    assert lm.scored == [("a", "x"), ("bb", "y"), ("a", "z")]
    assert (lm.usage.calls, lm.usage.cache_misses, lm.usage.cache_hits) == (3, 3, 1)
    # Sampled generation is not a function of its request: repeats are sampled again.
    lm.generate(["p", "p"], temperature=0.7)
    assert len(lm.chats) == 2
