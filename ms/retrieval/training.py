"""Memory train: every accepted pair (X, Y) keeps fine-tuning the dense retriever, by BCE on the score
it retrieves by, s * cos + b, over BM25-mined candidates labelled by likelihood (docs/concepts/retrieval.md
gives the steps and the loss). Under retriever.refresh=query_tower only a separate query encoder is
trained. Mining obeys the access rule of the agent that wrote the pair: it mines only memories that
agent may retrieve.
"""

import logging
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import torch
from torch import nn

from ms.agents import Agent, PromptTemplate, chat, default_agents
from ms.config.schema import LABEL_METHODS, TrainConfig
from ms.llm import LM
from ms.pool import Memory
from ms.pool.access import Reader
from ms.retrieval.base import memory_text
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelledPair:
    query: str  # X
    memory: str  # x_i + y_i, as the dense retriever encodes it
    label: float  # 1 positive, 0 negative
    p_not: float


VERBALIZED_PROMPT = (
    "Here is an example question with its answer:\n{example}\n\n"
    "A new question: {query}\nA proposed answer: {answer}\n\n"
    "Having seen the example, how probable is it that you would give exactly this proposed answer "
    "to the new question? Reply with one decimal number between 0 and 1 and nothing else."
)
_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(%?)")


def parse_probability(text: str) -> float | None:
    """A probability from free text: '0.7', 'p = .35', '70%'; None when there is none in [0, 1]."""
    for value, percent in _NUMBER.findall(text.replace(" .", " 0.").replace("=.", "=0.")):
        p = float(value) / (100 if percent else 1)
        if 0.0 <= p <= 1.0:
            return p
    return None


class Labeller:
    """p_i = P(not Y | one-shot prompt from (x_i, y_i), X), for every candidate in one batched call."""

    def __init__(
        self,
        lm: LM,
        template: PromptTemplate,
        method: str = "likelihood",
        prompt: str | None = None,
        agents: Mapping[str, Agent] | None = None,
    ):
        if method not in LABEL_METHODS:
            raise ValueError(f"train.label_method must be 'likelihood' or 'verbalized', not '{method}'")
        if method == "likelihood" and not lm.scores_text:
            log.warning(
                "backbone provider '%s' cannot score given text; memory train labels candidates "
                "with the verbalized probability instead",
                lm.provider,
            )
            method = "verbalized"
        self.lm = lm
        self.template = template
        self.method = method
        self.prompt = prompt or VERBALIZED_PROMPT
        self.agents = default_agents() if agents is None else agents  # whose instructions the prompts carry

    def p_not(self, jobs: Sequence[tuple[str, str, str, Memory]]) -> list[float]:
        """jobs: (agent, X, Y, candidate memory)."""
        if not jobs:
            return []
        with self.lm.acting_as("label"):
            return self._likelihood(jobs) if self.method == "likelihood" else self._verbalized(jobs)

    def _likelihood(self, jobs) -> list[float]:
        return [1.0 - math.exp(mean) for mean in self.mean_logprobs(jobs)]

    def mean_logprobs(self, jobs: Sequence[tuple[str, str, str, Memory | None]]) -> list[float]:
        """Mean log-prob per token of each Y given X, with the candidate memory as the one shot
        (None: zero-shot)."""
        shots = [[] if m is None else [{"question": m.question, "answer": m.answer}] for _, _, _, m in jobs]
        contexts = [
            self.lm.chat_context(chat(self.agents[agent], self.template.render(x, shot), self.template.system))
            for (agent, x, _, _), shot in zip(jobs, shots)
        ]
        scored = self.lm.loglikelihood(contexts, [y for _, _, y, _ in jobs])
        return [total / max(n, 1) for total, n in scored]

    def one_shot_effects(
        self, jobs: Sequence[tuple[str, str, str, Memory]], p_not: Sequence[float]
    ) -> dict[int, list[float]]:
        """What the labels show of each candidate's utility: the mean log-prob per token of Y with the
        candidate as the one shot, minus Y's at zero shots (one more pass per distinct (X, Y), under
        `label`). The first term is log(1 - p_not), so the labels' own passes are not repeated."""
        rows = list(dict.fromkeys((agent, x, y) for agent, x, y, _ in jobs))
        with self.lm.acting_as("label"):
            baseline = dict(zip(rows, self.mean_logprobs([(*row, None) for row in rows])))
        out: dict[int, list[float]] = {}
        for (agent, x, y, m), p in zip(jobs, p_not):
            if p < 1.0:
                out.setdefault(m.id, []).append(math.log1p(-p) - baseline[(agent, x, y)])
        return out

    def _verbalized(self, jobs) -> list[float]:
        prompts = [
            self.prompt.format(
                example=self.template.example.format(question=m.question, answer=m.answer), query=x, answer=y
            )
            for _, x, y, m in jobs
        ]
        replies = self.lm.generate(prompts, max_new_tokens=8)
        # An unreadable reply says nothing about the candidate: 0.5 sorts it to the middle.
        return [1.0 - p if (p := parse_probability(r)) is not None else 0.5 for r in replies]


def split_labels(p_not: Sequence[float], v: int) -> tuple[list[int], list[int]]:
    """Indices of the v/2 lowest p_not (positives) and the v/2 highest (negatives), never overlapping."""
    half = min(v // 2, len(p_not) // 2)
    order = sorted(range(len(p_not)), key=lambda i: (p_not[i], i))
    return order[:half], (order[-half:] if half else [])


class RetrieverTrainer:
    """Keeps the encoder, the (s, b) head, the optimizer and a replay buffer in memory for the
    life of the pool."""

    def __init__(
        self,
        cfg: TrainConfig,
        dense: DenseRetriever,
        miner: BM25Retriever,
        labeller: Labeller,
        reader: Optional[Callable[[str], Reader]] = None,
    ):
        self.cfg = cfg
        self.reader = reader or Reader  # agent -> the reader its access rule makes it (default: open)
        self.dense = dense
        # The backward pass recomputes each layer's activations instead of keeping them all: a step
        # over 48 pairs of 256-token texts kept 10 GB of attention maps (dropout's included) on the
        # CPU, 3.4 GB so. The recomputation replays the same dropout masks, so the step's numbers
        # are the same to the bit; it costs about one more forward pass.
        net = dense.query_encoder.net
        if net.supports_gradient_checkpointing:
            # transformers 5 renamed gradient_checkpointing_enable (kept, deprecated) to this
            enable = getattr(net, "activation_checkpointing_enable", None) or net.gradient_checkpointing_enable
            enable({"use_reentrant": False})
        self.miner = miner
        self.labeller = labeller
        self.scale = nn.Parameter(torch.tensor(cfg.init_scale, device=dense.encoder.device))
        self.bias = nn.Parameter(torch.tensor(cfg.init_bias, device=dense.encoder.device))
        self.optimizer = torch.optim.AdamW(
            [
                # The encoder that is trained: the shared one, or the query tower alone (retriever.refresh).
                {"params": dense.query_encoder.parameters(), "lr": cfg.lr},
                {"params": [self.scale, self.bias], "lr": cfg.head_lr, "weight_decay": 0.0},
            ]
        )
        self.replay: list[LabelledPair] = []
        self.rng = random.Random(cfg.seed)
        self.losses: list[float] = []

    def label(
        self, accepted: Sequence[tuple[str, str, str, str, int]]
    ) -> tuple[list[LabelledPair], dict[int, list[float]]]:
        """accepted: (agent, scope, X, Y, memory id of the new pair). The labelled pairs, and with
        train.utility_from_labels the utility each candidate showed (memory id -> values)."""
        jobs, owners = [], []
        for row, (agent, scope, x, y, memory_id) in enumerate(accepted):
            mined = self.miner.retrieve(x, scope, self.cfg.candidates, exclude=[memory_id], reader=self.reader(agent))
            for m in mined:
                jobs.append((agent, x, y, m))
                owners.append(row)
        p_not = self.labeller.p_not(jobs)
        shown = self.labeller.one_shot_effects(jobs, p_not) if self.cfg.utility_from_labels and jobs else {}
        pairs = []
        for row in range(len(accepted)):
            idx = [i for i, owner in enumerate(owners) if owner == row]
            positives, negatives = split_labels([p_not[i] for i in idx], self.cfg.labelled)
            for local, label in [(p, 1.0) for p in positives] + [(n, 0.0) for n in negatives]:
                _, x, _, m = jobs[idx[local]]
                pairs.append(LabelledPair(x, memory_text(m), label, p_not[idx[local]]))
        return pairs, shown

    def logits(self, queries: Sequence[str], memories: Sequence[str]) -> torch.Tensor:
        cos = (self.dense.query_encoder(queries) * self.dense.memory_side(memories)).sum(-1)
        return self.scale * cos + self.bias

    def step(self, pairs: Sequence[LabelledPair]) -> float | None:
        """BCE steps on the new pairs plus a replay sample; returns the last loss."""
        if not pairs:
            return None
        replayed = self.rng.sample(self.replay, min(self.cfg.replay_per_step, len(self.replay)))
        batch = list(pairs) + replayed
        targets = torch.tensor([p.label for p in batch], device=self.dense.encoder.device)
        encoder = self.dense.query_encoder
        encoder.train()
        for _ in range(self.cfg.steps):
            loss = nn.functional.binary_cross_entropy_with_logits(
                self.logits([p.query for p in batch], [p.memory for p in batch]), targets
            )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        encoder.eval()
        self.replay.extend(pairs)
        del self.replay[: -self.cfg.replay_size]
        self.dense.encoder_changed()
        self.losses.append(loss.item())
        return loss.item()

    def update(self, accepted: Sequence[tuple[str, str, str, str, int]]) -> dict[int, list[float]]:
        """Label and step; returns the utility the labels showed (empty unless train.utility_from_labels)."""
        if not accepted:
            return {}
        pairs, shown = self.label(accepted)
        self.step(pairs)
        return shown

    def save(self, folder: Path) -> None:
        """The retriever checkpoint: the encoder in transformers format plus the (s, b) head."""
        folder.mkdir(parents=True, exist_ok=True)
        self.dense.query_encoder.net.save_pretrained(folder)  # under query_tower, memories use the untrained encoder
        self.dense.query_encoder.tokenizer.save_pretrained(folder)
        torch.save(
            {
                "scale": self.scale.detach().cpu(),
                "bias": self.bias.detach().cpu(),
                "losses": self.losses,
                "refresh": self.dense.refresh,
            },
            folder / "head.pt",
        )
