"""The question-dependence test (gate=rubric_qdep): an answer must depend on its question.

A pair (X, Y) of agent a is scored teacher-forced, in the chat a asks zero-shot (its instruction, the
prompt template with no memories), once after its own question X and once after each of m other
questions x_1..x_m of the same agent:

    d = log P(Y | X) / |Y| - mean_j log P(Y | x_j) / |Y|

in nats per token, and the pair passes when d > margin. The m others are drawn from the agent's seed
questions (never X itself) by a generator seeded by the gate's seed, the agent and X, so a pair meets
the same others on every run and machine, and a seed pair's copies in the gate check meet the same
others as the pair itself. 1 + m scored passes, no decoding. Why the mean over the others, and what
the test cannot see: docs/concepts/gates.md, "An answer must depend on its question".

`ContrastTest` is the measurement both this test and the genre test (ms.gates.genre) make: they differ
only in what the answer is scored after besides its own question.
"""

import random
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from ms.agents import Agent, PromptTemplate, chat
from ms.llm.base import LM
from ms.pool.records import normalize_space

# Its passes count under the role of the gate's judgement of a pair.
QUESTION_ROLE = "score"


@dataclass
class Dependence:
    """One pair's measurement: `d` None where it could not be made (no other question of its agent to
    compare with, or an empty answer); `own` and `after` in nats per token."""

    d: Optional[float]
    own: Optional[float] = None  # Y after its own question
    after: list[float] = field(default_factory=list)  # Y after each other question, in draw order
    margin: float = 0.0
    passed: bool = False
    why: str = ""


def others_of(questions: Sequence[str], agent: str, question: str, m: int, seed: int) -> list[str]:
    """The m other questions (fewer where `questions` holds fewer) a pair of `agent` asking `question` is
    compared with, drawn from `questions` (the agent's seed questions) less the question itself, each as
    written (the pair's own question is scored as written too). Distinct questions only: a question asked
    twice in the data is one other question."""
    own = normalize_space(question)
    distinct: dict[str, str] = {}
    for q in questions:
        distinct.setdefault(normalize_space(q), q)
    distinct.pop(own, None)
    pool = list(distinct.values())
    return random.Random(f"{seed}:{agent}:{own}").sample(pool, min(m, len(pool)))


def dependence(
    own: float, after: Sequence[float], margin: float, what: str = "question dependence", over: str = "other questions"
) -> Dependence:
    """The verdict on a pair from its per-token log-probs: after its own question, after each contrast
    (`what` names the test and `over` its contrasts in the verdict's words)."""
    d = own - sum(after) / len(after)
    passed = d > margin
    why = f"{what} {d:+.4f} {'>' if passed else '<='} margin {margin:g} over {len(after)} {over}"
    return Dependence(round(d, 6), round(own, 6), [round(a, 6) for a in after], margin, passed, why)


class ContrastTest:
    """A pair's answer scored after its own question and after each of its contrasts (user prompts of the
    same agent's chat), passing when it is likelier after its own by more than `margin` nats per token.
    `lm_for(agent)`: the backbone an agent answers on, which scores its pairs. A test says which contrasts
    a pair meets (`contrasts`), and names itself and them in its verdicts (`what`, `over`)."""

    what: str
    over: str

    def __init__(
        self, lm_for: Callable[[str], LM], agents: Mapping[str, Agent], template: PromptTemplate, margin: float
    ):
        self.lm_for, self.agents, self.template, self.margin = lm_for, agents, template, margin

    def contrasts(self, agent: str, question: str) -> list[str]:
        """The queries the answer is also scored after, each rendered by the template like its own question."""
        raise NotImplementedError

    def unmeasured(self, agent: str) -> Dependence:
        """The measurement of a pair that meets no contrast."""
        return Dependence(None, margin=self.margin, why=f"{self.what} unmeasured: no contrast for {agent}")

    def measure(self, items: Sequence[tuple[str, str, str]]) -> list[Dependence]:
        """Each (agent, question, answer)'s measurement: one batched `loglikelihood` call per backbone."""
        out: list[Optional[Dependence]] = [None] * len(items)
        todo: dict[int, list[tuple[int, list[str]]]] = {}  # lm -> (item, its contexts: own first)
        lms: dict[int, LM] = {}
        for i, (agent, question, answer) in enumerate(items):
            contrasts = self.contrasts(agent, question)
            if not answer.strip():
                out[i] = Dependence(None, margin=self.margin, why=f"{self.what} unmeasured: an empty answer")
                continue
            if not contrasts:
                out[i] = self.unmeasured(agent)
                continue
            lm = self.lm_for(agent)
            lms[id(lm)] = lm
            contexts = [
                lm.chat_context(chat(self.agents[agent], self.template.render(q), self.template.system))
                for q in (question, *contrasts)
            ]
            todo.setdefault(id(lm), []).append((i, contexts))
        for key, jobs in todo.items():
            contexts = [c for _, cs in jobs for c in cs]
            answers = [items[i][2] for i, cs in jobs for _ in cs]
            with lms[key].acting_as(QUESTION_ROLE):
                scored = iter(lms[key].loglikelihood(contexts, answers))
            for i, cs in jobs:
                per_token = [total / max(tokens, 1) for total, tokens in (next(scored) for _ in cs)]
                out[i] = dependence(per_token[0], per_token[1:], self.margin, self.what, self.over)
        return out


class QuestionTest(ContrastTest):
    """The question-dependence test: the contrasts are m other questions of the same agent. `questions`:
    agent -> the questions its others are drawn from (its seed questions); `others`, `margin`, `seed`: the
    gate's settings (ms.gates.settings.RubricQdepSettings)."""

    what = "question dependence"
    over = "other questions"

    def __init__(
        self,
        lm_for: Callable[[str], LM],
        agents: Mapping[str, Agent],
        template: PromptTemplate,
        questions: Mapping[str, Sequence[str]],
        others: int,
        margin: float,
        seed: int,
    ):
        if others < 1:
            raise ValueError(f"gate.others must be at least 1, got {others}")
        super().__init__(lm_for, agents, template, margin)
        self.questions, self.others, self.seed = questions, others, seed

    def contrasts(self, agent: str, question: str) -> list[str]:
        return others_of(self.questions.get(agent, ()), agent, question, self.others, self.seed)

    def unmeasured(self, agent: str) -> Dependence:
        # Nothing to compare with (an agent with one seed question): admitted, as the utility gate admits
        # a pair with nothing to probe, so that such an agent's pool is not shut.
        why = f"question dependence unmeasured: {agent} has no other question"
        return Dependence(None, margin=self.margin, passed=True, why=why)
