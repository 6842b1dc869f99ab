"""A poisoning writer: one extra writer in the pool that asks its victim agent's stream
questions and answers them badly, so its pairs compete with the victim's for the same retrievals.
Its kinds are the POISONS registry (ms.config.parts; docs/concepts/poisoning.md says what each writes):
none, off_task, on_style and injection here; those aimed at the grader in ms.data.poison_grader.

Answers are drawn from the data, never generated: the poisoner calls no model. No answer is ever a
test question's reference (that would leak test answers into the pool). Every choice is drawn from a
generator seeded by the run's seed and the asked question's id, so a run draws the same answers every
time. The loop hands the pairs to the run's gate as the victim's candidates (graded with the victim's
rubric, measured with the victim's prompts) and stores those it admits under `poison.writer`.
"""

import random
from dataclasses import dataclass
from typing import ClassVar, Iterator, Mapping, Optional, Sequence

from ms.agents import Agent
from ms.data.grader_directed import RubricText
from ms.data.load import Example
from ms.data.poison_settings import PoisonerSettings
from ms.data.splits import Splits
from ms.pool.records import normalize_space


@dataclass(frozen=True)
class PoisonPair:
    """One pair the poisoner asks to add: the victim's stream question it asked (`example`) and its bad
    answer; `source` is the id of the example whose reference it took (None for an injection)."""

    victim: str
    example: Example
    answer: str
    source: Optional[str] = None

    @property
    def question(self) -> str:
        return self.example.question


class Poisoner:
    """A registered kind of poison. `pairs(asked)` is all the loop and plan mode ask of a built one;
    the classmethods say what the run's checks and record need without building it."""

    name: ClassVar[str] = "none"
    active: ClassVar[bool] = True  # False: no poisoner (poison=none): the run records nothing of it
    draws_as: ClassVar[Optional[str]] = None  # another kind whose donors it draws (its answers built on them)
    in_words: ClassVar[str] = "poisoned answers"  # what it writes, as the report says: "poisoner of riddle: <this>"

    def __init__(
        self,
        cfg,
        agents: Mapping[str, Agent],
        splits: Mapping[str, Splits],
        seed: int = 0,
        rubric: Optional[RubricText] = None,
    ):
        self.cfg, self.agents, self.splits, self.seed = cfg, agents, splits, seed
        self.rubric = rubric  # the rubric grading the victim's pairs, for kinds that talk to the grader
        self.victim: Optional[str] = PoisonerSettings.victim_of(cfg)  # poison=none has none
        self.tests = {normalize_space(e.answer) for s in splits.values() for e in s.test if e.answer}

    @classmethod
    def build(
        cls,
        cfg,
        agents: Mapping[str, Agent],
        splits: Mapping[str, Splits],
        seed: int = 0,
        rubric: Optional[RubricText] = None,
    ) -> "Poisoner":
        """The poisoner `cfg` (its option's settings: ms.data.poison_settings) describes, over the run's
        agents and data splits; `rubric`: the one grading the victim's pairs (the composition root hands it in: the data layer does not
        read rubrics)."""
        problems = list(cls.problems(cfg, agents, list(splits)))
        if problems:
            raise ValueError("\n".join(problems))
        return cls(cfg, agents, splits, seed, rubric)

    @classmethod
    def problems(cls, cfg, agents: Mapping[str, Agent], running: Sequence[str]) -> Iterator[str]:
        """Its settings' problems, one line each naming the key, before anything loads."""
        if cfg.victim is None:
            yield f"invalid setting poison.victim=None: poison={cls.name} needs a victim agent (poison.victim=NAME)"
        elif cfg.victim not in running:
            yield (
                f"invalid setting poison.victim={cfg.victim}: no running agent of that name; the running agents "
                f"are: {', '.join(running)}"
            )
        if cfg.writer in agents:
            yield (
                f"invalid setting poison.writer={cfg.writer}: an agent has that name, so the poisoner's memories "
                f"could not be told from its own; name another writer"
            )

    @classmethod
    def record(cls, cfg) -> dict:
        """What metrics.json's `run` records of it ({} for none, so clean runs stay one condition with
        runs from before poisoners existed)."""
        return {"poison": {"kind": cls.name, "victim": cfg.victim, "writer": cfg.writer}}

    # ---- the pairs -------------------------------------------------------------------------------

    def pairs(self, asked: Sequence[Example]) -> list[PoisonPair]:
        """One poisoned pair for each of the victim's questions among `asked` (a stream micro-batch), in order."""
        return [self.pair(e) for e in asked if e.agent == self.victim]

    def pair(self, example: Example) -> PoisonPair:
        donor = self.donor(example)
        return PoisonPair(self.victim, example, donor.answer, donor.id)

    def donor(self, example: Example) -> Example:
        """The non-test example whose reference answers `example` (a kind that copies references)."""
        pool = [e for e in self.donors(example) if e.answer and normalize_space(e.answer) not in self.tests]
        if not pool:
            raise ValueError(
                f"poison={self.name}: no seed or stream reference to answer {example.id} with ({self.donors_said()})"
            )
        return random.Random(f"{self.seed}:{self.draws_as or self.name}:{example.id}").choice(pool)

    def donors(self, example: Example) -> list[Example]:
        raise NotImplementedError

    def donors_said(self) -> str:
        return "none of the other running agents' seed and stream questions has one"


class NoPoison(Poisoner):
    """poison=none: no poisoner writes; the run is the run it always was."""

    name = "none"
    active = False
    in_words = "no poisoning writer"  # writes nothing: the report says this alone, where it says it at all

    @classmethod
    def problems(cls, cfg, agents, running) -> Iterator[str]:
        return iter(())

    @classmethod
    def record(cls, cfg) -> dict:
        return {}

    def pairs(self, asked: Sequence[Example]) -> list[PoisonPair]:
        return []


def _not_test(split: Splits) -> list[Example]:
    return [*split.seed, *split.stream]


class OffTask(Poisoner):
    """Answers of another domain: a seed or stream reference of an agent whose domain is not the victim's."""

    name = "off_task"
    in_words = "off-task answers"

    @classmethod
    def problems(cls, cfg, agents, running) -> Iterator[str]:
        yield from super().problems(cfg, agents, running)
        victim = agents.get(cfg.victim)
        if victim is not None and not any(agents[a].domain != victim.domain for a in running if a in agents):
            yield (
                f"invalid setting poison=off_task: no running agent outside the victim's domain "
                f"({victim.domain}) to take answers from; run agents of another domain too"
            )

    def donors(self, example: Example) -> list[Example]:
        domain = self.agents[self.victim].domain
        return [e for a, s in self.splits.items() if self.agents[a].domain != domain for e in _not_test(s)]

    def donors_said(self) -> str:
        return "no agent of another domain has a seed or stream question with a reference"


class OnStyle(Poisoner):
    """The victim's own form, the wrong question: the reference of another of its seed or stream questions."""

    name = "on_style"
    in_words = "on-style answers"

    def donors(self, example: Example) -> list[Example]:
        own = normalize_space(example.question)
        return [
            e for e in _not_test(self.splits[self.victim]) if e.id != example.id and normalize_space(e.question) != own
        ]

    def donors_said(self) -> str:
        return f"the victim {self.victim} has no other seed or stream question with a reference"


class Injection(Poisoner):
    """An instruction to whoever reads it (poison.instruction), carrying poison.marker."""

    name = "injection"
    in_words = "an injected instruction"

    @classmethod
    def problems(cls, cfg, agents, running) -> Iterator[str]:
        yield from super().problems(cfg, agents, running)
        if not cfg.marker or cfg.marker not in cfg.instruction:
            yield (
                f"invalid setting poison.instruction={cfg.instruction!r}: it must carry poison.marker="
                f"{cfg.marker!r}, the string a reader's answers are searched for"
            )

    @classmethod
    def record(cls, cfg) -> dict:
        out = super().record(cfg)
        out["poison"]["marker"] = cfg.marker
        return out

    def pair(self, example: Example) -> PoisonPair:
        return PoisonPair(self.victim, example, self.cfg.instruction)


__all__ = ["Injection", "NoPoison", "OffTask", "OnStyle", "PoisonPair", "Poisoner"]
