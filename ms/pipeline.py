"""One Hydra job: seed the pool, stream questions through the agents (retrieve k, answer, score,
admit, train), and evaluate on the test split at every fill checkpoint.

`run(cfg, out_dir)` is a plain function: tests and sweeps call it without the CLI.
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm

from ms.agents import PromptTemplate, agents_from, chat, seed_memories
from ms.cell import check_same_cell, data_fingerprint, record as cell_record
from ms.backbones import backbone_config, build_backbones, resolve
from ms.config.files import DECISIONS_FILE, METRICS_FILE, PREDICTIONS_FILE, USAGE_FILE
from ms.data import Example, load_splits
from ms.evaluate import REF_LOGPROB, BERTScore, summarize, validate_metrics
from ms.gate import build_gate, gate_record
from ms.llm import LM
from ms.pool import Memory, scope_for
from ms.provenance import provenance
from ms.memory import build_policy
from ms.retrieval import build_retriever, build_test_retriever
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.encoder import Encoder
from ms.scorer import Scorer, append_decisions, load_rubrics, rubric_for, rubric_ref
from ms.training import Labeller, RetrieverTrainer
from ms.utility import Candidate, UtilityMeter, effects
from ms.printout import format_table
from ms.usage import save_usage
from ms.schedule import batches, interleave, skips_stream, stream_k
from ms.run_folder import clear_partial, completed, open_run_pool, write_atomic
from ms.validation import validate

log = logging.getLogger(__name__)



def release_freed_memory() -> None:
    """Give back to the system the memory that freed tensors leave inside glibc's heap. glibc keeps
    it: tensors of up to 32 MB come from the heap once larger ones have been freed, and torch's
    threads allocate from arenas of their own, so later phases reuse it only in part. Called between
    the loop's phases: without it, the resident floor of a 2-step stream grew from 0.8 to 4.9 GB.
    A no-op where the C library is not glibc."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)


@dataclass
class Query:
    agent: str
    scope: str
    example: Example


class Experiment:
    def __init__(self, cfg: DictConfig, out_dir: Path):
        scope_for("literary", cfg.pool.mode)  # a bad pool mode fails here, before any model loads
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.out = out_dir
        self.stream_k = stream_k(cfg)
        self.template = PromptTemplate(**cfg.prompt)
        self.metrics = validate_metrics(cfg.eval.metrics)
        self.agents = agents_from(cfg.agents)
        self.splits = load_splits(cfg.data, self.agents)
        self.pool = open_run_pool(cfg, out_dir)  # before any model loads: a bad pool file fails fast
        # The backbone each agent that runs answers on; each distinct backbone is built once, and
        # self.backbones (name -> LM) holds every one the run uses, the default first.
        self.agent_backbone = {a: resolve(cfg, self.agents[a].backbone) for a in self.splits}
        self.backbones = build_backbones(cfg, [*self.agent_backbone.values(), cfg.scorer.backbone,
                                               cfg.train.backbone])
        self.lm = self.backbones[cfg.backbone.name]
        self._drop_ref_logprob_where_unscorable()
        self.scorer = Scorer(self.backbones[resolve(cfg, cfg.scorer.backbone)],
                             load_rubrics({rubric_ref(self.agents[a], cfg.pool.mode) for a in self.splits}),
                             cfg.scorer)
        self.step = 0
        self.consolidated: Counter = Counter()  # memory ids summarized, moved, deferred
        # The composite ranks by age in stream steps: its clock is this loop's step.
        retriever, trainable = build_retriever(cfg.retriever, self.pool, clock=lambda: self.step)
        self.trainer = None
        if trainable is not None:
            labeller = Labeller(self.backbones[resolve(cfg, cfg.train.backbone)], self.template,
                                cfg.train.label_method, cfg.train.verbalized_prompt, agents=self.agents)
            self.trainer = RetrieverTrainer(cfg.train, trainable, BM25Retriever(self.pool), labeller)
        # The policy's thresholds are cosines of the untrained encoder, so it keeps its own copy.
        self.memory = build_policy(cfg.memory, self.pool, self.lm, encoder=lambda: Encoder(cfg.retriever.encoder))
        self.retriever = self.memory.wrap(retriever)
        self.test_retriever = (self.memory.wrap(build_test_retriever(cfg.retriever, self.pool))
                               if cfg.retriever.at_test else self.retriever)
        self.bertscore = BERTScore(cfg.eval) if "bertscore" in self.metrics else None
        self.gate = build_gate(cfg.gate, self.scorer, lambda a: rubric_for(self.agents[a], cfg.pool.mode).name,
                               meter=lambda: UtilityMeter(
                                   self.retriever.retrieve_batch, lambda a: self.backbones[self.agent_backbone[a]],
                                   self.agents, self.template, cfg.gate.probes, self.stream_k,
                                   [e.question for s in self.splits.values() for e in s.test]),
                               seed=cfg.seed)
        # Taken before the stream runs: the code and files the run started with.
        uses_encoder = (cfg.retriever.name in ("dense", "composite") or cfg.retriever.at_test == "dense_frozen"
                        or cfg.memory.policy != "plain")
        encoders = {"retriever": cfg.retriever.encoder} if uses_encoder else {}
        if self.bertscore is not None:
            encoders["bertscore"] = cfg.eval.model
        self.provenance = provenance({name: backbone_config(cfg, name) for name in self.backbones}, encoders,
                                     cfg.micro_batch)

    def _drop_ref_logprob_where_unscorable(self) -> None:
        """ref_logprob is left out of the predictions of agents whose backbone cannot score given
        text (never 0); with no such backbone left to score, it leaves eval.metrics."""
        if REF_LOGPROB not in self.metrics:
            return
        blind = sorted(a for a, name in self.agent_backbone.items() if not self.backbones[name].scores_text)
        if blind and self.metrics == [REF_LOGPROB]:
            raise ValueError(f"eval.metrics=[{REF_LOGPROB}] needs backbones that score given text; those of "
                             f"{', '.join(blind)} cannot. Use eval.metrics=[bertscore]")
        if blind:
            log.info("the backbones of %s cannot score given text: their predictions carry no %s",
                     ", ".join(blind), REF_LOGPROB)
        if len(blind) == len(self.agent_backbone):
            self.metrics.remove(REF_LOGPROB)

    def scope(self, agent: str) -> str:
        return scope_for(self.agents[agent].domain, self.cfg.pool.mode)

    def by_backbone(self, queries: Sequence[Query], role: str, call: Callable[[LM, list[int]], list]) -> list[Any]:
        """`call(lm, indices)` once per backbone the queries' agents run on, with the indices of its
        queries, counted under `role`; the results come back in query order."""
        groups: dict[str, list[int]] = defaultdict(list)
        for i, q in enumerate(queries):
            groups[self.agent_backbone[q.agent]].append(i)
        out: list[Any] = [None] * len(queries)
        for name, idx in groups.items():
            lm = self.backbones[name]
            with lm.acting_as(role):
                for i, value in zip(idx, call(lm, idx), strict=True):
                    out[i] = value
        return out

    def answer(self, queries: Sequence[Query], prompts: Sequence[list], role: str) -> list[str]:
        """Each query's answer, generated by its agent's backbone."""
        return self.by_backbone(queries, role, lambda lm, idx: lm.generate([prompts[i] for i in idx]))

    # ---- the loop ---------------------------------------------------------------------------

    def seed_pool(self) -> int:
        items = [row for a, s in self.splits.items()
                 for row in seed_memories(self.agents[a], s.seed, self.cfg.pool.mode)]
        return sum(i is not None for i in self.pool.add(items, step=0))

    def prompts(self, queries: Sequence[Query], k: int, *, mark: bool,
                retriever=None) -> tuple[list[list], list[list[Memory]]]:
        """Retrieve k memories per query (one batch per scope) and render each query's chat."""
        retriever = retriever or self.retriever
        retrieved: list[list[Memory]] = [[] for _ in queries]
        by_scope: dict[str, list[int]] = defaultdict(list)
        for i, q in enumerate(queries):
            by_scope[q.scope].append(i)
        for scope, idx in by_scope.items():
            found = retriever.retrieve_batch([queries[i].example.question for i in idx], scope, k)
            for i, memories in zip(idx, found):
                retrieved[i] = memories
        if mark:
            self.pool.mark_retrieved({m.id for ms in retrieved for m in ms}, self.step)
        prompts = [chat(self.agents[q.agent], self.template.render(
            q.example.question, [{"question": m.question, "answer": m.answer} for m in memories]),
            self.template.system) for q, memories in zip(queries, retrieved)]
        return prompts, retrieved

    def ref_logprobs(self, queries: Sequence[Query], prompts: Sequence[list],
                     references: Sequence[str]) -> list[tuple[float, int] | None]:
        """(mean log-prob per token, tokens) of each reference given exactly the prompt the agent saw,
        on the agent's backbone; None where that backbone cannot score given text."""
        def score(lm: LM, idx: list[int]) -> list:
            if not lm.scores_text:
                return [None] * len(idx)
            scored = lm.loglikelihood([lm.chat_context(prompts[i]) for i in idx], [references[i] for i in idx])
            return [(total / n, n) for total, n in scored]

        return self.by_backbone(queries, "evaluate", score)

    def stream_batch(self, queries: Sequence[Query]) -> list:
        self.step += 1
        prompts = self.prompts(queries, self.stream_k, mark=True)[0]
        # stream.answers=reference: the dataset's reference goes to the gate, and nothing is generated.
        answers = ([q.example.answer for q in queries] if self.cfg.stream.answers == "reference"
                   else self.answer(queries, prompts, "answer"))
        # memory.question=prompt, as the authors' code: the question a new memory stores (and the
        # scorer grades, and memory train mines with) is the whole prompt the agent saw.
        asked = [p[-1]["content"] if self.cfg.memory.question == "prompt" else q.example.question
                 for q, p in zip(queries, prompts)]
        used = {q.scope: self.retriever.state(q.scope) for q in queries}  # before this step trains it
        decisions = self.gate.judge([Candidate(q.agent, q.scope, x, a) for q, x, a in zip(queries, asked, answers)])
        admitted = [(q, d) for q, d in zip(queries, decisions) if d.accepted]
        ids = self.memory.admit([{"scope": q.scope, "agent": q.agent, "domain": self.agents[q.agent].domain,
                                  "question": d.question, "answer": d.answer, "origin": "stream",
                                  "score": d.score, "backbone": self.agent_backbone[q.agent]}
                                 for q, d in admitted], step=self.step)
        new_ids = iter(ids)
        memory_ids = [next(new_ids) if d.accepted else None for d in decisions]
        # What the gate's utility measurements showed about the candidates and the shots they displaced.
        self.pool.record_utility(effects((d.utility, i) for d, i in zip(decisions, memory_ids)))
        if self.trainer is not None:
            self.pool.record_utility(self.trainer.update([(q.agent, q.scope, d.question, d.answer, i)
                                                          for (q, d), i in zip(admitted, ids) if i is not None]))
        for what, ids_ in asdict(self.memory.maybe_consolidate(self.step)).items():
            self.consolidated[what] += len(ids_)
        pool_sizes = {scope: self.pool.count(scope) for scope in {q.scope for q in queries}}
        append_decisions(self.out / DECISIONS_FILE, decisions,
                         [{"step": self.step, "memory_id": memory_id, "pool_size": pool_sizes[q.scope],
                           "scope": q.scope, **used[q.scope]}
                          for q, memory_id in zip(queries, memory_ids)])
        release_freed_memory()  # what answering, grading, labelling and the train step freed
        return decisions

    def evaluate(self, fill: int) -> list[dict]:
        """One row per test question: what was retrieved, and every metric in eval.metrics."""
        tests = [Query(a, self.scope(a), e) for a, s in self.splits.items() for e in s.test]
        rows = [{"agent": q.agent, "test_id": q.example.id, "k": self.cfg.k, "fill": fill,
                 "question": q.example.question, "reference": q.example.answer} for q in tests]
        batch = self.cfg.micro_batch
        # The bar counts LM requests (an answer, a reference scored) as the backbones finish them,
        # so it moves within a micro-batch too: one micro-batch can take minutes on a CPU.
        requests = len(tests) * (self.bertscore is not None) + (REF_LOGPROB in self.metrics) * sum(
            self.backbones[self.agent_backbone[q.agent]].scores_text for q in tests)
        with (tqdm(total=requests, desc=f"evaluate @ {fill}% fill", unit="request", leave=False) as bar,
              ExitStack() as reporting):
            for lm in self.backbones.values():
                reporting.enter_context(lm.reporting(bar.update))
            for start in range(0, len(tests), batch):
                self.evaluate_batch(rows[start:start + batch], tests[start:start + batch])
        if self.bertscore is not None:
            scores = self.bertscore.score([r["answer"] for r in rows], [r["reference"] for r in rows])
            for row, (p, r, f) in zip(rows, scores):
                row.update(P=p, R=r, F1=f)
        release_freed_memory()
        return rows

    def evaluate_batch(self, part: list[dict], queries: list[Query]) -> None:
        """Fill in the rows of one micro-batch of test questions: what was retrieved, the answer, the score."""
        prompts, retrieved = self.prompts(queries, self.cfg.k, mark=False, retriever=self.test_retriever)
        for row, q, memories in zip(part, queries, retrieved):
            row["retrieved"] = [m.id for m in memories]
            row.update(self.test_retriever.state(q.scope))  # retriever_version, index_staleness
        if self.bertscore is not None:
            for row, answer in zip(part, self.answer(queries, prompts, "evaluate")):
                row["answer"] = answer
        if REF_LOGPROB in self.metrics:
            for row, scored in zip(part, self.ref_logprobs(queries, prompts, [r["reference"] for r in part])):
                if scored is not None:
                    row[REF_LOGPROB], row["ref_tokens"] = scored

    def run(self) -> dict:
        started = time.perf_counter()
        seeded = self.seed_pool()
        stream = [Query(e.agent, self.scope(e.agent), e)
                  for e in interleave({a: s.stream for a, s in self.splits.items()})]
        # A reference-written stream skips the questions that have no reference, and counts them.
        no_reference = Counter(q.agent for q in stream if not (q.example.answer or "").strip())
        if self.cfg.stream.answers == "reference" and no_reference:
            stream = [q for q in stream if (q.example.answer or "").strip()]
            log.info("stream.answers=reference: skipped %d stream questions without a reference (%s)",
                     sum(no_reference.values()), ", ".join(f"{a} {n}" for a, n in sorted(no_reference.items())))
        skip_stream = skips_stream(self.cfg)
        if skip_stream:
            log.info("k=0: the stream is skipped (zero-shot answers do not read the pool)")
        accepted, rejected, unscored = Counter(), Counter(), Counter()
        by_fill, pool_sizes = {}, {}
        with tqdm(total=len(stream), desc="stream", unit="question", disable=skip_stream) as bar:
            for fill, part in batches(len(stream), self.cfg.fills, self.cfg.micro_batch, not skip_stream):
                if part is not None:
                    batch = stream[part]
                    for d in self.stream_batch(batch):
                        (accepted if d.accepted else rejected)[d.agent] += 1
                        unscored[d.agent] += d.unscored
                    bar.update(len(batch))
                    bar.set_postfix(pool=self.pool.count(), accepted=sum(accepted.values()))
                    continue
                rows = self.evaluate(fill)
                bar.unpause()  # the stream's elapsed time and rate leave out the evaluation
                with (self.out / PREDICTIONS_FILE).open("a", encoding="utf-8") as f:
                    f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                by_fill[str(fill)] = summarize(rows)
                pool_sizes[str(fill)] = self.pool.count_by("agent")
        if self.trainer is not None and self.cfg.retriever.save:
            self.trainer.save(self.out / "retriever")
        usage = save_usage(self.backbones.values(), self.out / USAGE_FILE)
        at_test = self.cfg.retriever.at_test
        metrics = {
            "complete": True,
            # retriever and learned describe what the test questions retrieved with; the stream's own
            # retriever is stream_retriever (they differ under retriever.at_test).
            "run": {"backbone": self.cfg.backbone.name, "k": self.cfg.k, "pool": self.cfg.pool.mode,
                    "retriever": "dense" if at_test == "dense_frozen" else at_test or self.cfg.retriever.name,
                    "learned": self.trainer is not None and not at_test,
                    "stream_retriever": self.cfg.retriever.name + " (learned)" * (self.trainer is not None),
                    "memory": self.cfg.memory.policy,
                    "refresh": self.cfg.retriever.refresh if self.trainer is not None else None,
                    "label_method": self.trainer.labeller.method if self.trainer else None,
                    "agents": list(self.splits), "fills": sorted(int(f) for f in self.cfg.fills), "seed": self.cfg.seed,
                    "metrics": self.metrics, "scorer_read": self.scorer.read,
                    # only where the gate is not the rubric, so rubric runs stay one condition with older runs
                    **gate_record(self.cfg.gate),
                    # only where the stream wrote references, so model-written runs stay one condition
                    **({"stream_answers": self.cfg.stream.answers} if self.cfg.stream.answers != "model" else {}),
                    # only where another backbone grades, so self-graded runs stay one condition with older runs
                    **({"grader": self.cfg.scorer.backbone, "threshold": self.cfg.scorer.threshold}
                       if self.cfg.scorer.backbone not in (None, self.cfg.backbone.name) else {}),
                    # only where some agent runs on a backbone other than the default
                    **({"agent_backbones": self.agent_backbone}
                       if set(self.agent_backbone.values()) != {self.cfg.backbone.name} else {})},
            "bertscore": self.bertscore.describe() if self.bertscore is not None else None,
            "fills": by_fill,
            "stream": {"questions": 0 if skip_stream else len(stream), "k": self.stream_k, "seeded": seeded,
                       "answers": self.cfg.stream.answers,
                       **({"skipped_without_reference": dict(no_reference)}
                          if self.cfg.stream.answers == "reference" else {}),
                       "accepted": dict(accepted),
                       "rejected": dict(rejected),
                       # rejected because no score could be read; 0 wherever the scorer reads probabilities
                       "unscored": sum(unscored.values()), "unscored_by_agent": dict(+unscored),
                       "pool_by_agent": pool_sizes,
                       "train_losses": self.trainer.losses if self.trainer else []},
            "memory": {"policy": self.cfg.memory.policy, "consolidation": dict(self.consolidated)},
            "usage": usage,
            "provenance": self.provenance,
            "wall_seconds": round(time.perf_counter() - started, 1),
            "cell": cell_record(self.cfg, data_fingerprint(self.splits)),  # what a resumed sweep must match
        }
        write_atomic(self.out / METRICS_FILE, json.dumps(metrics, indent=2, ensure_ascii=False))
        return metrics


def run(cfg: DictConfig, out_dir: Path) -> dict:
    """Run one configuration into out_dir. A folder that already holds a complete run is left as
    it is, so re-running an interrupted sweep redoes only its unfinished cells."""
    validate(cfg)  # every setting, before any model, pool or cache opens
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = completed(out_dir)
    if metrics is not None:
        check_same_cell(out_dir, metrics, cfg, data_fingerprint(load_splits(cfg.data, agents_from(cfg.agents))))
        log.info("%s already holds a complete run of these settings and data; skipping it", out_dir)
    else:
        clear_partial(out_dir, cfg)
        metrics = Experiment(cfg, out_dir).run()
    print(format_table(metrics))
    return metrics
