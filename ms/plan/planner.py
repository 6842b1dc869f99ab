"""Plan mode: what a run will ask of its LLMs, per role and backbone, worked out from its config and
data before anything is spent. No model loads, no pool opens, and the response cache is only read.

Exact: the answer and evaluate calls (they follow from the data sizes, k, the fills and the
micro-batches), and the gate's calls where ms.plan.gate says so. Estimated: the label and summarize
calls, which follow from what the gate admits (an assumed acceptance rate), text-read score calls
(re-asks not counted), and every token count.

Tokens are counted from the text the run will send (ms.plan.tokens). Text the run has not made yet
stands in at typical sizes: a retrieved memory as long as its scope's mean seed pair, a reply as long
as its agent's mean seed answer, capped at max_new_tokens. A request is looked up in the response cache
only where it does not depend on the pool the run grows (zero-shot prompts); elsewhere what the cache
holds is unknown. A scored request (ref_logprob) is looked up with its context rendered by the
backbone's chat template, which loads the backbone's tokenizer (not its weights). The counts go into a
`Row` per role and backbone (ms.plan.rows).
"""

from typing import Optional

from omegaconf import DictConfig

from ms.llm.base import ROLES
from ms.loop.cell import identity
from ms.loop.schedule import Schedule, stream_k
from ms.plan.best_of import best_of_note, planned_best_of
from ms.plan.calls import CacheProbe, CallCounter, PlanSettings
from ms.plan.measured import Measured, plan_from_warnings, planned_settings
from ms.plan.rows import Row, RunPlan
from ms.plan.tokens import PER_MESSAGE, tokens
from ms.retrieval.memory_prompts import SUMMARY_SYSTEM, SUMMARY_USER
from ms.retrieval.training import VERBALIZED_PROMPT

VERBALIZED_TOKENS = 8  # what Labeller._verbalized lets a reply run to


def plan_settings(cfg: DictConfig) -> PlanSettings:
    """What the counts of the run the root config `cfg` describes read of it (ms.plan.calls)."""
    sections = ("backbone", "agents", "data", "prompt", "scorer", "gate", "poison", "stream", "seed", "use_cache")
    return PlanSettings(
        **{name: cfg[name] for name in sections},  # the root config's, as they are
        metrics=cfg.eval.metrics,
        schedule=Schedule.of(
            cfg.stream, cfg.retriever, cfg.memory, cfg.eval, fills=cfg.fills, micro_batch=cfg.micro_batch, k=cfg.k
        ),
        stream_k=stream_k(cfg.k, cfg.stream_k),
        pool_mode=cfg.pool.mode,
    )


class _Planner(CallCounter):
    """Plan mode's walk of a run: its steps in the run's order (ms.loop.schedule), each call counted
    where the run would make it. Plan mode's composition root: it reads the root config `cfg`."""

    def __init__(self, cfg: DictConfig, accept: Optional[float | Measured], probe: CacheProbe):
        super().__init__(plan_settings(cfg), accept, probe)
        self.cfg = cfg

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
            prompt = self.system(a) + user + PER_MESSAGE
            if self.schedule.answers == "reference":  # the reference is the answer: nothing is generated
                reply = tokens(e.answer)
            else:
                reply = self.reply(a, self.backbone(self.agents[a].backbone).generation.max_new_tokens)
                if self.schedule.answers == "best_of":  # n samples and the selector's calls on each (ms.plan.best_of)
                    planned_best_of(self, a, e.question, kk, prompt, question, reply)
                else:
                    self.generated(self.row("answer", self.agents[a].backbone), a, e.question, kk, prompt, reply)
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
            template = tokens(self.template.with_examples.format(examples="", query=""))
            context = self.system(agent) + template + question + memory + PER_MESSAGE
            row.add(n, context + reply, 0.0, exact=False, cached_exact=not cfg.use_cache)
            if cfg.train.utility_from_labels and candidates > 0:  # the zero-shot baseline of (X, Y)
                row.add(self.accept, context - memory + reply, 0.0, exact=False, cached_exact=not cfg.use_cache)
        else:
            prompt = tokens((cfg.train.verbalized_prompt or VERBALIZED_PROMPT).format(example="", query="", answer=""))
            asked = prompt + memory + question + reply + PER_MESSAGE
            row.add(n, asked, VERBALIZED_TOKENS, exact=False, cached_exact=not cfg.use_cache)

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
    notes = [planner.accept_note, *best_of_note(cfg.stream, cfg.eval)]
    if isinstance(accept, Measured):  # plan_from: why its measured rates might not hold here, a line each
        planned = planned_settings(identity(cfg), list(planner.splits))
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
