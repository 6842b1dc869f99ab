"""Two model families on one pool (experiment=sharing_families_offline): who grades is chosen by
conf/grader, which sets the grading backbone and the threshold its gate check chose together; agents
on SmolLM2 and on Gemma 3 write one Single pool, and one family grades the other's answers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, compose_config
from omegaconf import OmegaConf
from test_pipeline import TINY

from ms.agents import agents_from
from ms.cli.compose import jobs
from ms.data.splits import load_splits
from ms.loop.compose_run import compose_run
from ms.loop.pipeline import Experiment
from ms.loop.validation import problems
from ms.pool import Pool
from ms.report.common.saved_config import SavedConfig
from ms.report.sharing.baseline import BASELINE_KEYS, _setting

GEMMA_AGENTS = {"sonnet", "limerick", "travel", "fitness"}


def test_a_grader_sets_its_backbone_and_its_own_threshold_over_the_experiments():
    assert compose_config(["experiment=offline"]).scorer.threshold == 15
    gemma = compose_config(["experiment=offline", "grader=gemma3"]).scorer
    assert (gemma.backbone, gemma.threshold) == ("gemma3", 23)
    smollm2 = compose_config(["experiment=offline", "grader=smollm2"]).scorer
    assert (smollm2.backbone, smollm2.threshold) == ("smollm2", 15)


def test_the_families_experiment_crosses_two_graders_with_k_0_and_3_on_one_agent_split():
    cells = jobs(["experiment=sharing_families_offline"], multirun=True)
    assert sorted(" ".join(sorted(c)) for c, _ in cells) == sorted(
        f"backbone=smollm2 experiment=sharing_families_offline grader={g} k={k}"
        for g in ("smollm2", "gemma3")
        for k in (0, 3)
    )
    for _, cfg in cells:
        assert cfg.pool.mode == "single" and cfg.backbone.name == "smollm2"
        on_gemma = {name for name, entry in cfg.agents.items() if entry.get("backbone") == "gemma3"}
        assert on_gemma == GEMMA_AGENTS
        assert cfg.scorer.threshold == {"smollm2": 15, "gemma3": 23}[cfg.scorer.backbone]
    # Each k = 3 cell's baseline is a k = 0 cell: they agree on everything ms-report pairs runs by.
    settings = [
        {key: _setting(SavedConfig.parse(OmegaConf.to_container(cfg, resolve=False)), key) for key in BASELINE_KEYS}
        for _, cfg in cells
    ]
    assert all(s == settings[0] for s in settings)


@pytest.mark.slow
def test_gemma_grades_smollm2s_answers_and_both_families_write_one_pool(tmp_path, models_cache):
    """limerick answers on Gemma, riddle on SmolLM2 (the run's backbone), one Single pool; Gemma grades
    both families' answers and SmolLM2 labels, each model built once."""
    overrides = [o for o in TINY if not o.startswith(("data.agents", "data.max_stream", "scorer.threshold", "fills"))]
    cfg = compose_config(
        overrides
        + [
            f"cache_dir={models_cache}",
            "data.agents=[limerick,riddle]",
            "pool=single",
            "data.max_stream=1",
            "train.candidates=2",
            "fills=[100]",
            "eval.metrics=[ref_logprob]",
            "agents.limerick.backbone=gemma3",
            "grader=gemma3",
            "scorer.threshold=0",
        ]
    )
    assert problems(cfg) == []
    out = tmp_path / "run"
    out.mkdir()
    experiment = Experiment(compose_run(cfg, out), out)
    metrics = experiment.run()

    assert list(experiment.backbones) == ["smollm2", "gemma3"]
    gemma, smollm2 = experiment.backbones["gemma3"], experiment.backbones["smollm2"]
    assert experiment.gate.scorer.lm is gemma and experiment.trainer.labeller.lm is smollm2
    assert metrics["run"]["agent_backbones"] == {"limerick": "gemma3", "riddle": "smollm2"}
    assert (metrics["run"]["grader"], metrics["run"]["threshold"]) == ("gemma3", 0)  # ms-report keeps graders apart
    graded = gemma.usage_by_role["score"]
    assert graded.calls + graded.cache_hits == 2  # both agents' stream answer each
    assert "score" not in smollm2.usage_by_role

    memories = Pool(out / "pool.sqlite").memories("single")
    stream = [m for m in memories if m.origin == "stream"]
    assert {(m.agent, m.backbone) for m in stream} == {("limerick", "gemma3"), ("riddle", "smollm2")}
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert {p["agent"] for p in predictions if "ref_logprob" in p} == {"limerick", "riddle"}


def test_twins_answer_the_same_stream_and_test_questions_on_the_other_family(tmp_path):
    """experiment=sharing_twins_offline: each twin is its agent's copy on Gemma, in its domain, with the
    very same seed, stream and test questions (experiments/make_twins.py keeps the ids the split hashes)."""
    out = tmp_path / "twins"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "experiments" / "make_twins.py"),
            "--agents",
            "sonnet,puzzle,study",
            "--data",
            str(REPO / "data"),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    cfg = compose_config(["experiment=sharing_twins_offline", "k=3", f"data.dir={out}"])
    assert problems(cfg) == []
    agents = agents_from(cfg.agents)
    splits = load_splits(cfg.data, agents)
    assert sorted(splits) == sorted(["sonnet", "sonnet_gemma3", "puzzle", "puzzle_gemma3", "study", "study_gemma3"])
    for name in ("sonnet", "puzzle", "study"):
        twin = agents[f"{name}_gemma3"]
        assert (twin.backbone, twin.domain, twin.instruction) == (
            "gemma3",
            agents[name].domain,
            agents[name].instruction,
        )
        assert agents[name].backbone is None  # the run's backbone, SmolLM2
        for part in ("seed", "stream", "test"):
            ours, theirs = getattr(splits[name], part), getattr(splits[f"{name}_gemma3"], part)
            assert [(e.id, e.question, e.answer) for e in ours] == [(e.id, e.question, e.answer) for e in theirs]
            assert {e.agent for e in theirs} == {f"{name}_gemma3"}
        assert (len(splits[name].stream), len(splits[name].test)) == (13, 20)
