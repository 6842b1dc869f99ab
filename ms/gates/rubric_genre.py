"""gate=rubric_genre: the rubric first (ms.gates.scorer, its defence included), then the genre test
(ms.gates.genre) on the pairs the rubric admits; a pair needs both. Praise of an answer reads to the
backbone as a review, whatever its words, and fails the test; so does any text that talks about an
answer instead of giving one. The test scores on each agent's backbone, or on the one gate.test_backbone
names (the grader stays scorer.backbone)."""

from typing import Iterator

from ms.gates.base import Backbones, GateParts, GatePlan, unable_to_score
from ms.gates.genre import REVIEWS
from ms.gates.rubric import RubricGate, rubric_acceptance
from ms.gates.rubric_qdep import RubricQdepGate

# As for rubric_qdep: plan mode assumes the rubric's admissions pass the test, so its calls are not undercounted.
GENRE_SAID = "every pair the rubric admits passes the genre test (assumed)"


class RubricGenreGate(RubricQdepGate):
    """rubric_qdep's gate with the genre test in place of the question-dependence test: the same order,
    verdicts and check score, its measurement kept in the decision's genre_test."""

    name = "rubric_genre"
    checked_by = ("rubric", "genre")
    field = "genre_test"
    assumed = GENRE_SAID

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "RubricGenreGate":
        return cls(RubricGate.build(cfg, parts), parts.genre_test(cfg.margin, cfg.test_backbone))

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        plan.grade(agent, question, reply)
        admitted = rubric_acceptance(plan.scorer.threshold)[0]
        plan.test_question(agent, reply, len(REVIEWS), admitted, drawn=False, on=cfg.test_backbone)

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        """The test scores answers on its backbone, which must score given text."""
        named = ("gate.test_backbone", cfg.test_backbone) if cfg.test_backbone else None
        yield from unable_to_score(cfg.name, backbones, named)

    @classmethod
    def record(cls, cfg) -> dict:
        """genre_backbone only where the test has a backbone of its own, so runs on the agents' stay one condition
        with those made before the setting existed (ms.config.added)."""
        on = {"genre_backbone": cfg.test_backbone} if cfg.test_backbone else {}
        return {"gate": cfg.name, "genre_margin": cfg.margin, **on}
