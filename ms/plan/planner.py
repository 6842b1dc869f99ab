"""Plan mode: what a run will ask of its LLMs, per role and backbone, worked out from its config and
data before anything is spent. No model loads, no pool opens, and the response cache is only read.

Exact: the answer and evaluate calls (they follow from the data sizes, k, the fills and the
micro-batches), and the gate's calls where ms.plan.gate says so. Estimated: the label and summarize
calls, which follow from what the gate admits (an assumed acceptance rate), text-read score calls
(re-asks not counted), and every token count.

Tokens are counted from the text the run will send: 4 characters a token, 1 a CJK character, a few
per chat message. Text the run has not made yet stands in at typical sizes: a retrieved memory as
long as its scope's mean seed pair, a reply as long as its agent's mean seed answer, capped at
max_new_tokens. A request is looked up in the response cache only where it does not depend on the
pool the run grows (zero-shot prompts); elsewhere what the cache holds is unknown. A scored request
(ref_logprob) is looked up with its context rendered by the backbone's chat template, which loads
the backbone's tokenizer (not its weights). The counts go into a `Row` per role and backbone
(ms.plan.rows).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from statistics import fmean
from typing import Callable, Optional

from omegaconf import DictConfig

from ms.agents import PromptTemplate, agents_from, chat
from ms.config.parts import GATES, METRICS, POISONS
from ms.data import load_splits
from ms.data.poison_settings import PoisonerSettings
from ms.gates.scorer import rubric_for
from ms.llm import price_of, provider_class
from ms.llm.backbones import Backbones
from ms.llm.base import ROLES, cache_key, generate_params
from ms.llm.cache import CACHE_FILENAME
from ms.loop.schedule import Schedule, stream_k
from ms.metrics.evaluate import validate_metrics
from ms.plan.best_of import best_of_note, planned_best_of
from ms.plan.gate import acceptance, grading_tokens, reads_probabilities
from ms.plan.measured import Measured, plan_from_warnings, planned_settings
from ms.plan.rows import Row, RunPlan
from ms.plan.tokens import PER_MESSAGE, tokens
from ms.pool import scope_for
from ms.retrieval.memory import SUMMARY_SYSTEM, SUMMARY_USER
from ms.retrieval.training import VERBALIZED_PROMPT

VERBALIZED_TOKENS = 8  # what Labeller._verbalized lets a reply run to


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
    model = (cls, bc.model, bc.gguf_file, bc.gguf_package, bc.get("prompt_format"))
    if model not in _RENDERERS:
        _RENDERERS[model] = cls.context_renderer(bc)
    return _RENDERERS[model]


class _Planner:
    """Plan mode's composition root: it reads the root config, and offers the gate's and the metrics'
    classes what they plan with (ms.gates.base.GatePlan, ms.metrics.base.MetricPlan)."""

    def __init__(self, cfg: DictConfig, accept: Optional[float | Measured], probe: CacheProbe):
        self.cfg, self.probe = cfg, probe
        self.backbones = Backbones(cfg.backbone)
        self.scorer = cfg.scorer
        self.stream_k = stream_k(cfg.k, cfg.stream_k)
        self.schedule = Schedule.of(cfg)  # the run's steps, which the plan walks as the run does
        self.gate = GATES.load(cfg.gate.name)
        self.metrics = [METRICS.load(name) for name in METRICS if name in validate_metrics(cfg.eval.metrics)]
        self.agents = agents_from(cfg.agents)
        self.splits = load_splits(cfg.data, self.agents)
        self.template = PromptTemplate(**cfg.prompt)
        self.accept, self.accept_note = acceptance(cfg.gate, self, accept)
        named = PoisonerSettings.victim_of(cfg.poison)  # poison=none names none
        victim = self.agents.get(named) if named in self.splits else None
        self.poisoner = POISONS.load(cfg.poison.name).build(
            cfg.poison,
            self.agents,
            self.splits,
            cfg.seed,
            rubric_for(victim, cfg.pool.mode).quoted() if victim else None,
        )
        self.poisoned = 0  # the poisoning writer's pairs the gate judges (ms.data.poison)
        self.rows: dict[tuple[str, str], Row] = {}
        self.scope = {a: scope_for(self.agents[a].domain, cfg.pool.mode) for a in self.splits}
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
        return reads_probabilities(self.cfg.scorer, self.backbones)

    # ---- what the gate asks for (ms.gates.base.GatePlan) -------------------------------------------

    def grade(self, agent: str, question: float, reply: float) -> None:
        """The grader's call on one pair of `agent`."""
        cfg = self.cfg
        probabilities = self.scorer_reads_probabilities()
        grading = grading_tokens(rubric_for(self.agents[agent], cfg.pool.mode), agent) + question + reply
        self.row("score", cfg.scorer.backbone).add(
            1,
            grading,
            0.0 if probabilities else cfg.scorer.max_new_tokens,
            exact=probabilities,
            cached_exact=not cfg.use_cache,
        )

    def measure_utility(self, agent: str, in_scope: float, probes: int, share: float, exact: bool) -> None:
        """A utility measurement of `share` of the pairs of `agent`: two scored prompts per probe."""
        cfg = self.cfg
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
            share * 2 * probed, prompt, 0.0, exact=exact, cached_exact=not cfg.use_cache
        )

    # ---- what a metric asks for (ms.metrics.base.MetricPlan) ---------------------------------------

    def score_reference(self, agent: str, example, prompt: float, k: float) -> None:
        """A scored request of the reference given the agent's prompt: looked up where zero-shot."""
        row = self.row("evaluate", self.agents[agent].backbone)
        key = self.zero_shot_scored_key(agent, example) if k <= 0 else None
        if key is not None:
            row.add(1, prompt + tokens(example.answer), 0.0, cached=float(self.probe.held(key)))
        else:
            row.add(1, prompt + tokens(example.answer), 0.0, cached_exact=not self.cfg.use_cache)

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
        if not self.cfg.use_cache or bc.generation.temperature != 0:
            return None
        params = generate_params(bc.generation.max_new_tokens, bc.generation.temperature, bc.generation.stop)
        return cache_key(
            "generate",
            provider_class(bc).provider,
            key_model(bc, "generate"),
            params,
            self.zero_shot_chat(agent, question),
        )

    def zero_shot_scored_key(self, agent: str, example) -> Optional[str]:
        """The cache key of ref_logprob's request for the agent's zero-shot prompt and the reference
        answer, where scores are cached: the context rendered as the backbone renders it."""
        if not self.cfg.use_cache:
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
        cacheable = self.cfg.use_cache and self.backbone(self.agents[agent].backbone).generation.temperature == 0
        if key is not None:
            row.add(1, prompt, completion, cached=float(self.probe.held(key)))
        else:
            row.add(1, prompt, completion, cached_exact=not cacheable)

    # ---- the run ------------------------------------------------------------------------------

    def plan(self) -> list[Row]:
        cfg = self.cfg
        for role in ROLES:  # every role shows, on the backbone it runs on
            self.row(role, {"score": cfg.scorer.backbone, "label": cfg.train.backbone}.get(role))
        stream, _ = self.schedule.stream({a: s.stream for a, s in self.splits.items()})
        pool = {scope: float(n) for scope, n in self.seeds.items()}
        stores: dict[str, list[tuple[int, float]]] = {}
        for step in self.schedule.steps(len(stream)):
            if step.questions is not None:
                self.stream_step(stream[step.questions], pool, stores, step.number)
            if self.schedule.evaluates:  # a stream-only run answers no test question
                for _ in step.fills:
                    self.evaluate(pool)
        return [r for r in self.rows.values()]

    def stream_step(self, batch: list, pool: dict[str, float], stores: dict, step: int) -> None:
        cfg, k = self.cfg, self.stream_k
        asked = []
        for e in batch:
            a, kk = e.agent, min(k, pool[self.scope[e.agent]])
            user = self.user_prompt(a, e.question, kk)
            # memory.question=prompt: the pair's question is the whole prompt the agent saw
            question = user if cfg.memory.question == "prompt" else tokens(e.question)
            if self.schedule.answers == "reference":  # the reference is the answer: nothing is generated
                reply = tokens(e.answer)
            elif self.schedule.answers == "best_of":  # n samples and the selector's calls on each (ms.plan.best_of)
                reply = self.reply(a, self.backbone(self.agents[a].backbone).generation.max_new_tokens)
                planned_best_of(self, a, e.question, kk, self.system(a) + user + PER_MESSAGE, question, reply)
            else:
                reply = self.reply(a, self.backbone(self.agents[a].backbone).generation.max_new_tokens)
                self.generated(
                    self.row("answer", self.agents[a].backbone),
                    a,
                    e.question,
                    kk,
                    self.system(a) + user + PER_MESSAGE,
                    reply,
                )
            asked.append((e, question, reply))
            self.gate.planned_calls(cfg.gate, self, a, question, reply, pool[self.scope[a]])
        for p in self.poisoner.pairs(batch):  # a poisoning writer's pairs: the same gate judges them as the victim's
            question, reply = tokens(p.question), tokens(p.answer)
            asked.append((p.example, question, reply))
            self.gate.planned_calls(cfg.gate, self, p.victim, question, reply, pool[self.scope[p.victim]])
            self.poisoned += 1
        for e, _, _ in asked:  # the batch is admitted at once, then memory train mines the pool
            pool[self.scope[e.agent]] += self.accept
        for e, question, reply in asked:
            if self.schedule.trains:
                self.label(e.agent, question, reply, min(cfg.train.candidates, pool[self.scope[e.agent]] - 1))
            stores.setdefault(e.agent, []).append((step, self.accept))
        if self.schedule.consolidates:
            self.consolidate(stores, step)

    def label(self, agent: str, question: float, reply: float, candidates: float) -> None:
        cfg, name = self.cfg, self.cfg.train.backbone
        memory = self.memory_tokens[self.scope[agent]]
        row = self.row("label", name)
        n = self.accept * max(candidates, 0.0)
        if cfg.train.label_method == "likelihood" and self.can(name, "scores_text"):
            context = (
                self.system(agent)
                + tokens(self.template.with_examples.format(examples="", query=""))
                + question
                + memory
                + PER_MESSAGE
            )
            row.add(n, context + reply, 0.0, exact=False, cached_exact=not cfg.use_cache)
            if cfg.train.utility_from_labels and candidates > 0:  # the zero-shot baseline of (X, Y)
                row.add(self.accept, context - memory + reply, 0.0, exact=False, cached_exact=not cfg.use_cache)
        else:
            prompt = tokens((cfg.train.verbalized_prompt or VERBALIZED_PROMPT).format(example="", query="", answer=""))
            row.add(
                n,
                prompt + memory + question + reply + PER_MESSAGE,
                VERBALIZED_TOKENS,
                exact=False,
                cached_exact=not cfg.use_cache,
            )

    def consolidate(self, stores: dict[str, list[tuple[int, float]]], step: int) -> None:
        """stm_ltm: a store that is full or has waited `interval` steps is consolidated; assumed to
        be one group of similar items, so one summary call for every store of two or more."""
        stm = self.cfg.memory.stm_ltm
        for agent, items in stores.items():
            held = sum(n for _, n in items)
            if not items or not (held >= stm.capacity or step - items[0][0] >= stm.interval):
                continue
            if held >= 2:
                prompt = (
                    tokens(SUMMARY_SYSTEM)
                    + tokens(SUMMARY_USER.format(agent=agent, pairs=""))
                    + held * (self.memory_tokens[self.scope[agent]] + 6)
                    + 2 * PER_MESSAGE
                )
                self.row("summarize", None).add(
                    1, prompt, self.reply(agent, stm.summary_tokens), exact=False, cached_exact=not self.cfg.use_cache
                )
            items.clear()

    def evaluate(self, pool: dict[str, float]) -> None:
        answers = any(m.needs_answers for m in self.metrics)
        for a, s in self.splits.items():
            name = self.agents[a].backbone
            row = self.row("evaluate", name)
            kk = min(self.cfg.k, pool[self.scope[a]])
            for e in s.test:
                prompt = self.system(a) + self.user_prompt(a, e.question, kk) + PER_MESSAGE
                if answers:
                    reply = self.reply(a, self.backbone(name).generation.max_new_tokens)
                    self.generated(row, a, e.question, kk, prompt, reply)
                for metric in self.metrics:
                    metric.planned_calls(self, a, e, prompt, kk)


def plan_run(cfg: DictConfig, accept: Optional[float | Measured] = None, probe: Optional[CacheProbe] = None) -> RunPlan:
    """Every role's calls, tokens, cache answers and cost for the run `cfg` describes."""
    planner = _Planner(cfg, accept, probe or CacheProbe(cfg.cache_dir))
    rows = planner.plan()
    title = (
        f"k={cfg.k}, pool={cfg.pool.mode}, retriever={cfg.retriever.name}, memory={cfg.memory.policy}, "
        f"backbone={cfg.backbone.name}; {len(planner.splits)} agents, fills {list(cfg.fills)}, "
        f"micro_batch {cfg.micro_batch}"
    )
    notes = [planner.accept_note, *best_of_note(cfg)]
    if isinstance(accept, Measured):  # plan_from: why its measured rates might not hold here, a line each
        planned = planned_settings(cfg, list(planner.splits))
        notes += plan_from_warnings(accept, planned, rows, planner.runs_locally)
    if planner.poisoner.active:
        notes.append(
            f"poison={cfg.poison.name}: {planner.poisoned} pairs of the poisoning writer (victim "
            f"{cfg.poison.victim}) judged by the gate, counted in its rows; its answers are drawn from the "
            f"data, so it generates nothing"
        )
    if not planner.scorer_reads_probabilities():
        notes.append(
            f"score: the grader's reply is read as text; re-asks of unreadable replies (up to "
            f"scorer.retries={cfg.scorer.retries} each) are not counted"
        )
    return RunPlan(title, rows, notes)
