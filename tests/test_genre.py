"""The genre test and gate=rubric_genre (ms.gates.genre, ms.gates.rubric_genre): an answer must be likelier
after its own question than after requests to review a reply to it. The verdicts on a scripted backbone, the
gate's settings, record and plan, and on the real default backbone: praise alone refused, a seed pair
admitted. (That the defence never imports the held-out praise: tests/test_question_dependence.py.)"""

from __future__ import annotations

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
from ms.gates.genre import REVIEWS, GenreTest
from ms.gates.replay import Candidate
from ms.gates.rubric_genre import RubricGenreGate
from ms.gates.scorer import Scorer, load_rubrics
from ms.gates.settings import RubricGenreSettings
from ms.plan.planner import plan_run

RIDDLE = Agent("riddle", "logic", "You solve riddles.", "logic")
TEMPLATE = PromptTemplate(**compose_config().prompt)
QUESTION = "What has keys but opens no lock?"
ANSWER = "A piano."
PRAISE = "A sharp, witty and satisfying reply."


def scores(context: str, text: str) -> tuple[float, int]:
    """A backbone to which the answer is likely (-1 a token) after the question and the praise after a
    review request, and every other pairing unlikely (-2 a token)."""
    n = len(text.split())
    reviewed = any(r.split("{question}")[0] in context for r in REVIEWS)
    likely = (text == ANSWER and not reviewed) or (text == PRAISE and reviewed)
    return (-1.0 if likely else -2.0) * n, n


def gate(lm: FakeLM, margin: float = 0.0) -> RubricGenreGate:
    scorer = Scorer(lm, load_rubrics(["logic"]), ScorerConfig(threshold=50, read="text", defence="none"))
    parts = GateParts(
        scorer,
        lambda agent: "logic",
        meter=None,
        genre_test=lambda m, on: GenreTest(lambda a: lm, {"riddle": RIDDLE}, TEMPLATE, m),
    )
    return RubricGenreGate.build(RubricGenreSettings(name="rubric_genre", margin=margin), parts)


def test_the_review_requests_name_the_question_and_the_test_compares_with_them():
    lm = FakeLM({}, default="80", scores=scores)
    test = GenreTest(lambda a: lm, {"riddle": RIDDLE}, TEMPLATE, 0.0)
    assert test.contrasts("riddle", QUESTION) == [r.format(question=QUESTION) for r in REVIEWS]
    assert all(QUESTION in c for c in test.contrasts("riddle", QUESTION))
    answer, praise, empty = test.measure(
        [("riddle", QUESTION, ANSWER), ("riddle", QUESTION, PRAISE), ("riddle", QUESTION, " ")]
    )
    assert answer.passed and answer.d == pytest.approx(1.0) and len(answer.after) == len(REVIEWS)
    assert not praise.passed and praise.d == pytest.approx(-1.0)
    assert praise.why == f"answer over review -1.0000 <= margin 0 over {len(REVIEWS)} review requests"
    assert empty.d is None and not empty.passed  # an empty answer is never admitted


def test_the_gate_refuses_what_the_rubric_admits_but_the_test_does_not_and_tests_nothing_the_rubric_refused():
    lm = FakeLM({"lowly": "10"}, default="80", scores=scores)
    good, praise, low = gate(lm).judge(
        [
            Candidate("riddle", "logic", QUESTION, ANSWER),
            Candidate("riddle", "logic", QUESTION, PRAISE),
            Candidate("riddle", "logic", QUESTION, "A lowly guess."),
        ]
    )
    assert good.accepted and good.genre_test["passed"] and good.question_test is None
    assert not praise.accepted and praise.score == 80 and "answer over review -1.0000 <= margin 0" in praise.reason
    assert not low.accepted and low.genre_test is None and "genre_test" not in low.as_dict()
    assert "genre_test" in good.as_dict() and "question_test" not in good.as_dict()
    assert {text for _, text in lm.scored} == {ANSWER, PRAISE}  # 1 + 2 passes each, none for the third
    assert RubricGenreGate.check_scores([good, praise, low], None) == [80.0, 0.0, 0.0]


def test_the_settings_are_typed_validated_and_recorded():
    cfg = composed("gate=rubric_genre")
    assert OmegaConf.get_type(cfg.gate) is RubricGenreSettings
    assert cfg.gate.margin == 0.0
    assert GATES.load("rubric_genre").record(composed("gate=rubric_genre", "gate.margin=0.1").gate) == {
        "gate": "rubric_genre",
        "genre_margin": 0.1,
    }
    assert refused("gate=rubric_genre", "gate.others=3").startswith("unknown key gate.others under gate=rubric_genre")
    assert refused("gate=rubric_genre", "gate.margin=high") == (
        "invalid setting gate.margin=high under gate=rubric_genre: must be a number"
    )
    assert RubricGenreSettings.of(composed().gate) == RubricGenreSettings(
        name="rubric_genre"
    )  # the check's, under rubric


def test_a_test_backbone_of_its_own_is_recorded_validated_labelled_and_a_new_cell():
    from ms.config.parts import GATES as gates
    from ms.gates.record import GateRecord
    from ms.loop.cell import with_added
    from ms.loop.validation import problems
    from ms.report.common.labels import LABELS

    on = composed("gate=rubric_genre", "gate.test_backbone=qwen2.5-0.5b").gate
    assert RubricGenreSettings.of(on).test_backbone == "qwen2.5-0.5b"
    record = gates.load("rubric_genre").record(on)
    assert record == {"gate": "rubric_genre", "genre_margin": 0.0, "genre_backbone": "qwen2.5-0.5b"}
    words = next(label.words for label in LABELS[gates].labels if label.name == "rubric_genre")
    assert words(GateRecord.from_json(record)) == "rubric gate with the genre test on qwen2.5-0.5b"
    assert (
        words(GateRecord.from_json({"gate": "rubric_genre", "genre_margin": 0.0})) == "rubric gate with the genre test"
    )
    # A cell recorded before the setting ran the test on the agents' backbones; under other gates it is no key.
    assert with_added({"gate.name": "rubric_genre", "gate.margin": 0.0})["gate.test_backbone"] is None
    assert "gate.test_backbone" not in with_added({"gate.name": "rubric"})

    def found(name: str) -> list[str]:
        cfg = compose_config(["gate=rubric_genre", f"gate.test_backbone={name}"])
        return [p for p in problems(cfg, plan=True) if "test_backbone" in p]

    assert found("qwen2.5-0.5b") == []
    [unknown] = found("nonesuch")
    assert unknown.startswith("invalid setting gate.test_backbone=nonesuch: no backbone 'nonesuch'")
    [blind] = found("gpt-4o")  # an API chat backbone returns no log-probs of given text
    assert blind.startswith("invalid setting gate=rubric_genre: backbone 'gpt-4o' (provider openai) cannot score")
    assert "(gate.test_backbone)" in blind


def test_plan_mode_counts_the_tests_passes_behind_the_rubric(tmp_path):
    def score_calls(*overrides: str):
        rows = {r.role: r for r in plan_run(compose_config([*TINY, f"cache_dir={tmp_path}", *overrides])).rows}
        return rows["score"].calls, rows["score"].exact

    # 4 stream pairs, each graded once; each tested after its question and the review requests.
    assert score_calls("gate=rubric_genre") == (pytest.approx(4 + 4 * (1 + len(REVIEWS))), False)
    assert score_calls("gate=rubric_genre", "scorer.threshold=50") == (pytest.approx(4 + 2 * (1 + len(REVIEWS))), False)
    # With a test backbone of its own, the grader's row keeps the gradings and the test's row the passes.
    rows = plan_run(compose_config([*TINY, f"cache_dir={tmp_path}", "gate=rubric_genre", "gate.test_backbone=gemma3"]))
    calls = {(r.role, r.backbone): r.calls for r in rows.rows if r.role == "score"}
    assert calls == {("score", "smollm2"): pytest.approx(4), ("score", "gemma3"): pytest.approx(4 * (1 + len(REVIEWS)))}


@pytest.mark.slow
def test_on_the_default_backbone_praise_alone_is_refused_and_a_seed_pair_admitted(smollm2):
    from ms.agents import agents_from
    from ms.data import load_splits
    from ms.data.plain_praise import Praised, praise
    from ms.gates.rubrics import rubric_for

    cfg = compose_config(["data.agents=[riddle]"])
    agents = agents_from(cfg.agents)
    pair = load_splits(cfg.data, agents)["riddle"].seed[0]
    test = GenreTest(lambda agent: smollm2, agents, PromptTemplate(**cfg.prompt), RubricGenreSettings().margin)
    flattering = praise(Praised.of("riddle", rubric_for(agents["riddle"], cfg.pool.mode)), 0, pair.id)
    good, flattered = test.measure([("riddle", pair.question, pair.answer), ("riddle", pair.question, flattering)])
    assert good.passed, good.why
    assert not flattered.passed, flattered.why
