"""Every config dataclass and every choice a setting offers: the typed schema registered under
conf/config.yaml (ms.config.store), so a misspelled or unknown key fails at composition with its
name, and each field's limits sit beside it (ms.config.fields).

The backbone's configs and choices live in ms.config.backbone and are named here too. This module
imports nothing of ms but ms.config, and no torch: the parts take these
dataclasses (or plain values read from them), never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from ms.config.backbone import (
    ENGINES,
    PROMPT_FORMATS,
    PROMPT_LOGPROBS,
    PROVIDERS,
    BackboneConfig,
    GenerationConfig,
    PriceConfig,
)
from ms.config.fields import setting
from ms.config.parts import ACCESS_RULES, GATES, METRICS, POISONS, POLICIES, POOL_BACKENDS, RETRIEVERS

# ---- choices --------------------------------------------------------------------------------

POOL_MODES = ("domain", "single")
# Where the pool lives (POOL_BACKENDS, ms.config.parts): sqlite (one file, processes on one machine) |
# postgres (a server, processes on several).
# pool.dsn is read from this variable: ms-run moves a `pool.dsn=...` it is given there before Hydra
# sees it, so the connection string never reaches a run folder's name, .hydra/ or a log.
POOL_DSN_ENV = "MS_POOL_DSN"
# RETRIEVERS (ms.config.parts): dense, composite, bm25, random.
AT_TEST = ("bm25", "random", "dense_frozen")
# How memory vectors follow a trained encoder (see ms.retrieval.dense): re-encoded after every step,
# after every n steps, once a per-step budget of re-encoded memories covers the scope, or never,
# because only a separate query encoder is trained.
REFRESH_POLICIES = ("full", "every_n", "budget", "query_tower")
# How a dense search finds its top k (ms.retrieval.dense): one exact matrix product over the scope,
# or, in scopes of at least retriever.ann_min_size memories, an HNSW graph (ms.retrieval.ann).
INDEXES = ("exact", "ann")
ANN_MIN_SIZE, ANN_EF = 50_000, 128  # the defaults of retriever.ann_min_size and ann_ef: why, beside them
LABEL_METHODS = ("likelihood", "verbalized")
# POLICIES (ms.config.parts): plain, stm_ltm.
AGE_UNITS = ("steps", "hours")
READS = ("auto", "probabilities", "text")  # how the gate reads a grader's score
# What the rubric gate does about answers that talk to their grader (ms.gates.scorer, ms.gates.screen):
# none; quote (the pair shown as quoted data, claims inside it declared no evidence); strip (grader-directed
# sentences removed before grading); reject (a pair holding any is rejected without grading).
DEFENCES = ("none", "quote", "strip", "reject")
# What admits a new pair: GATES (ms.config.parts; one module each in ms.gates): the rubric grader, the
# utility replay (ms.gates.replay), or both in turn; and two admission controls that judge nothing: all
# (admit every pair) and random (a coin, or the counts of a finished run per agent and micro-batch).
# What the stream writes as each new pair's answer: the backbone's answer, or the dataset's reference.
STREAM_ANSWERS = ("model", "reference")
# stream.best_of > 1: what picks the answer that goes to the gate among the agent's samples (ms.loop.best_of):
# grader: the rubric scorer's score of each (ms.gates.scorer) | likelihood: the answering model's own mean
# log-prob per token of each, given the prompt it answered.
SELECTORS = ("grader", "likelihood")
RUBRIC_TOTAL = 100  # a rubric's points add up to this
# ref_logprob: mean log-probability per token of the reference answer given exactly the agent's
# prompt (EPR and LLM-R's demonstration utility): one forward pass, no decoding. Nats per token.
REF_LOGPROB = "ref_logprob"
EVAL_METRICS = METRICS  # what eval.metrics may name: the registered metrics (ms.config.parts; ms.metrics)
DEFAULT_METRICS = ("bertscore", REF_LOGPROB)

# ---- agents and data ----


@dataclass
class AgentConfig:
    """One entry of `agents`; the entry's key is the agent's name (and its data file's stem)."""

    domain: str = MISSING
    instruction: str = MISSING  # sent as the system message
    # A conf/rubric name, or a path to a rubric file. None: the domain's, conf/rubric/<domain>.yaml.
    # The Single-pool grades every agent with the single rubric instead.
    rubric: Optional[str] = None
    backbone: Optional[str] = None  # a conf/backbone name; None: the run's `backbone`


@dataclass
class HFDataConfig:
    name: str = MISSING  # hub name, local folder or file (.json/.jsonl/.csv/.tsv/.parquet)
    split: str = "train"
    question: str = "question"
    answer: str = "answer"
    agent: Optional[str] = None  # every row belongs to this agent ...
    agent_column: Optional[str] = None  # ... or each row names its agent in this column


@dataclass
class DataConfig:
    dir: str = "data"
    agents: Optional[list[str]] = None  # the agents that run; None: every configured agent
    fractions: list[float] = field(default_factory=lambda: [0.2, 0.4, 0.4])  # for examples without a split
    split_seed: int = 0
    # Per-agent caps for quick runs: the first n of each part after splitting.
    max_seed: Optional[int] = None
    max_stream: Optional[int] = None
    max_test: Optional[int] = None
    hf: Optional[HFDataConfig] = None  # when set, read this dataset instead of `dir`
    # The command that creates `dir`, named in the error when the folder is missing (data=paper).
    created_by: Optional[str] = None


# ---- the loop's parts ----


@dataclass
class ScorerConfig:
    threshold: float = setting(50, ge=0, le=RUBRIC_TOTAL)  # the paper's code admits pairs scoring 50 or more
    # auto: the probability-weighted score where the backbone exposes token probabilities, else text
    read: str = setting("auto", choices=READS)
    # Below this much probability on "0".."100" the grader is not answering with a score at all.
    min_mass: float = setting(1e-4, ge=0.0, le=1.0)
    max_new_tokens: int = setting(16, ge=1)  # text read: a number, perhaps with a few words around it
    retries: int = setting(1, ge=0)  # text read: batched re-asks for replies with no readable score
    backbone: Optional[str] = None  # a conf/backbone name; None: the run's `backbone` (conf/grader sets both)
    # Against answers that talk to the grader (DEFENCES). reject: the gate check's grader-directed copies were
    # all rejected under SmolLM2 and Qwen2.5-0.5B graders, the ordinary corruptions' AUC unchanged, and 1 in
    # 10,628 real answers flagged (results/gate_check_grader_directed). Runs recorded before it ran with none.
    defence: str = setting("reject", choices=DEFENCES)


@dataclass
class EvalConfig:
    # bertscore needs generated answers; ref_logprob alone skips generation and BERTScore entirely.
    # ref_logprob is measured only on backbones that score given text (absent elsewhere, never 0).
    metrics: list[str] = setting(factory=lambda: list(DEFAULT_METRICS), choices=METRICS, nonempty=True)
    # false: a stream-only run, to screen admission cheaply: the pool grows and decisions.jsonl is written
    # as ever (fills still cut the stream's micro-batches), but no test question is answered or scored.
    enabled: bool = True
    model: Optional[str] = None  # None: the packaged MiniLM; or e.g. roberta-large, microsoft/deberta-xlarge-mnli
    num_layers: Optional[int] = setting(None, ge=1)  # None: MINILM_LAYERS for MiniLM, bert-score's own table otherwise
    batch_size: int = setting(32, ge=1)
    lang: str = "en"
    device: str = "auto"


@dataclass
class TrainConfig:
    enabled: bool = True  # false: the dense retriever stays frozen
    candidates: int = setting(10, ge=2)  # n: BM25 candidates mined per accepted pair
    labelled: int = setting(6, ge=2)  # v: v/2 positives + v/2 negatives
    label_method: str = setting("likelihood", choices=LABEL_METHODS)
    lr: float = setting(2e-5, gt=0.0)  # encoder
    head_lr: float = setting(1e-2, gt=0.0)  # s and b
    init_scale: float = 10.0
    init_bias: float = -5.0
    replay_size: int = setting(2048, ge=0)  # labelled pairs kept for replay
    replay_per_step: int = setting(24, ge=0)  # replayed pairs mixed into each step
    steps: int = setting(1, ge=1)  # optimizer steps per update
    seed: int = 0
    # The verbalized label prompt, with {example}, {query} and {answer}; None: VERBALIZED_PROMPT.
    verbalized_prompt: Optional[str] = None
    backbone: Optional[str] = None  # a conf/backbone name to label with; None: the run's `backbone`
    # Each label scores a candidate memory as a one-shot example; with one zero-shot pass per admitted
    # pair as the baseline, that is a utility measurement of the candidate (ms.gates.replay), kept in the pool.
    utility_from_labels: bool = False

    def problems(self):
        """Cross-field limits (see ms.loop.validation): v labelled candidates are picked from the n mined."""
        if self.labelled > self.candidates:
            yield (
                "labelled",
                (f"must be at most train.candidates ({self.candidates}): v labelled are picked from n mined"),
            )
        if self.utility_from_labels and self.label_method != "likelihood":
            yield "utility_from_labels", "needs train.label_method=likelihood: a verbalized label is no log-probability"


@dataclass
class StmLtmConfig:
    capacity: int = setting(5, ge=1)  # short-term items per agent before its store is consolidated
    interval: int = setting(3, ge=1)  # steps an item may wait in short-term memory before consolidation
    threshold: float = setting(0.5, ge=-1.0, le=1.0)  # cosine a short-term item needs to be retrieved for a query...
    importance_override: float = setting(0.8, ge=0.0, le=1.0)  # ...unless its importance is above this
    group_similarity: float = setting(0.6, ge=-1.0, le=1.0)  # cosine that puts short-term items in one group
    default_importance: float = setting(0.5, ge=0.0, le=1.0)  # when the LLM's importance reply holds no number
    importance_tokens: int = setting(8, ge=1)
    summary_tokens: int = setting(256, ge=1)
    # Items whose measured utility (ms.gates.replay) is above this move to long-term memory verbatim, never
    # summarized; the rest are grouped lowest utility first. None: utility plays no part.
    keep_above: Optional[float] = None


@dataclass
class MemoryConfig:
    policy: str = setting("plain", choices=POLICIES)
    # What a stream memory stores as its question: the query alone, or the whole prompt the agent
    # saw, retrieved examples included (the authors' code; protocol=paper).
    question: str = setting("query", choices=("query", "prompt"))
    stm_ltm: StmLtmConfig = field(default_factory=StmLtmConfig)
    # Retirement (ms.pool.retirement): after each stream step, a memory the stream wrote (an admitted
    # pair, or a summary of some) whose mean measured utility (nats per token, the pool's `utility`) is
    # below retire_below over at least retire_after measurements is retired: kept in the pool, marked,
    # and never retrieved again. Seeds are never retired. The measurements are those a run already
    # makes: gate=utility or both, and train.utility_from_labels; without them nothing is retired.
    # None: no memory is ever retired.
    retire_below: Optional[float] = None
    # Measurements a memory needs before it can be retired. 6: the 3 probe deltas a utility-gated pair
    # records at its own admission (gate.probes), and as many measured after it.
    retire_after: int = setting(6, ge=1)


@dataclass
class CompositeConfig:
    importance_weight: float = setting(1.0, ge=0.0)
    recency_weight: float = setting(1.0, ge=0.0)
    similarity_weight: float = setting(1.0, ge=0.0)
    # A memory's measured utility (ms.gates.replay), as logistic(utility / utility_scale) in (0, 1); an
    # unmeasured memory sits at 0.5. 0 leaves rankings as they were before utility was kept.
    utility_weight: float = setting(0.0, ge=0.0)
    utility_scale: float = setting(0.05, gt=0.0)  # nats per token that move the term from 0.5 to 0.73
    candidates: int = setting(20, ge=1)  # dense top-N re-ranked per query (raised to k when k is larger)
    decay: float = setting(0.995, gt=0.0, le=1.0)  # recency = decay ** age
    age_unit: str = setting("steps", choices=AGE_UNITS)  # steps: pool steps (stream batches) | hours: wall-clock time
    # Importance of a memory with neither a rubric score nor an LLM-assigned importance (seed pairs
    # under the plain policy): the middle of the scale, so it neither outranks nor trails graded
    # memories by default.
    default_importance: float = setting(0.5, ge=0.0, le=1.0)
    debug: bool = False  # log every query's candidate table (see `format_ranking`)

    def problems(self):
        """Cross-field limits (see ms.loop.validation): with every weight 0 all candidates tie."""
        if self.importance_weight == self.recency_weight == self.similarity_weight == self.utility_weight == 0:
            yield "similarity_weight", "the four weights are all 0; give at least one a positive weight"


@dataclass
class GateConfig:
    """What every gate's settings share: its name. Each registered gate declares the rest in a dataclass of
    its own that extends this one (ms.gates.settings), the schema of its option in the `gate` group
    (ms.config.options): a key another gate reads (gate.rate under gate=rubric) is refused at composition."""

    # A registered gate (GATES; ms.gates, one module each): rubric: an LLM grades the pair (ms.gates.scorer) |
    # utility: admit the pair when it raises the likelihood of its nearest memories' answers as an
    # in-context example (ms.gates.replay) | both: rubric first, then utility on what the rubric admits |
    # all, random: admission controls.
    name: str = setting("rubric", choices=GATES)


@dataclass
class StreamConfig:
    # model: the agent's backbone answers each stream question | reference: the dataset's reference
    # answer goes to the gate instead and nothing is generated for the stream (a question without
    # one is skipped and counted).
    answers: str = setting("model", choices=STREAM_ANSWERS)
    # Best-of-n writing: the agent samples n answers at `temperature` and `select` keeps one; only that
    # one goes to the gate. 1: today's single greedy answer (temperature and select are then not read).
    best_of: int = setting(1, ge=1)
    temperature: float = setting(0.7, gt=0.0)  # sample i of a prompt is seeded by (prompt, run seed, i)
    select: str = setting("grader", choices=SELECTORS)

    def problems(self):
        if self.best_of > 1 and self.answers == "reference":
            yield "best_of", "stream.answers=reference generates no answers to choose among; use stream.answers=model"


# ---- the whole ----


@dataclass
class PoolConfig:
    # domain: one pool per domain | single: one pool for all nine agents
    mode: str = setting("domain", choices=POOL_MODES)
    path: Optional[str] = None  # None: pool.sqlite in the run folder; a path lets processes share one
    backend: str = setting("sqlite", choices=POOL_BACKENDS)
    # postgres: a libpq connection string (key=value pairs or a postgresql:// URI) without a password.
    dsn: Optional[str] = "${oc.env:" + POOL_DSN_ENV + ",null}"

    def problems(self):
        """Cross-field limits (see ms.loop.validation): a server pool needs to know its server."""
        if self.backend == "postgres" and not self.dsn:
            yield (
                "dsn",
                (
                    f"pool.backend=postgres needs a connection string: pool.dsn=... or the environment "
                    f"variable {POOL_DSN_ENV}"
                ),
            )


@dataclass
class AccessConfig:
    # Who may read whose memories within the scope it reads (ACCESS_RULES; ms.pool.access): open: everyone
    # reads everything, as before rules existed | rule: the grant table of a rule file (README,
    # "Access rules"). Enforced wherever candidates are drawn: every retriever, short-term memory,
    # memory train's mining and the utility gate's probes.
    name: str = setting("open", choices=ACCESS_RULES)
    file: Optional[str] = None  # access=rule: the rule file (ms-data learn-access writes one)

    def problems(self):
        if self.file is not None and self.name == "open":
            yield "file", "is read by access=rule only; access=open grants every writer"


@dataclass
class PoisonConfig:
    """What every poisoner's settings share: its name. Each poisoning writer declares the rest (its victim,
    its writer's name; injection its instruction and marker) in a dataclass of its own that extends this
    one (ms.data.poison_settings), the schema of its option in the `poison` group (ms.config.options)."""

    # A poisoning writer, or none (the default); the options: the POISONS registry (ms.config.parts). It asks
    # the victim's stream questions; its pairs go through the run's gate as the victim's (its rubric, its
    # prompts) and join the pool under its writer's name (README, "A poisoned writer").
    name: str = setting("none", choices=POISONS)


@dataclass
class RetrieverConfig:
    name: str = setting("dense", choices=RETRIEVERS)
    encoder: Optional[str] = None  # None: the packaged all-MiniLM-L6-v2; or any HF encoder
    learn: bool = True  # dense and composite: keep fine-tuning the encoder with memory train
    # Test questions retrieve with this instead (bm25 | random | dense_frozen), over the same pool the
    # stream grew: a retriever ablation that holds the pool fixed. None: the stream's retriever.
    at_test: Optional[str] = setting(None, choices=AT_TEST)
    # How memory vectors follow memory train (dense, composite; see ms.retrieval.dense): full
    # re-encodes the pool after every step; every_n after every `refresh_every` steps, using stale
    # vectors meanwhile; budget once the steps since the last refresh x `refresh_budget` cover the
    # scope (full while a scope holds <= refresh_budget memories, bounded cost per step beyond);
    # query_tower trains a separate query encoder, so memory vectors never go stale.
    # budget is the default: it is full at every pool size whose quality was measured
    # (results/refresh_offline) and keeps a step's cost flat as the pool grows (results/benchmarks).
    refresh: str = setting("budget", choices=REFRESH_POLICIES)
    refresh_every: int = setting(8, ge=1)
    refresh_budget: int = setting(1000, ge=1)  # memories re-encoded per training step, on average
    # exact: one matrix product per search, exact at every size (about 15 ms per search at 100k on
    # this 2-core CPU, linear in the scope). ann: an approximate HNSW graph (faiss-cpu, the `ann`
    # extra) for scopes of at least ann_min_size searchable memories; smaller scopes stay exact.
    index: str = setting("exact", choices=INDEXES)
    # 50,000: below it an exact search costs under about 8 ms, a fifth of encoding the query with
    # MiniLM here (about 40 ms), so an approximate one saves little and would give up exactness and
    # the graph's memory and build time; above it exact search grows linearly (an estimated 150 ms
    # at 1M, ten times the 100k figure).
    ann_min_size: int = setting(ANN_MIN_SIZE, ge=1)
    # HNSW search effort (faiss efSearch): candidates kept while walking the graph. 128 gave
    # recall@10 0.999 at 100k structured vectors (0.997 at 64) in the library comparison, a margin
    # for 1M (README, "Approximate index"; benchmarks/retrieval.py --index ann measures the frontier).
    ann_ef: int = setting(ANN_EF, ge=1)
    seed: int = 0
    composite: CompositeConfig = field(default_factory=CompositeConfig)
    # Keep the fine-tuned encoder in the run folder (retriever/, about 87 MB with MiniLM). Nothing in
    # ms reads it back: tables, claims and figures come from the run's JSON files. On by default, as
    # a lone run's trained retriever cannot be had without running it again; the *_offline sweeps
    # turn it off (conf/experiment/offline.yaml).
    save: bool = True


@dataclass
class PromptConfig:
    """The in-context template (see ms.agents.PromptTemplate)."""

    example: str = "{question}->{answer}"
    separator: str = " | "
    with_examples: str = (
        "{examples} | Taking the question-answer pairs above as examples, answer this question: {query}"
    )
    zero_shot: str = "{query}"
    system: bool = True  # the agent's instruction as a system message (the authors' code sent none)


@dataclass
class Config:
    backbone: BackboneConfig = MISSING  # the default backbone: every role that names no other runs on it
    agents: dict[str, AgentConfig] = field(default_factory=dict)  # name -> entry (the `agents` group)
    data: DataConfig = field(default_factory=DataConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    access: AccessConfig = field(default_factory=AccessConfig)  # the `access` group; options: the ACCESS_RULES registry
    poison: PoisonConfig = field(default_factory=PoisonConfig)  # the `poison` group; options: the POISONS registry
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    gate: GateConfig = field(default_factory=GateConfig)  # the `gate` group; options: the GATES registry
    eval: EvalConfig = field(default_factory=EvalConfig)
    stream: StreamConfig = field(default_factory=StreamConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    k: int = setting(3, ge=0)  # memories retrieved per test query
    # Memories per stream query. None: k. A sweep over k fixes it, so all its cells grow the same
    # pool from the same stream, and every cell after the first replays it from the response cache.
    stream_k: Optional[int] = setting(None, ge=0)
    fills: list[int] = setting(
        factory=lambda: [20, 40, 60, 80, 100], ge=0, le=100, increasing=True, nonempty=True
    )  # % of the stream, evaluated
    micro_batch: int = setting(32, ge=1)  # stream questions answered, scored and trained on together
    cache_dir: str = ".cache/ms"  # response cache and converted models, shared by runs and sweep cells
    use_cache: bool = True
    # Resuming a folder whose finished run was made by other code (and nothing else differs) reuses its
    # numbers only when this is true; the acceptance is recorded in the run (ms.loop.cell).
    accept_code_change: bool = False
    seed: int = 0  # torch's seed: dropout while training the retriever


__all__ = [
    "ACCESS_RULES",
    "AGE_UNITS",
    "AccessConfig",
    "ANN_EF",
    "ANN_MIN_SIZE",
    "AT_TEST",
    "AgentConfig",
    "BackboneConfig",
    "CompositeConfig",
    "Config",
    "DataConfig",
    "DEFAULT_METRICS",
    "DEFENCES",
    "EVAL_METRICS",
    "METRICS",
    "ENGINES",
    "EvalConfig",
    "GATES",
    "GateConfig",
    "GenerationConfig",
    "HFDataConfig",
    "INDEXES",
    "LABEL_METHODS",
    "MemoryConfig",
    "POLICIES",
    "POOL_BACKENDS",
    "POOL_DSN_ENV",
    "POOL_MODES",
    "PROMPT_FORMATS",
    "PROMPT_LOGPROBS",
    "PROVIDERS",
    "POISONS",
    "PoisonConfig",
    "PoolConfig",
    "PriceConfig",
    "PromptConfig",
    "READS",
    "REFRESH_POLICIES",
    "REF_LOGPROB",
    "RETRIEVERS",
    "RUBRIC_TOTAL",
    "RetrieverConfig",
    "ScorerConfig",
    "SELECTORS",
    "STREAM_ANSWERS",
    "StmLtmConfig",
    "StreamConfig",
    "TrainConfig",
]
