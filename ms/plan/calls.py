"""What one call of a planned run costs and which row it goes into: the planner's state built from the
settings it reads (`PlanSettings`), the response-cache probe and the request keys it looks up, prompt
sizes, and the calls the gate and the metrics plan (ms.gates.base.GatePlan, ms.metrics.base.MetricPlan).
ms.plan.planner walks the run's steps with them; its docstring says where the cache is looked up."""

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Callable, Mapping, Optional, Sequence

from omegaconf import DictConfig

from ms.agents import PromptTemplate, agents_from, chat
from ms.config.parts import GATES, METRICS, POISONS
from ms.data import load_splits
from ms.data.poison_settings import PoisonerSettings
from ms.gates.scorer import rubric_for
from ms.llm import price_of, provider_class
from ms.llm.backbones import Backbones
from ms.llm.base import cache_key, generate_params
from ms.llm.cache import CACHE_FILENAME
from ms.loop.schedule import Schedule
from ms.metrics.evaluate import validate_metrics
from ms.plan.gate import acceptance, grading_tokens, reads_probabilities
from ms.plan.measured import Measured
from ms.plan.rows import Row
from ms.plan.tokens import PER_MESSAGE, tokens
from ms.pool import scope_for


class CacheProbe:
    """Which request keys the response cache will answer: held in the file (opened read-only), or
    asked earlier in the plan (a run, or a sweep's earlier cells, will have put them there)."""

    def __init__(self, cache_dir: str | Path):
        self.path = Path(cache_dir) / CACHE_FILENAME
        self.seen: set[str] = set()
        self._db: Optional[sqlite3.Connection] = None

    def held(self, key: str) -> bool:
        found = key in self.seen or self._in_file(key)
        self.seen.add(key)
        return found

    def _in_file(self, key: str) -> bool:
        if not self.path.is_file():
            return False
        if self._db is None:
            self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        return self._db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None


def key_model(bc: DictConfig, kind: str) -> str:
    """The model as a run's response-cache keys of `kind` calls name it (LM._key_model), as its
    provider's class says without building it."""
    return provider_class(bc).cache_model_of(bc, kind)


_RENDERERS: dict[tuple, Callable] = {}  # loaded once per process, so a sweep's cells share each tokenizer


def renderer(bc: DictConfig) -> Callable:
    """How the backbone renders a chat as the context of a scored request (LM.context_renderer)."""
    cls = provider_class(bc)
    # The model's own files, where its provider has them (ms.llm.settings: an API backbone has none)
    model = (cls, bc.model, *(bc.get(k) for k in ("gguf_file", "gguf_package", "prompt_format")))
    if model not in _RENDERERS:
        _RENDERERS[model] = cls.context_renderer(bc)
    return _RENDERERS[model]


@dataclass(frozen=True)
class PlanSettings:
    """What the counts of a planned run read of its settings: the sections of the parts they build or
    ask, and the few root settings among them. The planner (ms.plan.planner) takes it from the root config."""

    backbone: Any  # the default backbone's section
    agents: Mapping  # `agents`: name -> entry
    data: Any  # the data section
    prompt: Any  # the prompt section
    scorer: Any  # the scorer's section
    gate: Any  # the gate's section
    poison: Any  # the poisoning writer's section
    stream: Any  # the stream's section (best-of-n writing, ms.plan.best_of)
    metrics: Sequence[str]  # eval.metrics
    schedule: Schedule  # the run's steps, which the plan walks as the run does
    stream_k: int  # memories per stream question
    pool_mode: str
    seed: int  # the run's seed: the poisoning writer's draws, best-of-n's samples
    use_cache: bool


class CallCounter:
    """Plan mode's counts: built from the run's `PlanSettings`, it offers the gate's and the metrics'
    classes what they plan with (ms.gates.base.GatePlan, ms.metrics.base.MetricPlan)."""

    def __init__(self, settings: PlanSettings, accept: Optional[float | Measured], probe: CacheProbe):
        self.settings, self.probe = settings, probe
        self.backbones = Backbones(settings.backbone)
        self.scorer = settings.scorer
        self.stream_k = settings.stream_k
        self.schedule = settings.schedule
        self.gate = GATES.load(settings.gate.name)
        self.metrics = [METRICS.load(name) for name in METRICS if name in validate_metrics(settings.metrics)]
        self.agents = agents_from(settings.agents)
        self.splits = load_splits(settings.data, self.agents)
        self.template = PromptTemplate(**settings.prompt)
        self.accept, self.accept_note = acceptance(settings.gate, self, accept)
        named = PoisonerSettings.victim_of(settings.poison)  # poison=none names none
        victim = self.agents.get(named) if named in self.splits else None
        quoted = rubric_for(victim, settings.pool_mode).quoted() if victim else None
        poisoner = POISONS.load(settings.poison.name)
        self.poisoner = poisoner.build(settings.poison, self.agents, self.splits, settings.seed, quoted)
        self.poisoned = 0  # the poisoning writer's pairs the gate judges (ms.data.poison)
        self.rows: dict[tuple[str, str], Row] = {}
        self.scope = {a: scope_for(self.agents[a].domain, settings.pool_mode) for a in self.splits}
        pairs: dict[str, list[float]] = {}
        for a, s in self.splits.items():
            pairs.setdefault(self.scope[a], []).extend(
                tokens(self.template.example.format(question=e.question, answer=e.answer)) for e in s.seed
            )
        self.seeds = {scope: len(v) for scope, v in pairs.items()}
        self.memory_tokens = {scope: fmean(v) if v else 0.0 for scope, v in pairs.items()}
        self.answer_tokens = {
            a: fmean(tokens(e.answer) for e in (s.seed or s.stream + s.test) if e.answer)
            for a, s in self.splits.items()
        }

    # ---- where calls go ---------------------------------------------------------------------

    def row(self, role: str, name: Optional[str]) -> Row:
        name = self.backbones.resolve(name)
        if (role, name) not in self.rows:
            self.rows[role, name] = Row(role, name, price_of(self.backbones.config(name)))
        return self.rows[role, name]

    def backbone(self, name: Optional[str]) -> DictConfig:
        return self.backbones.config(name)

    def can(self, name: Optional[str], what: str) -> bool:
        return self.backbones.can(name, what)

    def runs_locally(self, name: Optional[str]) -> bool:
        """Whether the backbone runs in this process (its backend time is this machine's)."""
        return provider_class(self.backbone(name)).runs_locally is True

    def agent_can(self, agent: str, what: str) -> bool:
        return self.can(self.agents[agent].backbone, what)

    def scorer_reads_probabilities(self) -> bool:
        """As the Scorer decides: probabilities unless scorer.read=text or the backbone has none."""
        return reads_probabilities(self.scorer, self.backbones)

    # ---- what the gate asks for (ms.gates.base.GatePlan) -------------------------------------------

    def grade(self, agent: str, question: float, reply: float) -> None:
        """The grader's call on one pair of `agent`."""
        settings = self.settings
        probabilities = self.scorer_reads_probabilities()
        grading = grading_tokens(rubric_for(self.agents[agent], settings.pool_mode), agent) + question + reply
        reply_tokens = 0.0 if probabilities else self.scorer.max_new_tokens
        row = self.row("score", self.scorer.backbone)
        row.add(1, grading, reply_tokens, exact=probabilities, cached_exact=not settings.use_cache)

    def measure_utility(self, agent: str, in_scope: float, probes: int, share: float, exact: bool) -> None:
        """A utility measurement of `share` of the pairs of `agent`: two scored prompts per probe."""
        scope = self.scope[agent]
        probed = min(probes, in_scope)
        shots = min(max(1, self.stream_k), max(in_scope - 1, 0))
        memory = self.memory_tokens[scope]
        # A probe's prompt: the template with its shots and question, then its answer to score.
        prompt = (
            self.system(agent)
            + tokens(self.template.with_examples.format(examples="", query=""))
            + shots * memory
            + memory
            + PER_MESSAGE
        )
        # Exact only while every candidate has exactly m probes: the seeds alone hold them, and no
        # consolidation moves memories out of reach.
        exact = exact and self.seeds[scope] >= probes and not self.schedule.consolidates
        self.row("utility", self.agents[agent].backbone).add(
            share * 2 * probed, prompt, 0.0, exact=exact, cached_exact=not self.settings.use_cache
        )

    def test_question(
        self, agent: str, reply: float, others: int, share: float, drawn: bool = True, on: Optional[str] = None
    ) -> None:
        """A contrast test of `share` of the pairs of `agent` (ms.gates.question_dependence): the answer scored
        after its own question and after `others` contrasts (where `drawn`, other seed questions: no more
        than the agent has), each in the agent's zero-shot chat, on backbone `on` (None: the agent's own);
        every one at the mean length of the agent's seed questions."""
        seeds = self.splits[agent].seed
        asked = fmean(tokens(self.template.render(e.question)) for e in seeds) if seeds else 0.0
        passes = 1 + (min(others, len(seeds)) if drawn else others)
        prompt = self.system(agent) + asked + PER_MESSAGE + reply
        row = self.row("score", on or self.agents[agent].backbone)
        row.add(share * passes, prompt, 0.0, exact=False, cached_exact=not self.settings.use_cache)

    # ---- what a metric asks for (ms.metrics.base.MetricPlan) ---------------------------------------

    def score_reference(self, agent: str, example, prompt: float, k: float) -> None:
        """A scored request of the reference given the agent's prompt: looked up where zero-shot."""
        row = self.row("evaluate", self.agents[agent].backbone)
        key = self.zero_shot_scored_key(agent, example) if k <= 0 else None
        if key is not None:
            row.add(1, prompt + tokens(example.answer), 0.0, cached=float(self.probe.held(key)))
        else:
            row.add(1, prompt + tokens(example.answer), 0.0, cached_exact=not self.settings.use_cache)

    def reply(self, agent: str, cap: int) -> float:
        return min(float(cap), self.answer_tokens[agent])

    # ---- prompt sizes -----------------------------------------------------------------------

    def user_prompt(self, agent: str, question: str, k: float) -> float:
        """Tokens of the user prompt with k retrieved memories of typical size."""
        if k <= 0:
            return tokens(self.template.render(question))
        return (
            tokens(self.template.with_examples.format(examples="", query=question))
            + k * self.memory_tokens[self.scope[agent]]
            + (k - 1) * tokens(self.template.separator)
        )

    def system(self, agent: str) -> float:
        return tokens(self.agents[agent].instruction) + PER_MESSAGE if self.template.system else 0.0

    def zero_shot_key(self, agent: str, question: str) -> Optional[str]:
        """The cache key of the agent's zero-shot answer to `question`, where its answers are cached."""
        bc = self.backbone(self.agents[agent].backbone)
        if not self.settings.use_cache or bc.generation.temperature != 0:
            return None
        params = generate_params(bc.generation.max_new_tokens, bc.generation.temperature, bc.generation.stop)
        asked = self.zero_shot_chat(agent, question)
        return cache_key("generate", provider_class(bc).provider, key_model(bc, "generate"), params, asked)

    def zero_shot_scored_key(self, agent: str, example) -> Optional[str]:
        """The cache key of ref_logprob's request for the agent's zero-shot prompt and the reference
        answer, where scores are cached: the context rendered as the backbone renders it."""
        if not self.settings.use_cache:
            return None
        bc = self.backbone(self.agents[agent].backbone)
        context = renderer(bc)(self.zero_shot_chat(agent, example.question))
        return cache_key(
            "loglikelihood", provider_class(bc).provider, key_model(bc, "loglikelihood"), {}, [context, example.answer]
        )

    def zero_shot_chat(self, agent: str, question: str) -> list:
        return chat(self.agents[agent], self.template.render(question), self.template.system)

    def generated(self, row: Row, agent: str, question: str, k: float, prompt: float, completion: float) -> None:
        """One generate call: looked up in the cache where its prompt is zero-shot."""
        key = self.zero_shot_key(agent, question) if k <= 0 else None
        cacheable = self.settings.use_cache and self.backbone(self.agents[agent].backbone).generation.temperature == 0
        if key is not None:
            row.add(1, prompt, completion, cached=float(self.probe.held(key)))
        else:
            row.add(1, prompt, completion, cached_exact=not cacheable)
