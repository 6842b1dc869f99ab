"""Gate sanity (`ms-data gate-check`): can a gate tell good pairs from broken ones?

Each agent's seed pairs are judged as they are and as corrupted copies; docs/concepts/gates.md ("Can a
gate tell good pairs from bad?") says which copies and how they are pooled (the grader-directed and
plain-words praise families apart, never in `all`). Each gate gives every pair a score: the rubric's
grade, the utility gate's u, for `both` the pair's place in the order (rubric admits, u), and for
`rubric_qdep` the grade where the question-dependence test passes, else 0 (`rubric_genre` likewise with
the genre test). The per-agent ROC AUC (good
above corrupted) with a 95% bootstrap CI says whether a gate separates them: 0.5 is chance.

The pairs and their corruptions are built in ms.gates.check_corruptions, the AUCs measured in
ms.gates.check_auc, and the results written and printed by ms.gates.check_report: this module says
which gates are checked, and takes their measurements of the pairs.
"""

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from ms.common.errors import UserError
from ms.config.parts import GATES
from ms.data.plain_praise import Praised
from ms.gates.check_corruptions import GOOD, Job, corrupted_copies
from ms.gates.check_praise import PraiseRequest, requests
from ms.gates.question_dependence import ContrastTest
from ms.gates.replay import Utility
from ms.gates.scorer import Decision, Scorer, rubric_for
from ms.gates.settings import RubricGenreSettings


def checked_gates() -> list[str]:
    """The gates the gate check measures (ms.config.parts.GATES): those whose class names the
    measurements it takes (`Gate.checked_by`); the admission controls judge nothing to check."""
    return [name for name, cls in GATES.loaded().items() if cls.checked_by]


def missing_score(gate: str) -> float:
    """Which score a pair gets where its gate read none (`Gate.check_missing`): the rubric rejects an
    unscored pair, and the utility gate admits one it could not measure (its scope held nothing to probe)."""
    return GATES.load(gate).check_missing


@dataclass(frozen=True)
class CheckSettings:
    """What the gate check and its plan (ms.plan.data) read of the command's config: the sections of the parts
    they build, and the few root settings among them. Its command (ms.cli.gate_commands) takes it from the
    root config."""

    agents: Mapping  # `agents`: name -> entry
    data: Any  # the data section: where the seed pairs are
    backbones: Any  # ms.llm.backbones.Backbones of the default `backbone`, and where responses are cached
    scorer: Any  # the scorer's section: the grader
    gate: Any  # the gate's section: the utility gate's probes, the question test's settings
    prompt: Any  # the prompt section
    pool_mode: str  # which rubric grades a pair, and which seed pairs a utility probe draws on
    shots: int  # memories in a utility probe's prompt: the run's stream_k
    seed: int  # the corruptions' and the praise's draws


class Checked(NamedTuple):
    """What `ms-data gate-check` judges and on which backbones, from the config alone (its plan too)."""

    agents: dict  # name -> ms.agents.Agent
    splits: dict  # agent -> its data splits
    jobs: list[Job]  # all but the model-written praise, which `asked` requests
    rubric: bool  # whether the rubric grades the jobs (a gate checked by it: --gate rubric or both)
    utility: bool  # whether the utility gate measures them (--gate utility or both)
    backbone_of: dict[str, str]  # agent -> the backbone it answers (and its utility is scored) on
    question: bool = False  # whether the question-dependence test measures them (--gate rubric_qdep)
    asked: list[PraiseRequest] = []  # the praise the backbones are asked to write (model_praise and the others)
    genre: bool = False  # whether the genre test measures them (--gate rubric_genre)
    writers: dict[str, str] = {}  # family -> the backbone that writes it (check_praise.WRITTEN_BY's options)
    genre_on: Optional[str] = None  # the genre test's backbone (gate.test_backbone); None: each agent's own

    def genre_backbone_of(self, agent: str) -> str:
        """The backbone the genre test scores `agent`'s pairs on."""
        return self.genre_on or self.backbone_of[agent]

    def writer_of(self, asked: PraiseRequest) -> Optional[str]:
        """The backbone a request is put to: its family's writer, else the check's own (None)."""
        return self.writers.get(asked.kind)


def what_to_check(
    settings: CheckSettings,
    per_agent: int,
    gates: Sequence[str],
    writers: Optional[dict[str, str]] = None,
    only: Optional[Sequence[str]] = None,
) -> Checked:
    """Up to `per_agent` seed pairs per agent and their corrupted copies, and which measurements the
    gates take of them (`Gate.checked_by`); `writers`: family -> the backbone (a name) that writes it,
    for the families another backbone writes (check_praise.WRITTEN_BY: cross_praise, third_praise, ...).
    `only`: the kinds judged (the good pairs always), each copy made as in the whole check."""
    from ms.agents import agents_from
    from ms.data import load_splits

    agents = agents_from(settings.agents)
    splits = load_splits(settings.data, agents)
    measured = {m for gate in gates for m in GATES.load(gate).checked_by}
    rubric, utility, question = "rubric" in measured, "utility" in measured, "question" in measured
    genre = "genre" in measured
    # The grader-directed copies and the praise speak the rubric that grades the pair (the Single pool's, there).
    graded = {agent: rubric_for(agents[agent], settings.pool_mode) for agent in splits}
    praised = {agent: Praised.of(agent, rubric) for agent, rubric in graded.items()}
    seeds = {agent: parts.seed[:per_agent] for agent, parts in splits.items()}
    jobs = corrupted_copies(seeds, {a: r.quoted() for a, r in graded.items()}, settings.seed, praised)
    backbones = settings.backbones
    backbone_of = {agent: backbones.resolve(agents[agent].backbone) for agent in splits}
    genre_on = RubricGenreSettings.of(settings.gate).test_backbone if genre else None
    scoring = [
        (f"agent {a}", name) for a, name in backbone_of.items() if utility or question or (genre and not genre_on)
    ]
    scoring += [("gate.test_backbone", genre_on)] if genre_on else []
    for whose, name in scoring:
        if not backbones.can(name, "scores_text"):  # an unknown name is refused here too
            raise UserError(
                f"--gate {','.join(gates)}: backbone '{name}' of {whose} cannot score given "
                f"text; use an hf backbone, or backbone.prompt_logprobs=echo"
            )
    asked = requests(seeds, praised, settings.seed)
    writers = {kind: name for kind, name in (writers or {}).items() if name}
    for kind, name in writers.items():
        backbones.config(name)  # an unknown name is refused here, before anything is built
        asked += requests(seeds, praised, settings.seed, kind)
    if only is not None:
        jobs = [j for j in jobs if j.kind == GOOD or j.kind in only]
        asked = [a for a in asked if a.kind in only]
    return Checked(agents, splits, jobs, rubric, utility, backbone_of, question, asked, genre, writers, genre_on)


def grade(scorer: Scorer, jobs: Sequence[Job], rubric_of: dict[str, str], batch: int = 16) -> list[Decision]:
    """The rubric gate's decision on every job. `rubric_of`: agent -> the rubric's name."""
    from tqdm.auto import tqdm

    decisions: list[Decision] = []
    for start in tqdm(range(0, len(jobs), batch), desc="gate-check rubric", unit="batch"):
        decisions += scorer.score(
            [(j.agent, rubric_of[j.agent], j.example.question, j.answer) for j in jobs[start : start + batch]]
        )
    return decisions


def contrast_tests(
    test: ContrastTest, jobs: Sequence[Job], decisions: Sequence[Decision], field: str, batch: int = 32
) -> list[Decision]:
    """A contrast test (question dependence, genre) of every job, kept in its decision (`field`) beside the
    grade, which stays the rubric's: the check score of the gate that adds the test is read from both."""
    from tqdm.auto import tqdm

    out: list[Decision] = []
    for start in tqdm(range(0, len(jobs), batch), desc=f"gate-check {test.what}", unit="batch"):
        part = jobs[start : start + batch]
        measured = test.measure([(j.agent, j.example.question, j.answer) for j in part])
        out += [replace(d, **{field: asdict(m)}) for d, m in zip(decisions[start : start + batch], measured)]
    return out


def gate_scores(
    gates: Sequence[str], decisions: Optional[Sequence[Decision]], utilities: Optional[Sequence[Utility]]
) -> dict[str, list[Optional[float]]]:
    """gate -> each job's score (None where the gate read none), from the measurements taken once
    (`Gate.check_scores`): `both` is derived from the other two, never measured again."""
    return {gate: GATES.load(gate).check_scores(decisions, utilities) for gate in gates}
