"""The run and its plan walk one schedule (ms.loop.schedule.Schedule): a tiny run on a scripted backbone
(tests/fakes.py) makes exactly the calls its plan counts, under every gate, with and without a poisoning
writer; and a schedule changed in that one place changes the run and the plan alike."""

from __future__ import annotations

import json

import pytest
from conftest import compose_config
from fakes import FakeLM
from test_pipeline import TINY

import ms.loop.compose_run
from ms.loop.compose_run import compose_run
from ms.loop.pipeline import Experiment
from ms.loop.schedule import Schedule, Step
from ms.plan.planner import plan_run

# No encoder and no BERTScore model to load (bm25, ref_logprob alone), and the scripted grader's reply is
# read as text, as plan mode then counts it. scorer.threshold=0 (TINY): the rubric admits every pair it
# reads a score of, so what `both` asks of the utility meter after it is known too.
FAST = [*TINY, "retriever=bm25", "eval.metrics=[ref_logprob]", "scorer.read=text"]


def scripted_run(tmp_path, monkeypatch, overrides: list[str]) -> tuple[dict, dict]:
    """(calls made per role, calls planned per role) of a tiny run on a scripted backbone. The run is
    composed and run as ms.loop.pipeline.run runs it, less the folder checks before it."""
    words = lambda text: max(1, len(text.split()))  # noqa: E731
    lm = FakeLM(default="Score: 80", scores=lambda context, text: (-0.5 * words(text), words(text)))
    monkeypatch.setattr(ms.loop.compose_run, "build_backbones", lambda catalog, names: {catalog.default.name: lm})
    cfg = compose_config([*FAST, f"cache_dir={tmp_path / 'cache'}", *overrides])
    out = tmp_path / "run"
    out.mkdir()
    metrics = Experiment(compose_run(cfg, out), out).run()
    made: dict[str, float] = {}
    for backbone in metrics["usage"]["backbones"].values():
        for role, usage in backbone["roles"].items():
            made[role] = made.get(role, 0) + usage["calls"] + usage["cache_hits"]
    planned = {r.role: r.calls for r in plan_run(cfg).rows}
    return made, planned


@pytest.mark.parametrize("poison", ["none", "injection"])
@pytest.mark.parametrize("gate", ["rubric", "utility", "both", "rubric_qdep", "rubric_genre", "all", "random"])
def test_the_plan_counts_every_call_a_tiny_run_makes_under_every_gate(tmp_path, monkeypatch, gate, poison):
    made, planned = scripted_run(tmp_path, monkeypatch, [f"gate={gate}", f"poison={poison}"])
    assert made["answer"] == 4 and made["evaluate"] == 4  # 4 stream questions; 2 test questions at 2 fills
    assert (made.get("score", 0) > 0) == (gate in ("rubric", "both", "rubric_qdep", "rubric_genre"))
    assert (made.get("utility", 0) > 0) == (gate in ("utility", "both"))
    for role in {*made, *planned}:
        assert made.get(role, 0) == pytest.approx(planned.get(role, 0)), role


def test_a_schedule_changed_in_one_place_changes_the_run_and_its_plan(tmp_path, monkeypatch):
    """One question a step, two steps, then only the last fill: unlike TINY's own schedule (two questions
    a step, a fill after each), so a run or a plan that walked a copy of the schedule would not follow."""

    def two_single_questions_then_the_last_fill(self, n):
        yield Step(1, slice(0, 1), ())
        yield Step(2, slice(1, 2), (self.fills[-1],))

    monkeypatch.setattr(Schedule, "steps", two_single_questions_then_the_last_fill)
    made, planned = scripted_run(tmp_path, monkeypatch, [])
    assert made["answer"] == planned["answer"] == 2 and made["score"] == planned["score"] == 2
    assert made["evaluate"] == planned["evaluate"] == 2  # one fill of the two test questions
    decisions = [json.loads(line) for line in (tmp_path / "run" / "decisions.jsonl").open()]
    assert [d["step"] for d in decisions] == [1, 2]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert list(metrics["fills"]) == ["100"]


def test_steps_group_each_micro_batch_with_the_fills_it_completes():
    schedule = Schedule(
        fills=(0, 25, 50, 100),
        micro_batch=3,
        streams=True,
        answers="model",
        trains=False,
        consolidates=False,
        evaluates=True,
    )
    assert list(schedule.steps(10)) == [
        Step(0, None, (0,)),
        Step(1, slice(0, 2), (25,)),
        Step(2, slice(2, 5), (50,)),
        Step(3, slice(5, 8), ()),
        Step(4, slice(8, 10), (100,)),
    ]
    skipped = Schedule(**{**vars(schedule), "streams": False})
    assert list(skipped.steps(10)) == [Step(0, None, (0, 25, 50, 100))]
