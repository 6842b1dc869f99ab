"""Best-of-n writing (stream.best_of, ms.loop.best_of) and the stream-only run (eval.enabled=false): the
kept answer is the selector's best, samples are a function of (prompt, seed, index) and cached as such,
n = 1 is the greedy stream exactly, and a stream-only run writes decisions and no predictions."""

from __future__ import annotations

import json

import pytest
from conftest import compose_config
from fakes import FakeLM

from ms.config.schema import ScorerConfig
from ms.gates.scorer import Scorer, load_rubrics
from ms.llm.cache import ResponseCache
from ms.llm.sampling import sample_seed
from ms.loop.best_of import BestOf, GraderSelector, LikelihoodSelector, best
from ms.loop.cell import differences, identity, stored
from ms.loop.printout import format_table
from ms.loop.provenance_record import CellRecord

QUESTION = [{"role": "user", "content": "What has keys but opens no lock?"}]


def one_backbone(lm, n: int):
    """ms.loop.answering's by_backbone for n queries that all run on `lm`."""

    def on_backbone(role, call):
        with lm.acting_as(role):
            return call(lm, list(range(n)))

    return on_backbone


def scripted(texts: list[str], seed: int, chat=QUESTION):
    """A sampler that gives sample i of `chat` (run seed `seed`) the text texts[i], found by its seed."""
    by_seed = {sample_seed(chat, seed, i): text for i, text in enumerate(texts)}
    return lambda c, s: by_seed[s]


def test_best_is_the_highest_score_the_earliest_of_equals_and_never_an_unscored_one():
    assert best([1.0, 3.0, 3.0, None]) == 1
    assert best([None, -2.0]) == 1
    assert best([None, None]) == 0
    assert best([0.0, -1.0]) == 0


def test_the_grader_keeps_the_candidate_it_scores_highest_and_every_candidate_is_recorded():
    texts = ["a weak answer", "a piano, full of keys", "a fine answer"]
    writer = FakeLM(samples=scripted(texts, seed=7))
    grader = FakeLM({f"Answer: {t}\n": score for t, score in zip(texts, ["20", "90", "60"])})
    scorer = Scorer(grader, load_rubrics(), ScorerConfig(read="text", defence="none"))
    best_of = BestOf(3, 0.7, 7, GraderSelector(scorer, lambda agent: "logic"))
    [choice] = best_of.choose(["riddle"], [QUESTION], [QUESTION[0]["content"]], one_backbone(writer, 1))
    assert choice.candidates == texts and choice.scores == [20, 90, 60]
    assert choice.kept == 1 and choice.answer == "a piano, full of keys"
    assert choice.record("grader") == {
        "candidates": [{"answer": t, "score": s} for t, s in zip(texts, [20, 90, 60])],
        "kept": 1,
        "select": "grader",
    }
    assert [seed for _, seed in writer.sampled] == [sample_seed(QUESTION, 7, i) for i in range(3)]
    assert grader.batches == [3]  # every candidate graded in one call, under the scorer's role
    assert grader.usage_by_role["score"].calls == 3 and writer.usage_by_role["answer"].calls == 3


def test_the_likelihood_selector_keeps_the_writers_most_likely_answer_and_scores_no_empty_one():
    texts = ["unsure words", "sure words", ""]
    writer = FakeLM(
        samples=scripted(texts, seed=0), scores=lambda context, text: (-1.0 if text == "sure words" else -8.0, 2)
    )
    [choice] = BestOf(3, 0.7, 0, LikelihoodSelector()).choose(["riddle"], [QUESTION], ["q"], one_backbone(writer, 1))
    assert choice.scores == [-4.0, -0.5, None] and choice.answer == "sure words"
    assert [text for _, text in writer.scored] == ["unsure words", "sure words"]
    assert all(context == writer.chat_context(QUESTION) for context, _ in writer.scored)


def test_samples_are_cached_by_prompt_seed_and_index_and_never_replay_a_greedy_reply(tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    lm = FakeLM(default="the greedy reply", samples=lambda chat, seed: f"sample {seed}", cache=cache)
    assert lm.generate(["Q"]) == ["the greedy reply"]
    both = lm.sample(["Q", "R"], 2, temperature=0.7, seed=0)
    chats = [[{"role": "user", "content": p}] for p in ("Q", "R")]
    assert both == [[f"sample {sample_seed(c, 0, i)}" for i in range(2)] for c in chats]
    assert len(lm.sampled) == 4  # the greedy reply to Q was not taken for a sample
    # Another process on the same cache: the same samples, without a backend call ...
    again = FakeLM(default="drawn again", samples=lambda chat, seed: "drawn again", cache=cache)
    assert again.sample(["R"], 2, temperature=0.7, seed=0) == [both[1]] and again.sampled == []
    # ... where another seed, temperature or index is another sample.
    assert again.sample(["R"], 3, temperature=0.7, seed=1) == [["drawn again"] * 3]
    assert again.sample(["R"], 3, temperature=0.9, seed=0) == [["drawn again"] * 3]
    assert again.sample(["R"], 3, temperature=0.7, seed=0) == [[*both[1], "drawn again"]]
    assert again.generate(["R"]) == ["drawn again"]  # nor does a greedy request replay a sample
    # A sample's seed is its prompt's, the run's seed and its index, whatever shares the call.
    alone = FakeLM(samples=lambda chat, seed: str(seed))
    assert (
        alone.sample(["R"], 2, temperature=0.7, seed=0)[0]
        == FakeLM(samples=lambda chat, seed: str(seed)).sample(["Q", "R"], 2, temperature=0.7, seed=0)[1]
    )
    with pytest.raises(ValueError, match="temperature above 0"):
        alone.sample(["R"], 2, temperature=0.0, seed=0)


def test_the_cell_leaves_out_what_it_does_not_read_and_old_runs_resume_as_greedy_evaluated_runs(tmp_path):
    greedy = identity(compose_config([]))
    assert greedy["stream.best_of"] == 1 and greedy["eval.enabled"] is True
    assert "stream.temperature" not in greedy and "stream.select" not in greedy
    assert differences(greedy, identity(compose_config(["stream.temperature=0.2"])), every_key=True) == []
    sampled = identity(compose_config(["stream.best_of=4"]))
    assert sampled["stream.temperature"] == 0.7 and sampled["stream.select"] == "grader"
    screen = identity(compose_config(["eval.enabled=false"]))
    assert screen["eval.enabled"] is False and not any(k.startswith("eval.") and k != "eval.enabled" for k in screen)
    # A run recorded before these settings existed ran greedy and evaluated: it is the same cell as today's default.
    old = {k: v for k, v in greedy.items() if k not in ("eval.enabled", "stream.best_of")}
    settings, _, own = stored(tmp_path, CellRecord(config=old))
    assert own and differences(greedy, settings, every_key=True) == []
    assert {"stream.best_of"} <= set(differences(sampled, settings, every_key=True))


def test_validation_refuses_best_of_on_references_and_a_stream_only_run_that_streams_nothing():
    from ms.loop.validation import problems

    found = problems(compose_config(["stream.best_of=2", "stream.answers=reference"]))
    assert any(p.startswith("invalid setting stream.best_of=2") for p in found), found
    found = problems(compose_config(["eval.enabled=false", "k=0"]))
    assert any("eval.enabled=false" in p and "k=0" in p for p in found), found
    assert problems(compose_config(["eval.enabled=false", "stream.best_of=4", "stream.select=likelihood"])) == []


def plan_calls(overrides: list[str]) -> dict[str, float]:
    from ms.plan.planner import plan_run

    return {r.role: r.calls for r in plan_run(compose_config(["experiment=quick", *overrides])).rows}


def test_plan_mode_counts_n_samples_and_the_selectors_calls_and_no_evaluation_for_a_stream_only_run():
    base = plan_calls([])
    screen = plan_calls(["eval.enabled=false"])
    assert base["evaluate"] > 0 and screen["evaluate"] == 0
    assert {r: c for r, c in screen.items() if r != "evaluate"} == {r: c for r, c in base.items() if r != "evaluate"}
    graded = plan_calls(["stream.best_of=3"])
    assert graded["answer"] == 3 * base["answer"] and graded["score"] == base["score"] + 3 * base["answer"]
    liked = plan_calls(["stream.best_of=3", "stream.select=likelihood"])
    assert liked["answer"] == 6 * base["answer"] and liked["score"] == base["score"]


def test_a_stream_only_runs_printout_shows_the_gates_counts():
    metrics = {
        "fills": {},
        "run": {"k": 3, "pool": "domain", "retriever": "dense", "backbone": "smollm2", "evaluated": False},
        "stream": {"accepted": {"riddle": 2}, "rejected": {"riddle": 1}, "unscored_by_agent": {}},
    }
    lines = format_table(metrics).splitlines()
    assert "stream only" in lines[0] and lines[-2:] == ["riddle      | 2/1/0", "overall     | 2/1/0"]


# ---- real runs on SmolLM2 --------------------------------------------------------------------------


def tiny(tmp_path, name: str, extra: list[str]):
    from test_controls import TINY, riddles

    data = tmp_path / "data"
    if not data.exists():
        riddles(data)
    return compose_config(TINY + [f"data.dir={data}", f"cache_dir={tmp_path / name / 'cache'}", *extra])


def lines(folder, name):
    return [json.loads(line) for line in (folder / name).read_text().splitlines()]


@pytest.mark.slow
def test_samples_on_smollm2_do_not_depend_on_the_rest_of_their_batch(smollm2):
    prompts = ["Tell me a riddle about the moon.", "What is 2+2?", "Write a pun about cats."]
    together = smollm2.sample(prompts, 2, temperature=0.8, seed=0, max_new_tokens=12)
    assert smollm2.sample(prompts[1:2], 2, temperature=0.8, seed=0, max_new_tokens=12) == together[1:2]
    assert len({text for texts in together for text in texts}) > 3  # samples, not one greedy reply


@pytest.mark.slow
def test_best_of_one_is_todays_greedy_stream_byte_for_byte(tmp_path, monkeypatch):
    from ms.llm.base import LM
    from ms.loop.pipeline import run

    run(tiny(tmp_path, "default", []), tmp_path / "default")

    def no_sampling(*args, **kwargs):
        raise AssertionError("stream.best_of=1 must not sample")

    monkeypatch.setattr(LM, "sample", no_sampling)
    idle = ["stream.best_of=1", "stream.temperature=0.3", "stream.select=likelihood"]
    # On the default run's response cache, which holds greedy replies only, each keyed by its whole
    # request (temperature included): a request the default run did not make is answered anew.
    metrics = run(tiny(tmp_path, "default", idle), tmp_path / "explicit")
    for name in ("decisions.jsonl", "predictions.jsonl"):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "explicit" / name).read_bytes(), name
    assert not any("candidates" in d for d in lines(tmp_path / "explicit", "decisions.jsonl"))
    assert "best_of" not in metrics["run"]
    assert metrics["usage"]["total"]["calls"] == 0  # it asked nothing the default run had not asked


@pytest.mark.slow
def test_a_best_of_two_screen_keeps_the_graders_best_writes_no_predictions_and_reruns_the_same(tmp_path, capsys):
    from omegaconf import OmegaConf

    from ms.loop.pipeline import run
    from ms.plan.planner import plan_run
    from ms.report.cli import write_report
    from ms.report.usage.gate_quality import quality_records

    # Sampling is most of the work: candidates of 12 tokens, not TINY's 24, still differ where sampled.
    overrides = ["stream.best_of=2", "eval.enabled=false", "backbone.generation.max_new_tokens=12"]
    first, again = tmp_path / "runs" / "first", tmp_path / "again"
    cfg = tiny(tmp_path, "first", overrides)
    metrics = run(cfg, first)
    # Rerun on the first run's response cache, which keeps each sample under its request and seed: asking
    # nothing anew, it drew the same seeds for the same requests, and a seed's sample is the same on a
    # second call in any batch (test_samples_on_smollm2_do_not_depend_on_the_rest_of_their_batch).
    rerun = run(tiny(tmp_path, "first", overrides), again)
    assert rerun["usage"]["total"]["calls"] == 0
    assert (first / "decisions.jsonl").read_bytes() == (again / "decisions.jsonl").read_bytes()
    assert not (first / "predictions.jsonl").exists()
    assert metrics["fills"] == {} and metrics["run"]["evaluated"] is False and metrics["run"]["best_of"] == 2
    decisions = lines(first, "decisions.jsonl")
    assert len(decisions) == 3
    for d in decisions:
        scores = [c["score"] for c in d["candidates"]]
        assert len(scores) == 2 and d["select"] == "grader" and d["kept"] == best(scores)
        assert d["answer"] == d["candidates"][d["kept"]]["answer"]
    assert any(len({c["answer"] for c in d["candidates"]}) == 2 for d in decisions)  # sampled, not greedy
    # Plan mode foresaw every answer exactly, and no evaluation.
    roles = metrics["usage"]["backbones"]["smollm2"]["roles"]
    made = {role: u["calls"] + u["cache_hits"] for role, u in roles.items()}
    planned = {r.role: r.calls for r in plan_run(cfg).rows}
    assert made["answer"] == planned["answer"] == 6 and made["evaluate"] == planned["evaluate"] == 0
    assert made["score"] == planned["score"] == 9  # two candidates graded a question, then the gate's (cached)
    # gate-quality scores its decisions, and ms-report reports it without test scores.
    (first / ".hydra").mkdir()
    OmegaConf.save(cfg, first / ".hydra" / "config.yaml")
    records, _ = quality_records(first)
    assert len(records) == 3 and sum(r["reference"] is not None for r in records) == 2
    (first / "quality.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = write_report([tmp_path / "runs"], tmp_path / "report").read_text()
    assert "Stream-only runs (1)" in summary and (tmp_path / "report" / "quality.md").exists()


# ---- ms-report ---------------------------------------------------------------------------------------


def screen_run(folder):
    """A stream-only run's folder as the loop leaves it: metrics.json without fill results, decisions.jsonl."""
    folder.mkdir(parents=True)
    run = {"backbone": "smollm2", "k": 3, "pool": "domain", "retriever": "dense", "evaluated": False}
    stream = {"accepted": {"riddle": 1}, "rejected": {"riddle": 1}, "unscored_by_agent": {}}
    (folder / "metrics.json").write_text(json.dumps({"complete": True, "run": run, "fills": {}, "stream": stream}))
    decisions = [
        {"agent": "riddle", "scope": "logic", "pool_size": 5 + i, "accepted": i == 0, "step": 1} for i in range(2)
    ]
    (folder / "decisions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))


def test_ms_report_lists_a_stream_only_run_apart_and_keeps_a_best_of_run_out_of_the_tables(tmp_path):
    from test_report import make_run

    from ms.report import find_runs, select, write_report

    make_run(tmp_path / "runs", "greedy", backbone="smollm2")
    make_run(tmp_path / "runs", "best_of", backbone="smollm2", fields={"best_of": 4, "select": "grader"})
    screen_run(tmp_path / "runs" / "screen")
    runs, skipped = find_runs([tmp_path / "runs"])
    assert skipped == [] and [r.evaluated for r in runs] == [True, True, False]
    chosen, why_not = select([r for r in runs if r.evaluated])
    assert chosen[("smollm2", 3, "domain")].name == "greedy" and "best of 4" in why_not["best_of"]
    summary = write_report([tmp_path / "runs"], tmp_path / "report").read_text()
    assert "## Stream-only runs (1)" in summary and "| `screen` | rubric | 1 | 1 | 1 | 0 |" in summary
    assert (tmp_path / "report" / "pool_growth_screen.png").exists()
