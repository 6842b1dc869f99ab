"""Every config dataclass and every choice a setting offers: the typed schema registered under
conf/config.yaml (ms.config.store), so a misspelled or unknown key fails at composition with its
name, and each field's limits sit beside it (ms.config.fields).

The backbone's configs and choices live in ms.config.backbone. This module imports nothing of ms but
ms.config, and no torch: the parts take these dataclasses (or plain values read from them), never the
other way round.
"""

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from ms.config.backbone import BackboneConfig
from ms.config.fields import setting
from ms.config.parts import ACCESS_RULES, GATES, METRICS, POISONS, POLICIES, POOL_BACKENDS, RETRIEVERS

# ---- choices --------------------------------------------------------------------------------

POOL_MODES = ("domain", "single")
# Where the pool lives (POOL_BACKENDS, ms.config.parts): sqlite (one file, processes on one machine) |
# postgres (a server, processes on several).
# pool.dsn is read from this variable: ms-run moves a `pool.dsn=...` it is given there before Hydra
# sees it, so the connection string never reaches a run folder's name, .hydra/ or a log.
POOL_DSN_ENV = "MS_POOL_DSN"
# RETRIEVERS (ms.config.parts): dense, composite, bm25, random; each one's own choices beside its settings
# (ms.retrieval.settings).
AT_TEST = ("bm25", "random", "dense_frozen")
LABEL_METHODS = ("likelihood", "verbalized")
# POLICIES (ms.config.parts): plain, stm_ltm.
READS = ("auto", "probabilities", "text")  # how the gate reads a grader's score
# What the rubric gate does about answers that talk to their grader (ms.gates.scorer, ms.gates.screen):
# none; quote (the pair shown as quoted data, claims inside it declared no evidence); strip (grader-directed
# sentences removed before grading); reject (a pair holding any is rejected without grading).
DEFENCES = ("none", "quote", "strip", "reject")
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
    model: Optional[str] = None  # None: the packaged MiniLM; mpnet: the packaged all-mpnet-base-v2; or a hub name
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
class MemoryConfig:
    """What every memory policy's settings share. A policy with settings of its own declares them in a
    dataclass that extends this one (ms.retrieval.settings: stm_ltm's), the schema of its option in the
    `memory` group (ms.config.options): a key another policy reads (memory.stm_ltm under memory=plain) is
    refused at composition."""

    # A registered policy (POLICIES; ms.retrieval.memory): plain: admitted pairs go straight into the
    # searchable pool | stm_ltm: a short-term store per agent, consolidated into long-term memory.
    policy: str = setting("plain", choices=POLICIES)
    # What a stream memory stores as its question: the query alone, or the whole prompt the agent
    # saw, retrieved examples included (the authors' code; protocol=paper).
    question: str = setting("query", choices=("query", "prompt"))
    # Retirement (ms.pool.retirement): after each stream step, a memory the stream wrote (an admitted
    # pair, or a summary of some) whose mean measured utility (nats per token, the pool's `utility`) is
    # below retire_below over at least retire_after measurements is retired: kept in the pool, marked,
    # and never retrieved again. Seeds are never retired. The measurements are those a run already
    # makes: gate=utility or both, and train.utility_from_labels; without them nothing is retired.
    # The two measure against different things: the gate's probes against the shot a memory displaces,
    # the labels against no shot at all, which almost every memory beats (results/mechanisms_offline:
    # at 0, labels alone retired nothing). None: no memory is ever retired.
    retire_below: Optional[float] = None
    # Measurements a memory needs before it can be retired. 6: the 3 probe deltas a utility-gated pair
    # records at its own admission (gate.probes), and as many measured after it.
    retire_after: int = setting(6, ge=1)


@dataclass
class GateConfig:
    """What every gate's settings share: its name. Each registered gate declares the rest in a dataclass of
    its own that extends this one (ms.gates.settings), the schema of its option in the `gate` group
    (ms.config.options): a key another gate reads (gate.rate under gate=rubric) is refused at composition."""

    # A registered gate (GATES; ms.gates, one module each): rubric: an LLM grades the pair (ms.gates.scorer) |
    # utility: admit the pair when it raises the likelihood of its nearest memories' answers as an
    # in-context example (ms.gates.replay) | both: rubric first, then utility on what the rubric admits |
    # rubric_qdep: rubric first, then the answer must be likelier after its own question than after others
    # (ms.gates.question_dependence) | rubric_genre: rubric first, then the answer must be likelier after its
    # question than after requests to review a reply to it (ms.gates.genre) | all, random: admission controls.
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
    """What every pool backend's settings share: the mode (the `pool` group) and the backend. Each backend
    declares the rest in a dataclass that extends this one (ms.pool.settings: sqlite's file, postgres's
    server), the schema of its option in the `pool/backend` group (ms.config.options)."""

    # domain: one pool per domain | single: one pool for all nine agents
    mode: str = setting("domain", choices=POOL_MODES)
    backend: str = setting("sqlite", choices=POOL_BACKENDS)  # chosen by pool/backend=NAME


@dataclass
class AccessConfig:
    """What every access rule's settings share: its name. A rule with settings of its own declares them in
    a dataclass that extends this one (ms.pool.access.settings: rule's file), the schema of its option in
    the `access` group (ms.config.options): access.file under access=open is refused at composition."""

    # Who may read whose memories within the scope it reads (ACCESS_RULES; ms.pool.access): open: everyone
    # reads everything, as before rules existed | rule: the grant table of a rule file
    # (docs/concepts/access.md). Enforced wherever candidates are drawn: every retriever, short-term memory,
    # memory train's mining and the utility gate's probes.
    name: str = setting("open", choices=ACCESS_RULES)


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
    """What every retriever's settings share: its name, the test questions' retriever, the seed of random
    draws and whether the run keeps what it learned. A retriever with settings of its own declares them in
    a dataclass that extends this one (ms.retrieval.settings: dense's encoder, composite's weights), the
    schema of its option in the `retriever` group (ms.config.options): a key another retriever reads
    (retriever.encoder under retriever=bm25) is refused at composition."""

    # A registered retriever (RETRIEVERS; ms.retrieval): dense: a bi-encoder, fine-tuned by memory train |
    # composite: dense candidates re-ranked by importance, recency and utility | bm25 | random.
    name: str = setting("dense", choices=RETRIEVERS)
    # Test questions retrieve with this instead (bm25 | random | dense_frozen), over the same pool the
    # stream grew: a retriever ablation that holds the pool fixed. None: the stream's retriever.
    at_test: Optional[str] = setting(None, choices=AT_TEST)
    seed: int = 0  # the random retriever's draws, whether it retrieves for the stream or at test (at_test)
    # Keep what the retriever learned in the run folder (retriever/: the fine-tuned encoder, about 87 MB with
    # MiniLM); a retriever that learns nothing keeps nothing. Nothing in ms reads it back: tables, claims and
    # figures come from the run's JSON files. On by default, as a lone run's trained retriever cannot be had
    # without running it again; the *_offline sweeps turn it off (conf/experiment/offline.yaml). Shared, not
    # dense's own: it says what a run keeps rather than how its retriever retrieves, and an experiment that
    # turns it off for all its cells must compose whichever retriever a cell picks (experiment=offline
    # retriever=bm25). An experiment file cannot set a key for some retrievers only: Hydra expands the
    # experiment's defaults list before the retriever group's, so it cannot name a config by that choice.
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
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)  # the `retriever` group; options: RETRIEVERS
    access: AccessConfig = field(default_factory=AccessConfig)  # the `access` group; options: the ACCESS_RULES registry
    poison: PoisonConfig = field(default_factory=PoisonConfig)  # the `poison` group; options: the POISONS registry
    memory: MemoryConfig = field(default_factory=MemoryConfig)  # the `memory` group; options: the POLICIES registry
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
