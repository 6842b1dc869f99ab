"""Plan mode (ms.plan.planner, `ms-run ... +plan=true`): the calls a run will make, per role, worked out
before anything loads. The end-to-end check against a real run is in test_pipeline.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, compose_config
from test_pipeline import TINY

from ms.plan.planner import plan_run


def by_role(plan) -> dict:
    return {r.role: r for r in plan.rows}


def test_plan_of_the_tiny_run_counts_every_call_without_loading_anything(tmp_path):
    cfg = compose_config(TINY + [f"cache_dir={tmp_path / 'cache'}"])
    rows = by_role(plan_run(cfg))
    # 2 agents x 2 stream questions, each answered once and graded once (the gate reads probabilities);
    # threshold 0 admits all 4, and each mines 3 candidates from its scope's 4 seeds and itself;
    # 2 test questions x 2 fills x (a generated answer for BERTScore + one ref_logprob pass).
    assert {role: r.calls for role, r in rows.items()} == {
        "answer": 4,
        "score": 4,
        "utility": 0,
        "label": 12,
        "summarize": 0,
        "importance": 0,
        "invert": 0,
        "evaluate": 8,
    }
    assert rows["answer"].exact and rows["score"].exact and rows["evaluate"].exact and not rows["label"].exact
    assert all(r.prompt_tokens > 0 for role, r in rows.items() if r.calls)
    assert rows["answer"].completion_tokens <= 4 * 8 and rows["score"].completion_tokens == 0
    # The prompts depend on the pool the run grows, so what the cache holds is unknown, and no cost without a price.
    assert not rows["answer"].cached_exact and rows["answer"].cost is None
    assert not (tmp_path / "cache").exists()  # no cache, model or pool file was made

    half = by_role(plan_run(cfg, accept=0.5))
    assert half["label"].calls == pytest.approx(6) and half["answer"].calls == 4


def test_the_utility_gates_calls_are_exact_alone_and_estimated_behind_the_rubric(tmp_path):
    # Each scope's 4 seeds hold the 3 probes, so every candidate is replayed on exactly 3 probes,
    # twice each (as retrieval gives the prompt, and with the candidate in its last shot).
    alone = by_role(plan_run(compose_config(TINY + [f"cache_dir={tmp_path}", "gate=utility"])))
    assert (alone["utility"].calls, alone["utility"].exact, alone["score"].calls) == (24, True, 0)
    assert alone["utility"].prompt_tokens > 0 and alone["utility"].completion_tokens == 0
    assert alone["label"].calls == pytest.approx(6)  # half the pairs assumed admitted
    both = by_role(plan_run(compose_config(TINY + [f"cache_dir={tmp_path}", "gate=both", "scorer.threshold=50"])))
    assert both["score"].calls == 4 and both["utility"].calls == pytest.approx(12) and not both["utility"].exact


def test_zero_shot_repeats_are_known_to_be_cached_and_a_price_gives_a_cost(tmp_path):
    price = ["backbone.price.input_per_million=2", "backbone.price.output_per_million=8"]
    cfg = compose_config(TINY + [f"cache_dir={tmp_path}", "k=0", *price])
    rows = by_role(plan_run(cfg))
    evaluate = rows["evaluate"]
    # k = 0 skips the stream; the second fill asks the first fill's 4 questions again, from the cache.
    assert rows["answer"].calls == rows["score"].calls == rows["label"].calls == 0
    assert (evaluate.calls, evaluate.cached) == (8, 4)
    full = (evaluate.prompt_tokens * 2 + evaluate.completion_tokens * 8) / 1e6
    assert evaluate.cost == pytest.approx(full / 2)  # the cached half costs nothing

    uncached = by_role(plan_run(compose_config(TINY + [f"cache_dir={tmp_path}", "k=0", "use_cache=false"])))
    assert (uncached["evaluate"].cached, uncached["evaluate"].cached_exact) == (0, True)


def ms_run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ms", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_plan_mode_on_the_command_line_prints_each_cell_and_the_sweep_total_and_makes_no_folder(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "cell_1").mkdir(parents=True)
    # cell_1 holds a finished run of the same settings (its cell record), which the sweep would skip
    from ms.loop.cell import identity

    done_cell = {"config": identity(compose_config(TINY + ["k=1"]))}
    (sweep / "cell_1" / "metrics.json").write_text(json.dumps({"complete": True, "cell": done_cell}))
    done = ms_run(
        "-m",
        *TINY,
        f"cache_dir={tmp_path / 'cache'}",
        "k=0,1,3",
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=cell_${k}",
        "+plan=true",
        "+plan_accept=0.5",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("\nanswer ") == 3 and "Sweep total over 3 runs" in out
    assert f"plan 3/3 for {sweep / 'cell_3'}: " in out and "->" not in out  # it names the folder, writes nothing
    assert "already holds a complete run" in out and "0.50 of stream pairs admitted" in out
    assert sorted(p.name for p in sweep.iterdir()) == ["cell_1"] and not (tmp_path / "cache").exists()
    total = next(line for line in out.splitlines() if line.startswith("sweep total"))
    assert total.split()[2] == "~30"  # k=0: 8; k=1 is complete; k=3: 4 + 4 + 6 + 8 (accept 0.5)

    bad = ms_run(*TINY, "+plan=true", "+plan_accept=2")
    assert bad.returncode == 2 and "plan_accept=2: must be a rate from 0 to 1" in bad.stderr


def test_plan_looks_zero_shot_answers_up_in_the_response_cache(tmp_path):
    """An answer the cache holds, written through LM.generate as a run writes it, is found by the plan."""
    from fakes import FakeLM

    from ms.agents import PromptTemplate, agents_from, chat
    from ms.data import load_splits
    from ms.llm import ResponseCache
    from ms.llm.hf import model_id, model_source

    cfg = compose_config(TINY + [f"cache_dir={tmp_path}", "k=0", "eval.metrics=[bertscore]"])
    bc, gen = cfg.backbone, cfg.backbone.generation

    # The default backbone's provider and model name, without loading it.
    lm = FakeLM(
        default="an answer",
        provider="hf",
        model=model_id(*model_source(bc.model, bc.gguf_file, bc.gguf_package)),
        cache=ResponseCache(tmp_path / "responses.sqlite"),
        max_new_tokens=gen.max_new_tokens,
        temperature=gen.temperature,
        stop=list(gen.stop),
    )
    agents = agents_from(cfg.agents)
    riddle = load_splits(cfg.data, agents)["riddle"].test[0]
    lm.generate([chat(agents["riddle"], PromptTemplate(**cfg.prompt).render(riddle.question))])

    evaluate = by_role(plan_run(cfg))["evaluate"]
    # 2 test questions x 2 fills: the riddle's answer is held, and the second fill repeats the first.
    assert (evaluate.calls, evaluate.cached, evaluate.cached_exact) == (4, 3, True)


@pytest.mark.slow
def test_plan_looks_zero_shot_ref_logprob_requests_up_in_the_response_cache(tmp_path, smollm2):
    """A reference scored by the real backbone, as a run scores it, is found by the plan: the plan
    renders the scored context with the backbone's chat template, from its tokenizer alone."""
    from ms.agents import PromptTemplate, agents_from, chat
    from ms.data import load_splits
    from ms.llm import ResponseCache

    cfg = compose_config(TINY + [f"cache_dir={tmp_path}", "k=0", "eval.metrics=[ref_logprob]"])
    agents = agents_from(cfg.agents)
    riddle = load_splits(cfg.data, agents)["riddle"].test[0]
    prompt = chat(agents["riddle"], PromptTemplate(**cfg.prompt).render(riddle.question), cfg.prompt.system)
    smollm2.cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        smollm2.loglikelihood([smollm2.chat_context(prompt)], [riddle.answer])
    finally:
        smollm2.cache = None

    evaluate = by_role(plan_run(cfg))["evaluate"]
    # 2 test questions x 2 fills: the riddle's score is held, and the second fill repeats the first.
    assert (evaluate.calls, evaluate.cached, evaluate.cached_exact) == (4, 3, True)


def test_a_sweeps_cells_are_the_product_of_its_axes_and_what_the_basic_sweeper_refuses_is_refused():
    from ms.cli.compose import jobs
    from ms.common.errors import UserError

    cells = jobs(["experiment=quick", "k=range(0,2)", "pool=domain,single"], multirun=True)
    assert sorted((c.k, c.pool.mode) for _, c in cells) == [(0, "domain"), (0, "single"), (1, "domain"), (1, "single")]
    with pytest.raises(UserError, match="INTERVAL_SWEEP"):
        jobs(["experiment=quick", "k=interval(0,1)"], multirun=True)


def test_utility_from_labels_adds_one_zero_shot_label_pass_per_admitted_pair(tmp_path):
    base = by_role(plan_run(compose_config(TINY + [f"cache_dir={tmp_path}"])))
    more = by_role(plan_run(compose_config(TINY + [f"cache_dir={tmp_path}", "train.utility_from_labels=true"])))
    assert more["label"].calls == base["label"].calls + 4  # threshold 0 admits all 4 stream pairs
    assert base["label"].prompt_tokens < more["label"].prompt_tokens < base["label"].prompt_tokens * 4 / 3


# ---- plan mode needs nothing that only spending needs; a finished run's measured admission rate ----


def test_plan_mode_with_an_api_backbone_needs_no_api_key(ms_run, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert ms_run(*TINY, "backbone=gpt-4o", "+plan=true") == (0, [])
    code, errors = ms_run(*TINY, "backbone=gpt-4o")  # a run still needs it, and says so before it starts
    assert code == 2 and "OPENAI_API_KEY" in errors[0]


def test_plan_mode_with_a_postgres_pool_needs_no_dsn_but_reports_a_real_mistake(ms_run, monkeypatch):
    from ms.config.schema import POOL_DSN_ENV

    monkeypatch.delenv(POOL_DSN_ENV, raising=False)
    assert ms_run(*TINY, "pool/backend=postgres", "+plan=true") == (0, [])
    assert ms_run(*TINY, "pool/backend=postgres", "k=-1", "+plan=true") == (
        2,
        ["ms-run: error: invalid setting k=-1: must be at least 0"],
    )


def finished_run(folder, accepted: dict, rejected: dict, usage: dict):
    folder.mkdir()
    (folder / "metrics.json").write_text(
        json.dumps(
            {"complete": True, "run": {"backbone": "smollm2"}, "stream": {"accepted": accepted, "rejected": rejected}}
        )
    )
    (folder / "llm_usage.json").write_text(json.dumps(usage))
    return folder


def test_plan_from_a_finished_run_uses_its_measured_admission_rate_and_times_local_calls(tmp_path, capsys):
    from ms.cli.plan import plan_main, take_plan_flags
    from ms.common.errors import UserError

    # An old-shaped llm_usage.json (one backbone's counters): 60 s for 6,000 tokens, 0.01 s a token.
    usage = {
        "calls": 10,
        "prompt_tokens": 6000,
        "completion_tokens": 0,
        "cache_hits": 0,
        "cache_misses": 10,
        "backend_seconds": 60.0,
    }
    run = finished_run(tmp_path / "done", {"riddle": 1}, {"riddle": 2, "limerick": 1}, usage)
    overrides = TINY + [f"cache_dir={tmp_path / 'cache'}", "scorer.threshold=15"]
    args, plan, accept = take_plan_flags([*overrides, "+plan=true", f"+plan_from={run}"])
    assert (args, plan, accept.rate) == (overrides, True, 0.25)

    cfg = compose_config(overrides)
    measured, assumed = plan_run(cfg, accept), plan_run(cfg)
    # 4 stream pairs, each admitted one mines 3 candidates to label: 1 of 4 admitted, against 0.85 assumed.
    assert by_role(measured)["label"].calls == pytest.approx(3)
    assert by_role(assumed)["label"].calls == pytest.approx(4 * 3 * 0.85)
    assert f"measured: the finished run {run} admitted 1 of the 4 stream pairs its gate judged" in measured.notes[0]
    assert "assumed" in assumed.notes[0] and "+plan_from=RUN_DIR" in assumed.notes[0]

    assert plan_main(overrides, False, accept) == 0
    out = capsys.readouterr().out
    tokens = sum(r.billed["prompt_tokens"] + r.billed["completion_tokens"] for r in measured.rows)
    assert f"- wall time: ~{tokens * 0.01:,.0f} s of backend time on smollm2" in out

    for flags, says in [
        ([f"+plan_from={tmp_path}"], "no finished run there"),
        ([f"+plan_from={run}", "+plan_accept=0.5"], "give one of them"),
        ([f"+plan_from={finished_run(tmp_path / 'k0', {}, {}, usage)}"], "judged no stream pair"),
    ]:
        with pytest.raises(UserError, match=says):
            take_plan_flags([*overrides, "+plan=true", *flags])


# ---- plan_from says what its rates were measured on, and warns where that is too little or otherwise ----


def recorded_run(folder, overrides: list[str], accepted: int, rejected: int, calls: int):
    """A finished run of `overrides` as a run records itself: its settings (metrics.json's cell record and
    run record), `accepted` of `accepted + rejected` stream pairs admitted, and `calls` on smollm2 timed at
    0.01 s a token."""
    from ms.loop.cell import identity

    cfg = compose_config(overrides)
    folder.mkdir()
    agents = sorted(cfg.data.agents or cfg.agents)
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "complete": True,
                "run": {"backbone": cfg.backbone.name, "agents": agents},
                "stream": {"accepted": {agents[0]: accepted}, "rejected": {agents[0]: rejected}},
                "cell": {"data_sha256": None, "config": identity(cfg)},
            }
        )
    )
    (folder / "llm_usage.json").write_text(
        json.dumps(
            {
                "calls": calls,
                "prompt_tokens": 100 * calls,
                "completion_tokens": 0,
                "cache_hits": 0,
                "cache_misses": calls,
                "backend_seconds": float(calls),
            }
        )
    )
    return folder


def plan_from(tmp_path, run, overrides: list[str], capsys) -> list[str]:
    """The lines `ms-run OVERRIDES +plan=true +plan_from=RUN` prints about the run it measures from."""
    from ms.cli.plan import plan_main, take_plan_flags

    args, _, accept = take_plan_flags(
        [*overrides, f"cache_dir={tmp_path / 'cache'}", "+plan=true", f"+plan_from={run}"]
    )
    capsys.readouterr()
    assert plan_main(args, False, accept) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("- ")]


def test_plan_from_a_four_pair_run_says_so_and_warns_that_it_is_small(tmp_path, capsys):
    run = recorded_run(tmp_path / "tiny", TINY, 0, 4, calls=28)
    lines = plan_from(tmp_path, run, TINY, capsys)
    assert f"the finished run {run} admitted 0 of the 4 stream pairs its gate judged" in lines[0]
    warned = [line for line in lines if line.startswith("- warning: ")]
    # one line each: the rate from 4 pairs (0 of 4 allows up to 0.49), the seconds per token from 28 calls
    assert len(warned) == 2
    assert "only 4 judged stream pairs (fewer than 30)" in warned[0] and "0.00 to 0.49" in warned[0]
    assert "fewer than 100" in warned[1] and "smollm2 (28 calls)" in warned[1]
    assert "timed on smollm2: 28 calls, 2,800 tokens" in lines[-1]  # the wall time names what it was timed on


@pytest.mark.parametrize(
    "source, says",
    [
        (["gate=utility"], "gate.name (utility there, rubric here)"),
        (["backbone.engine=llamacpp"], "backbone.engine (llamacpp there, hf here)"),
        (["scorer.threshold=15"], "scorer.threshold (15.0 there, 0.0 here)"),
        (["stream_k=1"], "stream_k (1 there, 3 here)"),
        (["k=1"], "k (1 there, 3 here)"),
        (["backbone=qwen2.5-0.5b"], "backbone.name (qwen2.5-0.5b there, smollm2 here)"),
    ],
)
def test_plan_from_a_run_of_other_settings_warns_naming_the_keys(tmp_path, capsys, source, says):
    run = recorded_run(tmp_path / "other", TINY + source, 20, 20, calls=500)
    warned = [line for line in plan_from(tmp_path, run, TINY, capsys) if line.startswith("- warning: ")]
    head = "- warning: the admission rate was measured under other settings than this run's: "
    if source == ["backbone=qwen2.5-0.5b"]:  # another backbone differs in its model's keys too
        assert warned[0].startswith(head) and says in warned[0]
    else:
        assert warned[0] == head + says
    if source == ["backbone.engine=llamacpp"]:  # the engine times the tokens too
        assert warned[1].endswith(
            "seconds per token were measured under other settings than this run's: "
            "backbone.engine (llamacpp there, hf here)"
        )
    assert len(warned) == 1 + (source == ["backbone.engine=llamacpp"])


def test_plan_from_a_run_of_other_agents_warns_naming_them(tmp_path, capsys):
    run = recorded_run(tmp_path / "other", [*TINY, "data.agents=[limerick,pun]"], 20, 20, calls=500)
    warned = [line for line in plan_from(tmp_path, run, TINY, capsys) if line.startswith("- warning: ")]
    assert warned == [
        "- warning: the admission rate was measured under other settings than this run's: "
        "agents (limerick,pun there, limerick,riddle here)"
    ]


def test_plan_from_the_committed_figure4_offline_run_names_its_sizes_and_does_not_warn(tmp_path, capsys):
    run = REPO / "results" / "figure4_offline" / "runs" / "backbone=smollm2"
    calls = json.loads((run / "llm_usage.json").read_text())["backbones"]["smollm2"]["total"]["calls"]
    lines = plan_from(tmp_path, run, ["experiment=figure4_offline", "backbone=smollm2"], capsys)
    assert "of the 117 stream pairs its gate judged (gate=rubric, scorer.threshold=15.0)" in lines[0]
    assert f"timed on smollm2: {calls:,} calls" in lines[-1]
    assert not [line for line in lines if "warning" in line]


def test_plan_from_a_run_that_records_no_settings_says_they_are_unchecked(tmp_path, capsys):
    run = tmp_path / "bare"
    run.mkdir()
    (run / "metrics.json").write_text(
        json.dumps({"complete": True, "stream": {"accepted": {"riddle": 30}, "rejected": {"riddle": 10}}})
    )
    warned = [line for line in plan_from(tmp_path, run, TINY, capsys) if line.startswith("- warning: ")]
    assert warned == [
        f"- warning: {run} records no settings (no cell record in its metrics.json, no "
        f".hydra/config.yaml, no run record): whether it ran as this run would is not checked"
    ]
