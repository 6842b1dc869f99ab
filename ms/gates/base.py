"""What every gate is (`Gate`), and what each side of ms hands it: the composition root the built
parts (`GateParts`), the validation a view of the run's backbones (`Backbones`), plan mode its
planner (`GatePlan`). A gate reads its own config section (its settings, ms.gates.settings) and nothing
else of the root config; what it needs of the rest of the run, the composition root builds for it."""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, NamedTuple, Optional, Protocol, Sequence

from ms.gates.genre import GenreTest
from ms.gates.question_dependence import QuestionTest
from ms.gates.replay import Candidate, Utility, UtilityMeter
from ms.gates.scorer import Decision, Scorer

Decisions = Optional[Sequence[Decision]]  # a gate check's measurements of its pairs; None where not taken
Utilities = Optional[Sequence[Utility]]


@dataclass
class GateParts:
    """What the composition root builds a gate from: the scorer (the rubric grader), each agent's
    rubric name, a factory of the utility meter given its probes, the gate's own setting (called only by
    the gates that measure utility, since it needs the run's retriever), the run's seed (the random
    gate's coins), a factory of the question-dependence test given the gate's others, margin and seed
    (called only by gate=rubric_qdep), and one of the genre test given its margin and the backbone it scores
    on, None for each agent's own (gate=rubric_genre)."""

    scorer: Optional[Scorer]
    rubric_of: Callable[[str], str]
    meter: Callable[[int], UtilityMeter]
    seed: int = 0
    question_test: Optional[Callable[[int, float, int], QuestionTest]] = None
    genre_test: Optional[Callable[[float, Optional[str]], GenreTest]] = None


class Backbones(Protocol):
    """What a gate's own validation may ask of the running agents' backbones."""

    def unable(self, what: str, named: Optional[tuple[str, str]] = None) -> list[tuple[str, str, str]]:
        """(backbone, provider, whose) for each backbone of a running agent that cannot do `what`
        ("scores_text"); `whose` names its agents where not every agent runs on it ("" where all do).
        `named`: (setting, backbone name), that backbone alone, `whose` naming the setting."""


class GatePlan(Protocol):
    """What plan mode (ms.plan.planner) offers a gate that works out its calls for one stream pair."""

    scorer: Any  # the scorer's section (ms.config.ScorerConfig)

    def grade(self, agent: str, question: float, reply: float) -> None:
        """One rubric grading of a pair of `agent` (`question`, `reply` in tokens), under role score."""

    def measure_utility(self, agent: str, in_scope: float, probes: int, share: float, exact: bool) -> None:
        """A utility measurement of a pair of `agent` over min(`probes`, `in_scope`) probes, for `share`
        of the pairs (two scored prompts per probe), under role utility; `exact`: as far as the gate
        knows (the planner adds what the pool's growth leaves unknown)."""

    def test_question(
        self, agent: str, reply: float, others: int, share: float, drawn: bool = True, on: Optional[str] = None
    ) -> None:
        """A contrast test of a pair of `agent` (`reply` in tokens) after its own question and `others`
        contrasts, for `share` of the pairs (one scored prompt each), under role score, on backbone `on`
        (None: the agent's own); `drawn`: the contrasts are drawn from the agent's other seed questions (the
        question-dependence test), so there are no more of them than it has seed questions."""


class Acceptance(NamedTuple):
    """The share of stream pairs a gate is assumed to admit, in words; `assumed`: a guess, which plan
    mode offers to replace with a finished run's measured rate."""

    rate: float
    said: str
    assumed: bool = True


class Gate(ABC):
    """A gate: built from its config section and the run's parts, it judges candidates, one
    `Decision` each. Its class also says what the rest of ms asks of it without building it."""

    name: ClassVar[str]
    measures_utility: ClassVar[bool] = False  # whether it admits by measured utility (ms-report's claim (e))
    # The gate check (ms-data gate-check --gate NAME): the measurements it takes of every pair for
    # this gate ("rubric": a grading, "utility": a utility measurement), none where the gate is not
    # checked; the score a pair gets where its measurement read none; whether the score is a rank.
    checked_by: ClassVar[tuple[str, ...]] = ()
    check_missing: ClassVar[float] = 0.0
    check_ranks: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def build(cls, cfg, parts: GateParts) -> "Gate":
        """The gate of a run: `cfg` is its section (`gate`)."""

    @abstractmethod
    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        """One decision per candidate, in order."""

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        """Its settings' problems beyond their declared limits, one line each, before anything loads."""
        return iter(())

    @classmethod
    @abstractmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        """The share of stream pairs plan mode assumes it admits."""

    @classmethod
    def planned_calls(cls, cfg, plan: GatePlan, agent: str, question: float, reply: float, in_scope: float) -> None:
        """Its LLM calls for one stream pair of `agent` (`question`, `reply` in tokens) with `in_scope`
        memories in its scope when judged, added to `plan`. None by default."""

    @classmethod
    def record(cls, cfg) -> dict:
        """What metrics.json's run record keeps of it (a condition of ms-report)."""
        return {"gate": cfg.name}

    @classmethod
    def grades_with_rubrics(cls) -> bool:
        """Whether it grades pairs against their agents' rubric files, which a run's record then keeps the
        content of (ms.loop.inputs): where its check takes a grading."""
        return "rubric" in cls.checked_by

    @classmethod
    def files_read(cls, cfg) -> dict[str, Path]:
        """label -> each file its settings name that it reads (the cell record keeps their content)."""
        return {}

    @classmethod
    def check_scores(cls, decisions: Decisions, utilities: Utilities) -> list[Optional[float]]:
        """The gate check: each pair's score from the measurements `checked_by` names."""
        raise NotImplementedError(f"gate {cls.name} is not checked by ms-data gate-check")


def unable_to_score(gate: str, backbones: Backbones, named: Optional[tuple[str, str]] = None) -> Iterator[str]:
    """One problem per backbone that cannot score given text, for a gate whose measurement scores answers
    on each agent's backbone (the utility probes, the question-dependence test), or on the one backbone
    `named` (setting, name) names."""
    for name, provider, whose in backbones.unable("scores_text", named):
        yield (
            f"invalid setting gate={gate}: backbone '{name}' (provider {provider}) cannot score given "
            f"text{whose}; use a backbone that can (hf), or backbone.prompt_logprobs=echo "
            f"on a server that returns prompt log-probs"
        )


def decision(c: Candidate, accepted: bool, reason: str, read: str, utility: Optional[dict] = None) -> Decision:
    """A decision that read no score, made no grader call and kept no reply (a control's, or one a
    measurement made, with what it measured)."""
    return Decision(c.agent, c.question, c.answer, None, accepted, reason, 0, "", read=read, utility=utility)
