"""The composition root of a run: `compose_run` is the one function that reads the root config and
builds the run's parts, each from its own section or from parts built before it, every variant looked
up by name in its registry (ms.config.parts); the loop (ms.loop.pipeline.Experiment) then reads no
config at all. What it builds, it builds in the order runs always have (torch's random state, seeded
first, is drawn on as models load). Before it, `open_run` checks the settings and the run folder: a
folder that holds the same cell's complete run is left as it is.
"""

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig

from ms.agents import Agent, PromptTemplate, agents_from
from ms.config.files import METRICS_FILE
from ms.config.parts import GATES, METRICS, POISONS
from ms.data import load_splits
from ms.data.poison import Poisoner
from ms.data.poison_record import PoisonRecord
from ms.gates.base import Gate, GateParts
from ms.gates.genre import GenreTest
from ms.gates.question_dependence import QuestionTest
from ms.gates.record import GateRecord
from ms.gates.replay import UtilityMeter
from ms.gates.scorer import Scorer, load_rubrics, rubric_for, rubric_ref
from ms.llm import LM
from ms.llm.backbones import Backbones, build_backbones
from ms.loop.best_of import BestOf, build_best_of
from ms.loop.cell import check_same_cell, data_fingerprint
from ms.loop.cell import record as cell_record
from ms.loop.inputs import encoder_models, test_retriever_name
from ms.loop.provenance import provenance
from ms.loop.provenance_record import CellRecord, Provenance
from ms.loop.run_folder import clear_partial, completed, open_run_pool, write_atomic
from ms.loop.run_metrics import RunMetrics
from ms.loop.run_record import Retire, RunRecord
from ms.loop.schedule import Schedule, stream_k
from ms.loop.validation import validate
from ms.metrics.base import Metric
from ms.metrics.evaluate import validate_metrics
from ms.metrics.summary_record import description_of
from ms.pool import Pool, scope_for
from ms.pool.access import AccessRule, build_access
from ms.pool.access.record import AccessRecord
from ms.retrieval import build_retriever, build_test_retriever
from ms.retrieval.base import Retriever
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.encoder import Encoder
from ms.retrieval.memory import build_policy
from ms.retrieval.settings import DenseSettings
from ms.retrieval.training import Labeller, RetrieverTrainer

log = logging.getLogger(__name__)


class Clock:
    """The run's pool step (stream micro-batches so far): the loop advances it; the composite
    retriever ranks by age in these steps."""

    def __init__(self) -> None:
        self.step = 0

    def __call__(self) -> int:
        return self.step


@dataclass
class Settings:
    """What the loop itself reads of the config, besides its schedule."""

    k: int  # memories per test question
    stream_k: int  # memories per stream question
    stream_answers: str  # stream.answers: model | reference
    memory_question: str  # memory.question: query | prompt
    pool_mode: str
    memory_policy: str
    save_retriever: bool
    retire_below: Optional[float] = None  # memory.retire_below: None, nothing is retired
    retire_after: int = 6  # memory.retire_after: measurements a memory needs before it can be retired


@dataclass
class Parts:
    """A run's parts, built (`compose_run`), and what its metrics.json records of how they were made."""

    settings: Settings
    schedule: Schedule  # the run's steps, in order, as its plan walks them too (ms.loop.schedule)
    clock: Clock
    agents: dict[str, Agent]
    splits: dict  # agent -> its data splits (ms.data)
    template: PromptTemplate
    pool: Pool
    backbones: dict[str, LM]  # every backbone the run uses, by name, the default first
    agent_backbone: dict[str, str]  # agent -> the backbone it answers on
    gate: Gate
    memory: Any  # the memory policy (ms.retrieval.memory)
    retriever: Retriever  # the stream's, wrapped by the memory policy
    test_retriever: Retriever
    access: AccessRule  # who may read whose memories: every retrieval passes its agent's reader
    poisoner: Poisoner  # a poisoning writer's pairs for each stream micro-batch (none: no pairs)
    trainer: Optional[RetrieverTrainer]
    metrics: list[Metric]  # in the registry's order
    record: RunRecord  # metrics.json's `run`
    # metrics.json's record of what produced each metric: record_key -> its description (None: not used)
    described: dict = field(default_factory=dict)
    provenance: Optional[Provenance] = None
    cell: Optional[CellRecord] = None
    best_of: Optional[BestOf] = None  # stream.best_of > 1: n sampled answers, one kept (ms.loop.best_of)


def measurable(names: list[str], agent_backbone: dict[str, str], backbones: dict[str, LM]) -> list[str]:
    """The metrics `names` less those no agent's backbone can measure: a metric that needs what a
    backbone cannot do is left out of that agent's rows (never 0), and out of eval.metrics where it
    leaves no agent; a run whose every metric some agent's backbone cannot measure is refused."""
    kept = list(names)
    for name in names:
        cls = METRICS.load(name)
        blind = sorted(
            a for a, b in agent_backbone.items() if not all(getattr(backbones[b], w) is True for w in cls.needs)
        )
        if blind and kept == [name]:
            others = [m for m in METRICS if not METRICS.load(m).needs]
            raise ValueError(
                f"eval.metrics=[{name}] needs backbones that {cls.needs_words}; those of "
                f"{', '.join(blind)} cannot. Use eval.metrics=[{','.join(others)}]"
            )
        if blind:
            log.info(
                "the backbones of %s cannot %s: their predictions carry no %s", ", ".join(blind), cls.needs_words, name
            )
        if len(blind) == len(agent_backbone):
            kept.remove(name)
    return kept


def compose_run(cfg: DictConfig, out_dir: Path) -> Parts:
    """Every part of the run `cfg` (the root config) describes, with its pool in `out_dir`."""
    scope_for("literary", cfg.pool.mode)  # a bad pool mode fails here, before any model loads
    torch.manual_seed(cfg.seed)
    schedule = Schedule.of(
        cfg.stream, cfg.retriever, cfg.memory, cfg.eval, fills=cfg.fills, micro_batch=cfg.micro_batch, k=cfg.k
    )
    settings = Settings(
        k=cfg.k,
        stream_k=stream_k(cfg.k, cfg.stream_k),
        stream_answers=cfg.stream.answers,
        memory_question=cfg.memory.question,
        pool_mode=cfg.pool.mode,
        memory_policy=cfg.memory.policy,
        save_retriever=cfg.retriever.save,
        retire_below=cfg.memory.retire_below,
        retire_after=cfg.memory.retire_after,
    )
    template = PromptTemplate(**cfg.prompt)
    names = validate_metrics(cfg.eval.metrics) if cfg.eval.enabled else []  # a stream-only run measures nothing
    agents = agents_from(cfg.agents)
    splits = load_splits(cfg.data, agents)
    access = build_access(cfg.access, list(cfg.agents))  # before any model loads: a bad rule file fails fast
    poison_cls = POISONS.load(cfg.poison.name)
    victim = agents.get(cfg.poison.victim) if poison_cls.active else None
    quoted = rubric_for(victim, cfg.pool.mode).quoted() if victim else None
    poisoner = poison_cls.build(cfg.poison, agents, splits, cfg.seed, quoted)  # reads the data, and the victim's rubric
    pool = open_run_pool(cfg.pool, out_dir)  # before any model loads: a bad pool file fails fast
    # The backbone each agent that runs answers on; each distinct backbone is built once.
    catalog = Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache)
    agent_backbone = {a: catalog.resolve(agents[a].backbone) for a in splits}
    # gate=rubric_genre's test backbone where it names one (None, like any unnamed role, is the default)
    roles = [*agent_backbone.values(), cfg.scorer.backbone, cfg.train.backbone, cfg.gate.get("test_backbone")]
    backbones = build_backbones(catalog, roles)
    names = measurable(names, agent_backbone, backbones)
    rubrics = load_rubrics({rubric_ref(agents[a], cfg.pool.mode) for a in splits})
    scorer = Scorer(backbones[catalog.resolve(cfg.scorer.backbone)], rubrics, cfg.scorer)
    clock = Clock()  # the composite ranks by age in stream steps: its clock is the loop's step
    # Trained exactly where the schedule says memory train runs, as the run's plan counts it.
    retriever, trainable = build_retriever(cfg.retriever, pool, learned=schedule.trains, clock=clock)
    trainer = None
    if trainable is not None:
        labelling = backbones[catalog.resolve(cfg.train.backbone)]
        labeller = Labeller(labelling, template, cfg.train.label_method, cfg.train.verbalized_prompt, agents=agents)
        trainer = RetrieverTrainer(cfg.train, trainable, BM25Retriever(pool), labeller, reader=access.reader)
    # The policy's thresholds are cosines of the untrained encoder, so it keeps its own copy.
    memory = build_policy(
        cfg.memory, pool, backbones[cfg.backbone.name], encoder=lambda: Encoder(DenseSettings.encoder_of(cfg.retriever))
    )
    retriever = memory.wrap(retriever)
    at_test = cfg.retriever.at_test
    test_retriever = memory.wrap(build_test_retriever(cfg.retriever, pool)) if at_test else retriever
    metrics = [METRICS.load(name).build(cfg.eval) for name in METRICS if name in names]
    gate_cls = GATES.load(cfg.gate.name)
    gate = gate_cls.build(
        cfg.gate,
        GateParts(
            scorer=scorer,
            rubric_of=lambda a: rubric_for(agents[a], cfg.pool.mode).name,
            seed=cfg.seed,
            meter=lambda probes: UtilityMeter(  # the gate gives its own probes (gate.probes)
                retriever.retrieve_batch,
                lambda a: backbones[agent_backbone[a]],
                agents,
                template,
                probes,
                settings.stream_k,
                [e.question for s in splits.values() for e in s.test],
                reader=access.reader,
            ),
            question_test=lambda others, margin, seed: QuestionTest(  # the gate gives its own settings
                lambda a: backbones[agent_backbone[a]],
                agents,
                template,
                {a: [e.question for e in split.seed] for a, split in splits.items()},
                others,
                margin,
                seed,
            ),
            genre_test=lambda margin, on: GenreTest(
                lambda a: backbones[catalog.resolve(on or agent_backbone[a])], agents, template, margin
            ),
        ),
    )
    if cfg.memory.retire_below is not None and not (
        gate_cls.measures_utility or (trainer is not None and cfg.train.utility_from_labels)
    ):
        # Not refused: on a shared pool (pool.path) other runs' measurements count too.
        log.warning(
            "memory.retire_below=%s: this run measures no utility (gate=%s; no memory-train labels with "
            "train.utility_from_labels=true), so it retires only what its pool already holds measurements of; "
            "gate=utility or gate=both measure them",
            cfg.memory.retire_below,
            cfg.gate.name,
        )
    # Taken before the stream runs: the code and files the run started with.
    test_name = test_retriever_name(cfg.retriever)
    encoders = encoder_models(cfg.retriever, cfg.memory, cfg.eval, names)
    record = RunRecord(
        backbone=cfg.backbone.name,
        k=cfg.k,
        pool=cfg.pool.mode,
        retriever=test_name or cfg.retriever.name,
        learned=trainer is not None and not at_test,
        stream_retriever=cfg.retriever.name + " (learned)" * (trainer is not None),
        memory=cfg.memory.policy,
        refresh=trainer.dense.refresh if trainer is not None else None,
        label_method=trainer.labeller.method if trainer else None,
        agents=tuple(splits),
        fills=tuple(sorted(int(f) for f in cfg.fills)),
        seed=cfg.seed,
        metrics=tuple(names),
        # what the grader read its grades from; None under a gate that grades nothing (all, random, utility)
        scorer_read=scorer.read if gate_cls.grades_with_rubrics() else None,
        # The fields below were added after runs were committed: each part's (gate, access rule, poisoner)
        # only where it is not the option older runs ran with, the rest left out at that value by
        # RunRecord.to_json (ms.config.added), so that runs like older ones stay one condition with them.
        gate=GateRecord.from_json(gate_cls.record(cfg.gate)),
        **{key: cfg.stream[key] for key in ("best_of", "select", "temperature")},
        evaluated=bool(cfg.eval.enabled),
        stream_answers=cfg.stream.answers,
        access=AccessRecord.from_json(access.record().get("access")),
        poison=PoisonRecord.from_json(poison_cls.record(cfg.poison).get("poison")),
        grader=cfg.scorer.backbone if cfg.scorer.backbone != cfg.backbone.name else None,
        threshold=cfg.scorer.threshold,
        retire=Retire(cfg.memory.retire_below, cfg.memory.retire_after)
        if cfg.memory.retire_below is not None
        else None,
        agent_backbones=agent_backbone if set(agent_backbone.values()) != {cfg.backbone.name} else None,
    )
    described = {cls.record_key: None for cls in map(METRICS.load, METRICS) if cls.record_key}
    described.update({m.record_key: description_of(m.record_key, m.describe()) for m in metrics if m.record_key})
    made_with = provenance({name: catalog.config(name) for name in backbones}, encoders, cfg.micro_batch)
    return Parts(
        settings=settings,
        schedule=schedule,
        clock=clock,
        agents=agents,
        splits=splits,
        template=template,
        pool=pool,
        backbones=backbones,
        agent_backbone=agent_backbone,
        gate=gate,
        memory=memory,
        retriever=retriever,
        test_retriever=test_retriever,
        access=access,
        poisoner=poisoner,
        trainer=trainer,
        metrics=metrics,
        record=record,
        described=described,
        provenance=Provenance.from_json(made_with),
        cell=CellRecord.from_json(cell_record(cfg, data_fingerprint(splits))),  # what a resumed sweep must match
        best_of=build_best_of(cfg.stream, cfg.seed, scorer, lambda a: rubric_for(agents[a], cfg.pool.mode).name),
    )


def open_run(cfg: DictConfig, out_dir: Path) -> Parts | dict:
    """What running `cfg` into `out_dir` starts from, every setting checked first (before any model, pool
    or cache opens): the metrics of the complete run the folder already holds, once shown to be `cfg`'s
    cell (a UserError names what differs: ms.loop.cell), which is left as it is, so that re-running an
    interrupted sweep redoes only its unfinished cells; else the run's parts, the folder cleared of an
    interrupted run's files."""
    validate(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = completed(out_dir)
    if metrics is None:
        clear_partial(out_dir, cfg.pool)
        return compose_run(cfg, out_dir)
    accepted = check_same_cell(out_dir, metrics, cfg, data_fingerprint(load_splits(cfg.data, agents_from(cfg.agents))))
    if accepted is not None:  # the run's numbers now stand for this code too: say so in the run itself
        written = RunMetrics.from_json(metrics, out_dir / METRICS_FILE)
        metrics = replace(written, cell=written.cell.accepting(accepted)).to_json()
        write_atomic(out_dir / METRICS_FILE, json.dumps(metrics, indent=2, ensure_ascii=False))
        log.info("%s: its numbers are accepted for this code (accept_code_change=true)", out_dir)
    return metrics
