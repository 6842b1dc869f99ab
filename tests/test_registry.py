"""Parts that register themselves (ms.config.registry, ms.config.parts): every kind of part is a table
of names, each loaded where it is used. A toy gate and a toy metric, each one module in a package of
their own and one config file in a folder of their own, run through validation, plan mode and a tiny
real run without a line of ms changing."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from omegaconf import OmegaConf

from ms.config.parts import ACCESS_RULES, ENGINES, GATES, METRICS, POLICIES, POOL_BACKENDS, PROVIDERS, RETRIEVERS
from ms.config.registry import DuplicatePart, Registry, UnknownPart

REGISTRIES = {
    "gate": GATES,
    "metric": METRICS,
    "provider": PROVIDERS,
    "engine": ENGINES,
    "retriever": RETRIEVERS,
    "memory policy": POLICIES,
    "pool backend": POOL_BACKENDS,
    "access rule": ACCESS_RULES,
}


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_each_registry_refuses_a_duplicate_and_names_its_choices_and_the_nearest_for_an_unknown_name(kind):
    registry = REGISTRIES[kind]
    first = registry.names()[0]
    with pytest.raises(DuplicatePart, match=f"a {kind} named '{first}' is registered already"):
        registry.register(first, "elsewhere:Part")
    assert registry.names()[0] == first and registry.target(first) != "elsewhere:Part"
    with pytest.raises(UnknownPart) as unknown:
        registry.load(first + "x")
    message = str(unknown.value)
    assert "\n" not in message and message.startswith(f"unknown {registry.key} '{first}x': choose one of ")
    assert ", ".join(registry.names()) in message and message.endswith(f"(did you mean {first}?)")
    assert isinstance(unknown.value, ValueError)


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_every_entry_of_every_table_loads(kind):
    for name in REGISTRIES[kind]:
        assert callable(REGISTRIES[kind].load(name)), name


def test_a_registry_is_a_settings_live_choices_and_lists_them_in_the_error():
    from ms.config.fields import Check

    assert "rubric" in GATES and list(GATES)[:2] == ["rubric", "utility"] and len(GATES) >= 5
    check = Check(choices=GATES)
    assert list(check.problems("rubric")) == []
    assert list(check.problems("rubrik")) == [f"must be one of {', '.join(GATES)}"]


def test_a_name_goes_in_as_module_and_attribute_and_can_be_withdrawn():
    registry = Registry("widget", {"plain": "json:dumps"})
    assert registry.load("plain") is json.dumps
    with pytest.raises(ValueError, match="'module:attribute'"):
        registry.register("bad", "json.dumps")
    registry.register("pretty", "json:JSONEncoder.encode")
    assert registry.load("pretty") is json.JSONEncoder.encode and registry.names() == ["plain", "pretty"]
    registry.unregister("pretty")
    assert registry.names() == ["plain"]


def test_installed_entry_points_join_a_registry_and_may_not_repeat_a_name(tmp_path, monkeypatch):
    """A plugin installed as a distribution (here a .dist-info folder on sys.path) adds its names to
    the group ms.<kind> without ms importing it; a name it repeats is refused."""
    dist = tmp_path / "ms_widgets-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ms-widgets\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ms.widget]\nfancy = ms_widgets.fancy:Fancy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("widget", {"plain": "json:dumps"})
    assert registry.names() == ["plain", "fancy"] and registry.target("fancy") == "ms_widgets.fancy:Fancy"
    (dist / "entry_points.txt").write_text("[ms.widget]\nplain = ms_widgets.plain:Plain\n")
    with pytest.raises(DuplicatePart, match="a widget named 'plain' is registered already"):
        Registry("widget", {"plain": "json:dumps"}).names()


# ---- a toy gate and a toy metric, from outside ms ----------------------------------------------

TOY_GATE = '''
"""gate=toy: admits a pair whose answer has at most gate.ratio words per word of its question."""

from ms.gates.base import Acceptance, Gate, decision


class ToyGate(Gate):
    name = "toy"

    def __init__(self, ratio):
        self.ratio = ratio

    @classmethod
    def build(cls, cfg, parts):
        return cls(cfg.ratio)

    def judge(self, candidates):
        return [
            decision(c, len(c.answer.split()) <= self.ratio * len(c.question.split()),
                     f"toy: at most {self.ratio:g} words per question word", "toy")
            for c in candidates
        ]

    @classmethod
    def acceptance(cls, cfg, plan):
        return Acceptance(min(1.0, cfg.ratio / 6), f"{min(1.0, cfg.ratio / 6):.2f} of stream pairs admitted, "
                          f"as the toy gate assumes at ratio {cfg.ratio:g}", assumed=False)

    @classmethod
    def record(cls, cfg):
        return {"gate": cfg.name, "toy_ratio": cfg.ratio}
'''

# The toy gate's own settings, in a light module of their own: the schema of gate=toy.
TOY_SETTINGS = """
from dataclasses import dataclass

from ms.config.fields import setting
from ms.config.schema import GateConfig


@dataclass
class ToySettings(GateConfig):
    ratio: float = setting(3.0, gt=0.0)  # answer words allowed per word of the question
"""

TOY_METRIC = '''
"""eval.metrics=[ref_words]: the reference answer's length in words; needs nothing of a backbone."""

from ms.metrics.base import Metric


class RefWords(Metric):
    name = "ref_words"
    keys = ("ref_words",)
    labels = {"ref_words": "reference length (words)"}
    words = {"ref_words": "the reference answer's length in words"}
    higher_is_better = False

    def score_batch(self, batch):
        for row in batch.rows:
            row["ref_words"] = len(row["reference"].split())
'''

TOY_INIT = """
from ms.config.parts import GATES, METRICS

GATES.register("toy", "toy_parts.gate:ToyGate", settings="toy_parts.settings:ToySettings")
METRICS.register("ref_words", "toy_parts.metric:RefWords")
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A package toy_parts (toy_parts/gate.py, its settings toy_parts/settings.py, toy_parts/metric.py,
    and the __init__ that registers them) on sys.path, and a config folder with gate/toy.yaml (typed by
    the toy's settings) and experiment/toy.yaml (the metric's setting) that Hydra searches as ms-run's
    --config-dir does. Both names are withdrawn afterwards."""
    package = tmp_path / "plugins" / "toy_parts"
    package.mkdir(parents=True)
    for name, text in (("__init__", TOY_INIT), ("gate", TOY_GATE), ("settings", TOY_SETTINGS), ("metric", TOY_METRIC)):
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    conf = tmp_path / "conf"
    (conf / "gate").mkdir(parents=True)
    (conf / "gate" / "toy.yaml").write_text(
        "# A toy gate from outside ms (tests/test_registry.py).\n"
        "defaults:\n  - /ms_gate_toy@_here_\n  - _self_\nname: toy\nratio: 3.0\n"
    )
    (conf / "experiment").mkdir()
    (conf / "experiment" / "toy.yaml").write_text("# @package _global_\neval:\n  metrics: [ref_logprob, ref_words]\n")
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    import toy_parts  # noqa: F401  (registers the toy gate and metric)

    yield conf
    GATES.unregister("toy")
    METRICS.unregister("ref_words")
    for module in [m for m in sys.modules if m == "toy_parts" or m.startswith("toy_parts.")]:
        del sys.modules[module]


TINY = [
    "data.agents=[riddle]",
    "data.max_seed=4",
    "data.max_stream=2",
    "data.max_test=1",
    "fills=[50,100]",
    "micro_batch=4",
    "train.candidates=3",
    "train.labelled=2",
    "backbone.generation.max_new_tokens=24",
]


def composed(conf, overrides):
    """The config ms-run would compose with --config-dir CONF (ms.cli.compose.jobs)."""
    from ms.cli.compose import jobs

    [(_, cfg)] = jobs(["gate=toy", "experiment=toy", *overrides], multirun=False, config_dir=str(conf))
    return cfg


def test_a_toy_gate_and_metric_are_validated_and_planned_through_the_registries(toy):
    from ms.loop.validation import problems
    from ms.plan.planner import plan_run

    cfg = composed(toy, TINY)
    assert cfg.gate.name == "toy" and list(cfg.eval.metrics) == ["ref_logprob", "ref_words"]
    assert OmegaConf.get_type(cfg.gate) is GATES.settings("toy") and GATES.settings("toy").__name__ == "ToySettings"
    assert problems(cfg) == []
    assert any(
        "eval.metrics" in p and "ref_wordz" in p and "ref_words" in p
        for p in problems(composed(toy, [*TINY, "eval.metrics=[ref_wordz]"]))
    )

    plan = plan_run(cfg)
    rows = {r.role: r for r in plan.rows}
    assert rows["score"].calls == 0  # the toy gate asks no grader
    assert rows["evaluate"].calls == 2 and rows["answer"].calls == 2  # ref_logprob at two fills; ref_words: none
    assert "as the toy gate assumes at ratio 3" in plan.notes[0]


@pytest.mark.parametrize("flag", [["--config-dir", "{conf}"], ["--config-dir={conf}"], ["-cd", "{conf}"]])
def test_plan_mode_adds_a_config_folder_as_ms_run_does(toy, capsys, flag):
    from ms.cli.plan import plan_main

    args = [f.format(conf=toy) for f in flag]
    assert plan_main([*args, "gate=toy", "gate.ratio=2", *TINY], False, None) == 0
    assert "as the toy gate assumes at ratio 2" in capsys.readouterr().out


def test_a_toy_gates_own_setting_is_checked_and_reaches_the_gate_alone(toy):
    """gate.ratio, declared by the toy's settings module and set in its yaml: its limit and type are
    checked in one line, another gate refuses it, and the toy gate alone reads it."""
    from ms.common.errors import UserError
    from ms.gates.replay import Candidate
    from ms.loop.cell import flat
    from ms.loop.validation import problems
    from ms.plan.planner import plan_run

    assert problems(composed(toy, [*TINY, "gate.ratio=0"])) == [
        "invalid setting gate.ratio=0.0: must be greater than 0"
    ]
    for overrides, says in (
        (["gate.ratio=lots"], "invalid setting gate.ratio=lots under gate=toy: must be a number"),
        (
            ["gate.rate=0.5"],
            "unknown key gate.rate under gate=toy: a setting of gate=random only; gate=toy has the keys name, ratio",
        ),
        (
            ["gate=rubric", "gate.ratio=2"],
            "unknown key gate.ratio under gate=rubric: a setting of gate=toy only; gate=rubric has only the key name",
        ),
    ):
        with pytest.raises(UserError) as refused:
            composed(toy, [*TINY, *overrides])
        assert str(refused.value) == says

    cfg = composed(toy, [*TINY, "gate.ratio=2"])
    settings = {k: v for k, v in OmegaConf.to_container(cfg).items() if k != "hydra"}
    assert [k for k in flat(settings) if k.endswith("ratio")] == ["gate.ratio"]  # in the toy's section alone
    assert "as the toy gate assumes at ratio 2" in plan_run(cfg).notes[0]
    gate = GATES.load("toy").build(cfg.gate, None)
    assert gate.ratio == 2 and GATES.load("toy").record(cfg.gate) == {"gate": "toy", "toy_ratio": 2.0}
    [short, long] = gate.judge([Candidate("riddle", "logic", "two words", w) for w in ("a b c d", "a b c d e")])
    assert short.accepted and not long.accepted and short.reason == "toy: at most 2 words per question word"


@pytest.mark.slow
def test_a_tiny_run_with_the_toy_gate_and_metric_records_them_and_the_report_reads_them(toy, tmp_path, models_cache):
    from ms.loop.pipeline import run
    from ms.report.common.runs import find_runs, metric_label

    cfg = composed(toy, [*TINY, f"cache_dir={models_cache}", "retriever=dense_frozen"])  # no memory train to read
    metrics = run(cfg, tmp_path / "run")
    assert metrics["run"]["gate"] == "toy" and metrics["run"]["toy_ratio"] == 3.0
    assert metrics["run"]["metrics"] == ["ref_logprob", "ref_words"] and metrics["bertscore"] is None
    overall = metrics["fills"]["100"]["overall"]
    assert list(overall) == ["n", "ci", "ref_logprob", "ref_words"] and overall["n"]["ref_words"] == 1
    decisions = [json.loads(line) for line in (tmp_path / "run" / "decisions.jsonl").open()]
    assert decisions and all(
        d["read"] == "toy" and d["reason"] == "toy: at most 3 words per question word" for d in decisions
    )
    predictions = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").open()]
    assert all(isinstance(p["ref_words"], int) and "ref_logprob" in p and "answer" not in p for p in predictions)

    [found], _ = find_runs([tmp_path / "run"])
    assert found.measured == ["ref_logprob", "ref_words"] and found.gate == "toy"
    assert metric_label("ref_words") == "reference length (words)"
