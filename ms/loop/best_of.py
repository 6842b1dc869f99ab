"""Best-of-n writing (stream.best_of > 1): the stream agent samples n answers to its prompt
(`LM.sample`, each seeded by the prompt, the run's seed and its index), a selector (stream.select:
grader or likelihood; docs/concepts/stream.md, "Best-of-n writing") scores each, and only the
best-scored one goes on to the gate. decisions.jsonl keeps every candidate with its score and which
was kept (`Choice.record`). The highest score wins; ties go to the earlier sample, and a candidate with
no score (an unscored grading, an empty answer) ranks below every scored one.
"""

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ms.gates.scorer import Scorer
from ms.llm import LM

# (role, call(lm, indices) -> one value per index) -> values in query order: ms.loop.answering's by_backbone
OnBackbone = Callable[[str, Callable[[LM, list[int]], list]], list[Any]]


@dataclass
class Choice:
    """One stream question's candidates, their selector scores, and the index of the one kept."""

    candidates: list[str]
    scores: list[Optional[float]]
    kept: int

    @property
    def answer(self) -> str:
        return self.candidates[self.kept]

    def record(self, select: str) -> dict:
        """What decisions.jsonl adds to the kept answer's decision."""
        return {
            "candidates": [{"answer": a, "score": s} for a, s in zip(self.candidates, self.scores)],
            "kept": self.kept,
            "select": select,
        }


def best(scores: Sequence[Optional[float]]) -> int:
    """The index of the highest score, the earliest among equals; unscored ones last (all unscored: 0)."""
    return max(range(len(scores)), key=lambda i: (scores[i] is not None, scores[i] or 0.0, -i))


class GraderSelector:
    name = "grader"

    def __init__(self, scorer: Scorer, rubric_of: Callable[[str], str]):
        self.scorer, self.rubric_of = scorer, rubric_of

    def scores(self, agents, questions, prompts, candidates, on_backbone: OnBackbone) -> list[list[Optional[float]]]:
        items = [(a, self.rubric_of(a), q, c) for a, q, cs in zip(agents, questions, candidates) for c in cs]
        decisions = iter(self.scorer.score(items))  # one batched grading of every candidate
        return [[next(decisions).score for _ in cs] for cs in candidates]


class LikelihoodSelector:
    name = "likelihood"

    def scores(self, agents, questions, prompts, candidates, on_backbone: OnBackbone) -> list[list[Optional[float]]]:
        def call(lm: LM, idx: list[int]) -> list[list[Optional[float]]]:
            scored = [(i, j) for i in idx for j, c in enumerate(candidates[i]) if c.strip()]  # "" has no tokens
            contexts = {i: lm.chat_context(prompts[i]) for i in idx}
            found = lm.loglikelihood([contexts[i] for i, _ in scored], [candidates[i][j] for i, j in scored])
            means = {key: total / max(n, 1) for key, (total, n) in zip(scored, found)}
            return [[means.get((i, j)) for j in range(len(candidates[i]))] for i in idx]

        return on_backbone("answer", call)


class BestOf:
    """n sampled answers per stream question at `temperature`, one kept by `selector`."""

    def __init__(self, n: int, temperature: float, seed: int, selector):
        self.n, self.temperature, self.seed, self.selector = n, temperature, seed, selector

    def choose(
        self, agents: Sequence[str], prompts: Sequence[list], questions: Sequence[str], on_backbone: OnBackbone
    ) -> list[Choice]:
        """For each stream question (its agent, the prompt it answers, the question its pair will store):
        its candidates, their scores and the one kept."""
        samples = on_backbone(
            "answer",
            lambda lm, idx: lm.sample([prompts[i] for i in idx], self.n, temperature=self.temperature, seed=self.seed),
        )
        scores = self.selector.scores(agents, questions, prompts, samples, on_backbone)
        return [Choice(list(c), list(s), best(s)) for c, s in zip(samples, scores)]


def build_best_of(stream_cfg, seed: int, scorer: Scorer, rubric_of: Callable[[str], str]) -> Optional[BestOf]:
    """The run's best-of-n writer; None for a stream of single greedy answers (stream.best_of = 1)."""
    if stream_cfg.best_of <= 1 or stream_cfg.answers != "model":
        return None
    selector = GraderSelector(scorer, rubric_of) if stream_cfg.select == "grader" else LikelihoodSelector()
    return BestOf(stream_cfg.best_of, stream_cfg.temperature, seed, selector)
