"""The pairs a gate check judges: each seed pair as it is (`good`) and its corrupted copies (the four
ordinary corruptions, where the rubric is handed in the grader-directed ones, and where what it rewards
is handed in the plain-words praise: ms.gates.check_praise), with the names of the kinds and of the
pools of kinds the check reports on."""

from typing import NamedTuple, Optional, Sequence

from ms.data import Example
from ms.data.grader_directed import (
    ANSWER_PLUS_ASSESSMENT,
    SELF_ASSESSMENT,
    RubricText,
    grader_directed,
)
from ms.data.grader_directed import KINDS as GRADER_DIRECTED
from ms.data.plain_praise import Praised, templated
from ms.gates.check_praise import DEVELOPMENT, PRAISE_KINDS, PraiseRequest

GOOD = "good"
CORRUPTIONS = ("swapped", "other_question", "truncated", "empty")
ALL = "all"  # every ordinary corruption together
GRADER_POOL = "grader-directed"  # the two that replace the answer's substance with a claim about it
GRADER_POOLED = (SELF_ASSESSMENT, ANSWER_PLUS_ASSESSMENT)
KINDS = (*CORRUPTIONS, *GRADER_DIRECTED, *PRAISE_KINDS)
EMPTY_ANSWER = "N/A"


class Job(NamedTuple):
    """One pair to judge: a seed pair's question with its own answer (`kind` good) or a corrupted one."""

    agent: str
    kind: str
    example: Example
    answer: str


def truncated(answer: str) -> str:
    """The first line; an answer of one line keeps its first third of words, so it still changes."""
    lines = answer.strip().splitlines()
    if len(lines) > 1:
        return lines[0]
    words = answer.split()
    return " ".join(words[: max(1, len(words) // 3)])


def corrupted_copies(
    seeds: dict[str, list[Example]],
    rubrics: Optional[dict[str, RubricText]] = None,
    seed: int = 0,
    praised: Optional[dict[str, Praised]] = None,
) -> list[Job]:
    """Every seed pair as it is and in each corruption. The swapped answer comes from the next agent
    in the list, so it is always another agent's; the other question's answer from the agent's next
    seed pair, so it is always the same agent's (an agent with one pair has none to give). With
    `rubrics` (agent -> the rubric grading its pairs), the grader-directed copies too, and with `praised`
    (agent -> what that rubric rewards) the templated praise, their wording drawn by `seed` and the pair.
    The model-written praise is added once written (`with_model_praise`)."""
    agents = list(seeds)
    out = []
    for i, agent in enumerate(agents):
        own = seeds[agent]
        donor = seeds[agents[(i + 1) % len(agents)]] if len(agents) > 1 else []
        for j, example in enumerate(own):
            out.append(Job(agent, GOOD, example, example.answer))
            if donor:
                out.append(Job(agent, "swapped", example, donor[j % len(donor)].answer))
            if len(own) > 1:
                out.append(Job(agent, "other_question", example, own[(j + 1) % len(own)].answer))
            out.append(Job(agent, "truncated", example, truncated(example.answer)))
            out.append(Job(agent, "empty", example, EMPTY_ANSWER))
            if rubrics:
                out += [
                    Job(agent, kind, example, grader_directed(kind, example.answer, rubrics[agent], seed, example.id))
                    for kind in GRADER_DIRECTED
                ]
            if praised:
                out += [
                    Job(agent, kind, example, templated(kind, example.answer, praised[agent], seed, example.id))
                    for kind in DEVELOPMENT
                ]
    return out


def with_model_praise(jobs: list[Job], asked: Sequence[PraiseRequest], replies: Sequence[str]) -> list[Job]:
    """`jobs` and a backbone's praise of each pair asked about (ms.gates.check_praise.written), in the
    family each was asked for."""
    return jobs + [Job(r.agent, r.kind, r.example, reply) for r, reply in zip(asked, replies, strict=True)]
