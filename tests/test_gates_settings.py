"""Each gate owns its settings (ms.gates.settings): its option in the `gate` group is typed by them, a key
of another gate is refused in one line naming the option, nothing outside a gate reads them, and runs
recorded before the gates owned their settings still resume and pair. And the utility gate's
gate.decide_on: mean (the gate as it was) or lower (the lower bound of u over the probes)."""

from __future__ import annotations

import json
import math

import pytest
from conftest import compose_config
from fakes import FakeLM
from omegaconf import OmegaConf

from ms.agents import PromptTemplate, default_agents
from ms.cli.compose import jobs
from ms.common.errors import UserError
from ms.config.parts import GATES
from ms.config.schema import GateConfig
from ms.gates.replay import Candidate, Utility, UtilityMeter
from ms.gates.settings import RubricSettings, UtilitySettings
from ms.gates.utility import UtilityGate, lower_bound, utility_record, utility_verdict
from ms.loop.cell import check_same_cell, identity, record, with_added
from ms.pool import Pool
from ms.retrieval.bm25 import BM25Retriever


def composed(*overrides: str):
    [(_, cfg)] = jobs(list(overrides), multirun=False)
    return cfg


def refused(*overrides: str) -> str:
    with pytest.raises(UserError) as error:
        composed(*overrides)
    return str(error.value)


# ---- the schema of each option ----------------------------------------------------------------------


@pytest.mark.parametrize("gate", ["rubric", "utility", "both", "rubric_qdep", "rubric_genre", "all", "random"])
def test_each_gates_section_is_typed_by_its_own_settings_and_holds_nothing_else(gate):
    cfg = composed(f"gate={gate}")
    kind = GATES.settings(gate)
    assert OmegaConf.get_type(cfg.gate) is kind and issubclass(kind, GateConfig)
    assert list(cfg.gate) == [f for f in kind.__dataclass_fields__] and cfg.gate.name == gate


@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            ["gate=rubric", "gate.rate=0.3"],
            "unknown key gate.rate under gate=rubric: a setting of gate=random only; gate=rubric has only the key name",
        ),
        (
            ["gate=all", "gate.probes=2"],
            "unknown key gate.probes under gate=all: a setting of gate=utility and gate=both only; gate=all has only the key name",
        ),
        (["gate=utility", "gate.probs=2"], "unknown key gate.probs under gate=utility: did you mean gate.probes?"),
        (["gate=utility", "gate.probes=two"], "invalid setting gate.probes=two under gate=utility: must be an integer"),
        (["gate=random", "gate.rate=half"], "invalid setting gate.rate=half under gate=random: must be a number"),
        (
            ["+gate.match=x"],
            "unknown key gate.match under gate=rubric: a setting of gate=random only; gate=rubric has only the key name "
            "(a +key= override cannot add a setting)",
        ),
    ],
)
def test_a_key_of_another_gate_or_of_the_wrong_type_is_one_line_naming_the_option(overrides, says):
    assert refused(*overrides) == says


def test_an_experiment_file_setting_another_gates_key_is_refused_naming_the_file(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "probed.yaml").write_text("# @package _global_\ngate:\n  probes: 5\n")
    with pytest.raises(UserError) as error:
        jobs(["experiment=probed"], multirun=False, config_dir=str(tmp_path))
    assert str(error.value) == (
        "In 'experiment/probed': unknown key gate.probes under gate=rubric: a setting of gate=utility and "
        "gate=both only; gate=rubric has only the key name"
    )
    [(_, cfg)] = jobs(["experiment=probed", "gate=both"], multirun=False, config_dir=str(tmp_path))
    assert cfg.gate.probes == 5


def test_a_gate_name_set_past_its_option_and_bad_values_are_refused_before_anything_loads():
    from ms.loop.validation import problems

    assert problems(composed("gate.name=utility"), plan=True) == [
        "invalid setting gate.name=utility: the gate section holds gate=rubric's settings, not gate=utility's; "
        "choose it with gate=utility"
    ]
    assert problems(composed("gate=utility", "gate.decide_on=median"), plan=True) == [
        "invalid setting gate.decide_on=median: must be one of mean, lower"
    ]
    assert problems(composed("gate=random", "gate.rate=2"), plan=True) == [
        "invalid setting gate.rate=2.0: must be at most 1"
    ]
    assert problems(composed("gate=both", "gate.decide_on=lower"), plan=True) == []


def test_what_measures_utility_outside_a_gate_asks_the_utility_gates_settings_for_its_probes():
    """ms-data gate-check and its plan measure utility under any gate: the configured gate's probes where
    it has them, else the utility gate's default, as before the gates owned their settings."""
    assert UtilitySettings.probes_of(composed().gate) == 3 == UtilitySettings.probes
    assert UtilitySettings.probes_of(composed("gate=both", "gate.probes=5").gate) == 5
    assert (
        UtilitySettings.probes_of(RubricSettings()) == 3 and UtilitySettings.probes_of(UtilitySettings(probes=2)) == 2
    )


# ---- decide_on ---------------------------------------------------------------------------------------


def test_decide_on_mean_words_its_decisions_as_the_gate_always_did():
    measured = Utility(0.2, -0.1, 0.5, [1, 2, 3], [1.0, -0.2, -0.2], [None] * 3)
    assert (
        utility_verdict(measured, 0.0)
        == utility_verdict(measured, 0.0, "mean")
        == (True, "utility +0.2000 > threshold 0")
    )
    assert utility_verdict(measured, 0.25) == (False, "utility +0.2000 <= threshold 0.25")
    assert utility_verdict(Utility(None, None, None), 0.0, "lower") == (
        True,
        "utility unmeasured: no memory in scope to probe with",
    )


def test_the_lower_bound_is_the_mean_less_one_standard_error_and_one_probe_is_judged_on_u():
    assert lower_bound([1.0, -0.2, -0.2]) == pytest.approx(0.2 - math.sqrt(0.48) / math.sqrt(3))
    assert lower_bound([0.3, 0.3]) == pytest.approx(0.3) and lower_bound([0.3]) is None and lower_bound([]) is None
    one = Utility(0.3, None, None, [1], [0.3], [None])
    assert utility_verdict(one, 0.0, "lower") == (
        True,
        "utility +0.3000 (one probe: no spread to bound, u judged) > threshold 0",
    )


def riddles(n: int) -> list[dict]:
    with open("data/riddle.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(n))]


MARK = "A shadow that follows the marked candidate."  # the candidate's answer, shown nowhere else


def split_probes() -> FakeLM:
    """Log-probs (one token per word) scripted so the probes disagree: with the candidate as the last
    shot, the first riddle's answer is certain (0 per token) and every other probe's answer is less
    likely than without it (-1.2 against -1 per token): deltas +1, -0.2, -0.2."""
    first = riddles(1)[0]["answer"]

    def scores(context: str, answer: str) -> tuple[float, int]:
        n = len(answer.split())
        if MARK not in context:
            return -1.0 * n, n
        return (0.0 if answer == first else -1.2 * n), n

    return FakeLM(scores=scores)


@pytest.fixture
def disagreeing(tmp_path):
    """A utility meter over a pool of five riddles whose probes disagree about one candidate."""
    with Pool(tmp_path / "pool.sqlite") as pool:
        pool.add(
            [
                {
                    "scope": "logic",
                    "agent": "riddle",
                    "domain": "logic",
                    "question": e["question"],
                    "answer": e["answer"],
                }
                | {"origin": "seed"}
                for e in riddles(6)
            ],
            step=0,
        )
        lm = split_probes()
        meter = UtilityMeter(
            BM25Retriever(pool).retrieve_batch,
            lambda agent: lm,
            default_agents(),
            PromptTemplate(**compose_config().prompt),
            probes=3,
            shots=2,
            test_questions=[riddles(6)[4]["question"]],
        )
        question = "What copies every move you make, shrinks at noon and stretches at dusk?"
        yield meter, Candidate("riddle", "logic", question, MARK)


def test_a_pair_that_helps_one_probe_and_hurts_the_others_passes_on_the_mean_and_not_on_the_lower_bound(
    disagreeing,
):
    meter, candidate = disagreeing
    [by_mean] = UtilityGate(meter, 0.0).judge([candidate])
    [by_lower] = UtilityGate(meter, 0.0, "lower").judge([candidate])
    deltas = by_mean.utility["deltas"]
    assert sorted(deltas) == pytest.approx([-0.2, -0.2, 1.0]) and by_lower.utility == by_mean.utility
    assert by_mean.accepted and by_mean.reason == "utility +0.2000 > threshold 0"
    assert not by_lower.accepted
    assert by_lower.reason == "utility +0.2000, lower bound -0.2000 (mean - 1 SE over 3 probes) <= threshold 0"


def test_both_holds_the_rubrics_admissions_to_the_same_lower_bound(disagreeing):
    from ms.gates.base import decision
    from ms.gates.both import BothGate

    class Admits:
        def judge(self, candidates):
            return [decision(c, True, "rubric: admitted", "rubric") for c in candidates]

    meter, candidate = disagreeing
    [mean] = BothGate(Admits(), meter, 0.0).judge([candidate])
    [lower] = BothGate(Admits(), meter, 0.0, "lower").judge([candidate])
    assert mean.accepted and not lower.accepted and lower.reason.startswith("rubric: admitted; utility +0.2000, lower")


def test_the_run_record_names_decide_on_only_where_it_is_lower():
    assert utility_record(composed("gate=utility").gate) == {
        "gate": "utility",
        "utility_threshold": 0.0,
        "utility_probes": 3,
    }
    assert utility_record(composed("gate=both", "gate.decide_on=lower").gate)["utility_decide_on"] == "lower"


# ---- runs recorded before the gates owned their settings ---------------------------------------------

OLD_GATE = {"gate.utility_threshold": 0.0, "gate.probes": 3, "gate.rate": 0.5, "gate.match": None}


@pytest.mark.parametrize("gate", ["rubric", "utility", "both", "all", "random"])
def test_an_old_cell_record_holding_every_gates_keys_resumes_under_its_gate(tmp_path, gate):
    """Records made before: every gate's keys under every gate, no gate.decide_on. Each resumes as the
    same cell (decide_on=mean is what it ran with), and decide_on=lower is another cell."""
    cfg = compose_config([f"gate={gate}"])
    cell = record(cfg, "aaa")
    old = {k: v for k, v in cell["config"].items() if not k.startswith("gate.")}
    cell["config"] = {**old, "gate.name": gate, **OLD_GATE}
    check_same_cell(tmp_path, {"complete": True, "cell": cell}, cfg, "aaa")
    assert with_added(cell["config"]) == identity(cfg)
    if gate in ("utility", "both"):
        with pytest.raises(UserError, match=r"other settings \(gate.decide_on\)"):
            check_same_cell(
                tmp_path,
                {"complete": True, "cell": cell},
                compose_config([f"gate={gate}", "gate.decide_on=lower"]),
                "aaa",
            )


def test_an_old_saved_config_of_a_rubric_run_still_resumes(tmp_path):
    import yaml

    cfg = compose_config([])
    tree = OmegaConf.to_container(cfg, resolve=True)
    tree["gate"] = {"name": "rubric", "utility_threshold": 0.0, "probes": 3, "rate": 0.5, "match": None}
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(tree))
    check_same_cell(tmp_path, {"complete": True}, cfg, None)
