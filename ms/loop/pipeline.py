"""One Hydra job: seed the pool, stream questions through the agents, and evaluate on the test split at
every fill checkpoint, in the order of the run's schedule (ms.loop.schedule), which its plan walks too.
This module holds what changes the pool, the stream step (gate, admit, train, consolidate, retire, and
decisions.jsonl), and the run over the schedule with its record (metrics.json); how a question is put
to its agent, and the evaluation, are in ms.loop.answering.

`run(cfg, out_dir)` is a plain function: tests and sweeps call it without the CLI. It hands the config
to the composition root (ms.loop.compose_run) and runs what that builds; nothing here reads the config.
"""

import json
import logging
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig
from tqdm.auto import tqdm

from ms.agents import seed_memories
from ms.config.files import DECISIONS_FILE, METRICS_FILE, RETIREMENTS_FILE, USAGE_FILE
from ms.gates.replay import Candidate, effects
from ms.gates.scorer import append_decisions
from ms.llm.usage import save_usage
from ms.llm.usage_record import UsageRecord
from ms.loop.answering import Answering, Query, release_freed_memory
from ms.loop.compose_run import Parts, open_run
from ms.loop.printout import format_table
from ms.loop.run_folder import write_atomic
from ms.loop.run_metrics import RunMetrics
from ms.loop.stream_record import MemoryRecord, PoisonCounts, StreamRecord
from ms.metrics.summary_record import FillSummary

log = logging.getLogger(__name__)


class Experiment(Answering):
    """The loop over a run's parts, as ms.loop.compose_run built them; it reads no config. What it asks
    the agents, and the evaluation at each fill, are Answering's (ms.loop.answering)."""

    def __init__(self, parts: Parts, out_dir: Path):
        super().__init__(parts, out_dir)
        self.gate, self.memory, self.trainer = parts.gate, parts.memory, parts.trainer
        self.poisoned: Counter = Counter()  # the poisoning writer's pairs (parts.poisoner): asked, accepted, rejected
        self.stream_k = self.settings.stream_k
        self.consolidated: Counter = Counter()  # memory ids summarized, moved, deferred
        self.retired: Counter = Counter()  # memories retired (memory.retire_below), by writer

    # ---- the loop ---------------------------------------------------------------------------

    def seed_pool(self) -> int:
        items = [
            row
            for a, s in self.splits.items()
            for row in seed_memories(self.agents[a], s.seed, self.settings.pool_mode)
        ]
        return sum(i is not None for i in self.pool.add(items, step=0))

    def stream_batch(self, queries: Sequence[Query]) -> list:
        self.parts.clock.step += 1
        prompts = self.prompts(queries, self.stream_k, mark=True)[0]
        # memory.question=prompt, as the authors' code: the question a new memory stores (and the
        # scorer grades, and memory train mines with) is the whole prompt the agent saw.
        asked = [
            p[-1]["content"] if self.settings.memory_question == "prompt" else q.example.question
            for q, p in zip(queries, prompts)
        ]
        # stream.answers=reference: the dataset's reference goes to the gate, and nothing is generated;
        # stream.best_of > 1: n sampled answers, of which the selector's best goes (ms.loop.best_of).
        best_of, chosen = self.parts.best_of, [{}] * len(queries)
        if self.settings.stream_answers == "reference":
            answers = [q.example.answer for q in queries]
        elif best_of is not None:
            choices = best_of.choose(
                [q.agent for q in queries], prompts, asked, lambda role, call: self.by_backbone(queries, role, call)
            )
            answers, chosen = [c.answer for c in choices], [c.record(best_of.selector.name) for c in choices]
        else:
            answers = self.answer(queries, prompts, "answer")
        used = {q.scope: self.retriever.state(q.scope) for q in queries}  # before this step trains it
        # A poisoning writer's pairs (ms.data.poison): the victim's questions of this batch, judged by the
        # same gate as the victim's own (its rubric, its prompts), stored under the poisoner's name. Its
        # question is the plain question, under memory.question=prompt too (it retrieves nothing).
        poison = self.parts.poisoner.pairs([q.example for q in queries])
        # poison=none declares no writer (ms.data.poison_settings): its name is read only where it wrote
        writers = [None] * len(queries) + [self.parts.poisoner.cfg.writer for _ in poison]
        queries = [*queries, *(Query(p.victim, self.scope(p.victim), p.example) for p in poison)]
        asked, answers = [*asked, *(p.question for p in poison)], [*answers, *(p.answer for p in poison)]
        decisions = self.gate.judge([Candidate(q.agent, q.scope, x, a) for q, x, a in zip(queries, asked, answers)])
        admitted = [(q, d, w) for q, d, w in zip(queries, decisions, writers) if d.accepted]
        ids = self.memory.admit(
            [
                {
                    "scope": q.scope,
                    "agent": w or q.agent,
                    "domain": self.agents[q.agent].domain,
                    "question": d.question,
                    "answer": d.answer,
                    "origin": "stream",
                    "score": d.score,
                    "backbone": None if w else self.agent_backbone[q.agent],
                }
                for q, d, w in admitted
            ],
            step=self.step,
        )
        new_ids = iter(ids)
        memory_ids = [next(new_ids) if d.accepted else None for d in decisions]
        admitted = [(q, d) for q, d, _ in admitted]
        # What the gate's utility measurements showed about the candidates and the shots they displaced.
        self.pool.record_utility(effects((d.utility, i) for d, i in zip(decisions, memory_ids)))
        if self.trainer is not None:
            added = [(q.agent, q.scope, d.question, d.answer, i) for (q, d), i in zip(admitted, ids) if i is not None]
            self.pool.record_utility(self.trainer.update(added))
        for what, ids_ in asdict(self.memory.maybe_consolidate(self.step)).items():
            self.consolidated[what] += len(ids_)
        self.retire()
        pool_sizes = {scope: self.pool.count(scope) for scope in {q.scope for q in queries}}
        append_decisions(
            self.out / DECISIONS_FILE,
            decisions,
            [
                {
                    "step": self.step,
                    "memory_id": memory_id,
                    "pool_size": pool_sizes[q.scope],
                    "scope": q.scope,
                    **used[q.scope],
                    **({"writer": w} if w else {}),
                    **more,  # best-of-n: every candidate, its score and the one kept
                }
                for q, memory_id, w, more in zip(queries, memory_ids, writers, [*chosen, *[{}] * len(poison)])
            ],
        )
        release_freed_memory()  # what answering, grading, labelling and the train step freed
        own = len(decisions) - len(poison)  # the agents' own decisions; the poisoner's follow them
        self.poisoned.update(
            asked=len(poison),
            accepted=sum(d.accepted for d in decisions[own:]),
            rejected=sum(not d.accepted for d in decisions[own:]),
        )
        return decisions[:own]

    def retire(self) -> None:
        """memory.retire_below: retire the memories of the run's scopes that the measurements so far
        (this step's included) show to hurt, each recorded in retirements.jsonl. It reads numbers the
        pool already holds: no model call. Off (None), it does nothing at all."""
        below = self.settings.retire_below
        if below is None:
            return
        scopes = {self.scope(a) for a in self.splits}
        retired = self.pool.retire(below=below, after=self.settings.retire_after, step=self.step, scopes=scopes)
        if retired:
            with (self.out / RETIREMENTS_FILE).open("a", encoding="utf-8") as f:
                f.writelines(
                    json.dumps({**asdict(r), "below": below, "after": self.settings.retire_after}) + "\n"
                    for r in retired
                )
        self.retired.update(r.agent for r in retired)

    def run(self) -> dict:
        started = time.perf_counter()
        schedule = self.parts.schedule
        seeded = self.seed_pool()
        # A reference-written stream skips the questions that have no reference, and counts them.
        examples, no_reference = schedule.stream({a: s.stream for a, s in self.splits.items()})
        stream = [Query(e.agent, self.scope(e.agent), e) for e in examples]
        if no_reference:
            log.info(
                "stream.answers=reference: skipped %d stream questions without a reference (%s)",
                sum(no_reference.values()),
                ", ".join(f"{a} {n}" for a, n in sorted(no_reference.items())),
            )
        if not schedule.streams:
            log.info("k=0: the stream is skipped (zero-shot answers do not read the pool)")
        accepted, rejected, unscored = Counter(), Counter(), Counter()
        by_fill, pool_sizes = {}, {}
        with tqdm(total=len(stream), desc="stream", unit="question", disable=not schedule.streams) as bar:
            for step in schedule.steps(len(stream)):
                if step.questions is not None:
                    batch = stream[step.questions]
                    for d in self.stream_batch(batch):
                        (accepted if d.accepted else rejected)[d.agent] += 1
                        unscored[d.agent] += d.unscored
                    bar.update(len(batch))
                    bar.set_postfix(pool=self.pool.count(), accepted=sum(accepted.values()))
                for fill in step.fills:
                    if schedule.evaluates:  # a stream-only run answers no test question
                        rows = self.evaluate(fill)
                        bar.unpause()  # the stream's elapsed time and rate leave out the evaluation
                        by_fill[fill] = FillSummary.from_json(self.record_evaluation(rows))
                    pool_sizes[str(fill)] = self.pool.count_by("agent")
        if self.trainer is not None and self.settings.save_retriever:
            self.trainer.save(self.out / "retriever")
        usage = save_usage(self.backbones.values(), self.out / USAGE_FILE)
        answers = self.settings.stream_answers
        metrics = RunMetrics(
            run=self.parts.record,
            complete=True,
            described=self.parts.described,
            fills=by_fill,
            stream=StreamRecord.of(
                questions=len(stream) if schedule.streams else 0,
                k=self.stream_k,
                seeded=seeded,
                answers=answers,
                skipped_without_reference=dict(no_reference) if answers == "reference" else None,
                accepted=dict(accepted),
                rejected=dict(rejected),
                # rejected because no score could be read; 0 wherever the scorer reads probabilities
                unscored=sum(unscored.values()),
                unscored_by_agent=dict(+unscored),
                pool_by_agent=pool_sizes,
                train_losses=tuple(self.trainer.losses) if self.trainer else (),
                # only where a poisoning writer wrote: its pairs the gate judged, admitted and refused
                poison=PoisonCounts(**{n: self.poisoned[n] for n in ("asked", "accepted", "rejected")})
                if self.parts.poisoner.active
                else None,
            ),
            # only where memory.retire_below is set: the memories retired, by writer
            memory=MemoryRecord.of(
                self.settings.memory_policy,
                dict(self.consolidated),
                dict(self.retired) if self.settings.retire_below is not None else None,
            ),
            usage=UsageRecord.from_json(usage),
            provenance=self.parts.provenance,
            wall_seconds=round(time.perf_counter() - started, 1),
            cell=self.parts.cell,  # what a resumed sweep must match
        ).to_json()
        write_atomic(self.out / METRICS_FILE, json.dumps(metrics, indent=2, ensure_ascii=False))
        return metrics


def run(cfg: DictConfig, out_dir: Path) -> dict:
    """Run one configuration into out_dir, as the composition root opens it (ms.loop.compose_run.open_run):
    a folder that already holds a complete run of it is left as it is, so re-running an interrupted
    sweep redoes only its unfinished cells."""
    opened = open_run(cfg, out_dir)
    if isinstance(opened, Parts):
        # Closed as the run ends, so SQLite folds its write-ahead log into pool.sqlite before anything (the MLflow
        # callback, a copy of the folder) reads the folder: the pool is then one complete file.
        with opened.pool:
            metrics = Experiment(opened, out_dir).run()
    else:
        log.info("%s already holds a complete run of these settings and data; skipping it", out_dir)
        metrics = opened
    print(format_table(metrics))
    return metrics
