"""Each gate's own settings: one dataclass per registered gate, extending the section every gate shares
(ms.config.GateConfig: its name), registered as the schema of its option in the `gate` group
(ms.config.options; conf/gate/<name>.yaml names it in its defaults list). A key one gate does not
declare is refused at composition under that gate, in one line (ms.cli.compose), and its limits are
checked before anything loads (ms.loop.validation).

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from dataclasses import dataclass
from typing import Any, Optional

from ms.config.fields import setting
from ms.config.schema import GateConfig

# What the utility gate compares with gate.utility_threshold (ms.gates.utility.utility_verdict): the mean
# change over the probes, or the lower bound of its interval over them (the mean less one standard error).
DECIDE_ON = ("mean", "lower")


@dataclass
class RubricSettings(GateConfig):
    """gate=rubric: nothing of its own. The grader's settings are `scorer`'s, the defence included: the
    scorer (ms.gates.scorer) reads them wherever it grades (this gate, `both`, ms-data gate-check and
    cross-grade), so they stay one section of their own."""


@dataclass
class UtilitySettings(GateConfig):
    """gate=utility: a pair joins when it helps its nearest memories' answers (ms.gates.replay)."""

    # Admit when the change in log-prob per token over the probes exceeds this (nats per token). 0 means
    # "helps on average", kept after the gate check (results/README.md, "The gates").
    utility_threshold: float = 0.0
    probes: int = setting(3, ge=1)  # m: the candidate's nearest memories it is replayed on
    # What is held against utility_threshold: mean, the mean change over the probes (the gate as it always
    # was) | lower, the lower bound of its interval over them: the mean less one standard error, so that a
    # pair that helps one probe and hurts the others is refused (ms.gates.utility says why that bound).
    decide_on: str = setting("mean", choices=DECIDE_ON)

    @classmethod
    def probes_of(cls, section: Any) -> int:
        """m for a utility measurement under the gate section `section`: its own where its gate measures
        utility (utility, both), else this gate's default (ms-data gate-check measures utility whichever
        gate its config names)."""
        probes = getattr(section, "probes", None)
        return cls.probes if probes is None else int(probes)


@dataclass
class BothSettings(UtilitySettings):
    """gate=both: the rubric, then utility on what it admits; the utility gate's settings (the rubric's
    are the scorer's)."""


@dataclass
class RubricQdepSettings(GateConfig):
    """gate=rubric_qdep: the rubric (the scorer's settings, its defence included), then the question-dependence
    test on the pairs it admits (ms.gates.question_dependence): an answer must be likelier after its own
    question than after other questions of its agent."""

    others: int = setting(4, ge=1)  # m: the agent's other questions the answer is also scored after
    # Nats per token by which the answer's log-prob after its own question must exceed its mean after the others.
    # 0.05, chosen on the development praise families alone, on seed pairs the gate check does not judge
    # (experiments/defence_margin.py, SmolLM2, 27 good pairs): 93% of good pairs pass, 11% of praise alone and
    # 48% of first line plus praise; Youden's J is flat from 0.04 to 0.09, and the lowest such margin costs
    # fewest good pairs. Qwen2.5-0.5B on 9 pairs agrees (78%, 11%, 44%).
    margin: float = setting(0.05, ge=0.0)
    seed: int = setting(0, ge=0)  # draws the others (with the agent and the question)

    @classmethod
    def of(cls, section: Any) -> "RubricQdepSettings":
        """The test's settings under the gate section `section`: its own under gate=rubric_qdep, else this
        gate's defaults (ms-data gate-check measures the test whichever gate its config names)."""
        if getattr(section, "name", None) == "rubric_qdep":
            return cls(
                name=section.name, others=int(section.others), margin=float(section.margin), seed=int(section.seed)
            )
        return cls(name="rubric_qdep")


@dataclass
class RubricGenreSettings(GateConfig):
    """gate=rubric_genre: the rubric (the scorer's settings, its defence included), then the genre test on
    the pairs it admits (ms.gates.genre): an answer must be likelier after its own question than after
    requests to review a reply to it."""

    # Nats per token by which the answer's log-prob after its question must exceed its mean after the review
    # requests. 0, chosen on the development praise families alone, on seed pairs the gate check does not judge
    # (experiments/defence_margin.py --test genre, SmolLM2, 27 good pairs): 85% of good pairs pass, 11% of
    # praise alone and 11% of first line plus praise; Youden's J is highest there (0.74; 0.65 at 0.02, 0.39
    # at -0.05), and 0 is the test's plain reading (likelier as an answer than as a review). Qwen2.5-0.5B on the
    # same pairs, run after 0 was fixed, agrees: 96%, 4% and 4%, J 0.93, also highest at 0.
    margin: float = setting(0.0)
    # The backbone (a conf/backbone name) the test scores every answer on; null: each agent's own. The grader
    # stays scorer.backbone: a small grader's own test ranks praise worse than a larger backbone's
    # (results/README.md, "Praise in plain words").
    test_backbone: Optional[str] = None

    @classmethod
    def of(cls, section: Any) -> "RubricGenreSettings":
        """The test's settings under the gate section `section`: its own under gate=rubric_genre, else this
        gate's defaults (ms-data gate-check measures the test whichever gate its config names)."""
        if getattr(section, "name", None) == "rubric_genre":
            return cls(name=section.name, margin=float(section.margin), test_backbone=section.test_backbone)
        return cls(name="rubric_genre")


@dataclass
class AllSettings(GateConfig):
    """gate=all: every pair joins; nothing to set."""


@dataclass
class RandomSettings(GateConfig):
    """gate=random, an admission control that judges nothing."""

    # Each candidate is admitted with this probability, drawn from the run's seed ...
    rate: float = setting(0.5, ge=0.0, le=1.0)
    # ... or, given a finished run's folder, exactly as many per agent and micro-batch as it admitted,
    # the pairs chosen at random: a control that admits as much as the gate it controls for.
    match: Optional[str] = None
