"""The question-dependence test and gate=rubric_qdep (ms.gates.question_dependence, ms.gates.rubric_qdep): an
answer must be likelier after its own question than after other questions of its agent, by a margin. The
margin logic on a scripted backbone, the gate's settings, record and plan, the rule that the defence never
imports the held-out praise, and on the real default backbone: praise alone refused, a seed pair admitted."""

from __future__ import annotations

import grimp
import pytest
from conftest import compose_config
from fakes import FakeLM
from omegaconf import OmegaConf
from test_gates_settings import composed, refused
from test_pipeline import TINY

from ms.agents import Agent, PromptTemplate
from ms.config.parts import GATES
from ms.config.schema import ScorerConfig
from ms.gates.base import GateParts
from ms.gates.question_dependence import QuestionTest, dependence, others_of
from ms.gates.replay import Candidate
from ms.gates.rubric_qdep import RubricQdepGate
from ms.gates.scorer import Scorer, load_rubrics
from ms.gates.settings import RubricQdepSettings
from ms.plan.planner import plan_run

QUESTIONS = [f"Riddle number {i}: what am I?" for i in range(6)]
RIDDLE = Agent("riddle", "logic", "You solve riddles.", "logic")
TEMPLATE = PromptTemplate(**compose_config().prompt)


def answer_to(i: int) -> str:
    return f"I am thing {i}."


def scores(context: str, text: str) -> tuple[float, int]:
    """A backbone to which an answer 'I am thing i.' is likely (-1 a token) after riddle number i only, and
    anything else equally unlikely (-2 a token) after every question."""
    n = len(text.split())
    tied = [i for i in range(len(QUESTIONS)) if text == answer_to(i) and f"Riddle number {i}:" in context]
    return (-1.0 * n if tied else -2.0 * n), n


def question_test(lm: FakeLM, others: int = 3, margin: float = 0.05, questions=QUESTIONS) -> QuestionTest:
    return QuestionTest(lambda agent: lm, {"riddle": RIDDLE}, TEMPLATE, {"riddle": questions}, others, margin, 0)


# ---- the others and the margin -----------------------------------------------------------------------


def test_the_others_are_the_agents_other_questions_drawn_by_the_seed():
    asked = QUESTIONS[2]
    drawn = others_of([*QUESTIONS, QUESTIONS[1]], "riddle", f"  {asked} ", 4, 0)
    assert len(drawn) == len(set(drawn)) == 4 and asked not in drawn and set(drawn) <= set(QUESTIONS)
    assert drawn == others_of(QUESTIONS, "riddle", asked, 4, 0)  # the same pair meets the same others
    assert len({tuple(others_of(QUESTIONS, "riddle", asked, 4, seed)) for seed in range(6)}) > 1
    assert others_of(QUESTIONS[:2], "riddle", QUESTIONS[0], 4, 0) == [QUESTIONS[1]]  # fewer where there are fewer
    assert others_of(["A\nsplit  question"], "riddle", "another", 1, 0) == ["A\nsplit  question"]  # as written


def test_a_pair_passes_only_by_more_than_the_margin_over_the_mean_of_the_others():
    passed = dependence(-1.0, [-1.2, -1.4], 0.25)
    assert passed.passed and passed.d == pytest.approx(0.3) and passed.after == [-1.2, -1.4]
    level = dependence(-1.0, [-1.1, -1.4], 0.25)  # d = 0.25: not more than the margin
    assert not level.passed and "<= margin 0.25 over 2 other questions" in level.why
    assert dependence(-1.0, [-0.5, -3.0], 0.0).passed  # the mean of the others is compared, not the likeliest


def test_an_answer_to_its_own_question_passes_and_praise_or_anothers_answer_does_not():
    lm = FakeLM(scores=scores)
    test = question_test(lm, others=5)  # every other question of the agent: another's answer meets its own
    good, praise, swapped = test.measure(
        [
            ("riddle", QUESTIONS[0], answer_to(0)),
            ("riddle", QUESTIONS[0], "A fine riddle answer, clear and clever throughout."),
            ("riddle", QUESTIONS[0], answer_to(3)),
        ]
    )
    assert good.passed and good.d == pytest.approx(1.0) and good.own == pytest.approx(-1.0)
    assert not praise.passed and praise.d == pytest.approx(0.0)
    assert not swapped.passed and swapped.d == pytest.approx(-0.2)  # likelier after riddle 3, one of the five
    assert len(lm.scored) == 3 * 6 and lm.usage_by_role["score"].calls == 18  # 1 + m passes each, role score
    contexts = [context for context, _ in lm.scored[:6]]
    assert QUESTIONS[0] in contexts[0] and all(QUESTIONS[0] not in c for c in contexts[1:])
    assert all(RIDDLE.instruction in c for c in contexts)  # the agent's own chat


def test_an_empty_answer_is_refused_and_an_agent_without_other_questions_is_let_through_unscored():
    lm = FakeLM(scores=scores)
    [empty] = question_test(lm).measure([("riddle", QUESTIONS[0], "  ")])
    [alone] = question_test(lm, questions=QUESTIONS[:1]).measure([("riddle", QUESTIONS[0], answer_to(0))])
    assert (empty.passed, empty.d) == (False, None) and "empty answer" in empty.why
    assert (alone.passed, alone.d) == (True, None) and "no other question" in alone.why
    assert lm.scored == []


# ---- the gate -----------------------------------------------------------------------------------------


def gate(lm: FakeLM, margin: float = 0.05) -> RubricQdepGate:
    scorer = Scorer(lm, load_rubrics(["logic"]), ScorerConfig(threshold=50, read="text", defence="none"))
    parts = GateParts(
        scorer,
        lambda agent: "logic",
        meter=None,
        question_test=lambda others, m, seed: QuestionTest(
            lambda agent: lm, {"riddle": RIDDLE}, TEMPLATE, {"riddle": QUESTIONS}, others, m, seed
        ),
    )
    return RubricQdepGate.build(RubricQdepSettings(name="rubric_qdep", margin=margin), parts)


def test_the_gate_refuses_what_the_rubric_admits_but_the_test_does_not_and_tests_nothing_the_rubric_refused():
    lm = FakeLM({"lowly": "10"}, default="80", scores=scores)
    good, praise, low = gate(lm).judge(
        [
            Candidate("riddle", "logic", QUESTIONS[0], answer_to(0)),
            Candidate("riddle", "logic", QUESTIONS[1], "Clever, clear and complete: a model riddle answer."),
            Candidate("riddle", "logic", QUESTIONS[2], "A lowly guess."),
        ]
    )
    assert good.accepted and good.question_test["passed"] and "question dependence +1.0000 > margin 0.05" in good.reason
    assert not praise.accepted and praise.score == 80 and praise.question_test["d"] == pytest.approx(0.0)
    assert praise.reason.startswith("score 80 >= threshold 50; question dependence +0.0000 <= margin 0.05")
    assert not low.accepted and low.question_test is None and "question_test" not in low.as_dict()
    assert {text for _, text in lm.scored} == {answer_to(0), praise.answer}  # 4 passes each, none for the third
    assert RubricQdepGate.check_scores([good, praise, low], None) == [80.0, 0.0, 0.0]


def test_the_settings_are_typed_validated_and_recorded():
    cfg = composed("gate=rubric_qdep")
    assert OmegaConf.get_type(cfg.gate) is RubricQdepSettings
    assert (cfg.gate.others, cfg.gate.margin, cfg.gate.seed) == (4, 0.05, 0)
    assert GATES.load("rubric_qdep").record(composed("gate=rubric_qdep", "gate.margin=0.1").gate) == {
        "gate": "rubric_qdep",
        "question_others": 4,
        "question_margin": 0.1,
        "question_seed": 0,
    }
    assert refused("gate=rubric", "gate.others=3").startswith("unknown key gate.others under gate=rubric")
    assert refused("gate=rubric_qdep", "gate.others=many") == (
        "invalid setting gate.others=many under gate=rubric_qdep: must be an integer"
    )
    from ms.loop.validation import problems

    assert problems(composed("gate=rubric_qdep", "gate.others=0", "gate.margin=-0.1"), plan=True) == [
        "invalid setting gate.others=0: must be at least 1",
        "invalid setting gate.margin=-0.1: must be at least 0",
    ]
    assert RubricQdepSettings.of(composed().gate) == RubricQdepSettings(name="rubric_qdep")  # the check's, under rubric


def test_plan_mode_counts_the_tests_passes_behind_the_rubric(tmp_path):
    def score_calls(*overrides: str):
        rows = {r.role: r for r in plan_run(compose_config([*TINY, f"cache_dir={tmp_path}", *overrides])).rows}
        return rows["score"].calls, rows["score"].exact

    # 4 stream pairs, each graded once; each agent has 4 seed questions, so 1 + 4 passes per pair tested.
    assert score_calls("gate=rubric") == (4, True)
    assert score_calls("gate=rubric_qdep") == (pytest.approx(4 + 4 * 5), False)  # threshold 0: all tested
    assert score_calls("gate=rubric_qdep", "scorer.threshold=50") == (pytest.approx(4 + 2 * 5), False)
    assert score_calls("gate=rubric_qdep", "gate.others=2")[0] == pytest.approx(4 + 4 * 3)


# ---- what the defence may not see ---------------------------------------------------------------------

DEFENCE = ("ms.gates.question_dependence", "ms.gates.rubric_qdep", "ms.gates.genre", "ms.gates.rubric_genre")
HELD_OUT_SOURCES = ("ms.gates.check_praise",)  # the module that writes and declares the held-out praise


def imported_by(graph, module: str) -> set[str]:
    """Every module of ms that `module` imports, directly or through others, function-level imports included."""
    return set(graph.find_upstream_modules(module))


def test_the_defence_never_imports_the_held_out_families():
    graph = grimp.build_graph("ms", cache_dir=None)
    assert "ms.gates.check_praise" in imported_by(graph, "ms.gates.check")  # the graph does see such imports
    for module in DEFENCE:
        seen = imported_by(graph, module)
        assert not seen & set(HELD_OUT_SOURCES), module
        assert not any(m.startswith("ms.gates.check") for m in seen), module  # nor the gate check at all


# ---- on the real default backbone ------------------------------------------------------------------


@pytest.mark.slow
def test_on_the_default_backbone_praise_alone_is_refused_and_a_seed_pair_admitted(smollm2):
    from ms.agents import agents_from
    from ms.data import load_splits
    from ms.data.plain_praise import Praised, praise
    from ms.gates.rubrics import rubric_for

    cfg = compose_config(["data.agents=[riddle]"])
    agents = agents_from(cfg.agents)
    seeds = load_splits(cfg.data, agents)["riddle"].seed
    defaults = RubricQdepSettings()
    test = QuestionTest(
        lambda agent: smollm2,
        agents,
        PromptTemplate(**cfg.prompt),
        {"riddle": [e.question for e in seeds]},
        defaults.others,
        defaults.margin,
        defaults.seed,
    )
    pair = seeds[0]
    flattering = praise(Praised.of("riddle", rubric_for(agents["riddle"], cfg.pool.mode)), 0, pair.id)
    good, flattered = test.measure([("riddle", pair.question, pair.answer), ("riddle", pair.question, flattering)])
    assert good.passed, good.why
    assert not flattered.passed, flattered.why
