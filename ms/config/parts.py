"""The registered parts, one registry per kind (ms.config.registry): each variant's name and where it
is implemented. The names are known here, in the config layer, without importing an implementation:
they are the choices of their settings (ms.config.schema), checked before anything loads, and
`load(name)` imports the one a run uses.

A new variant is a module (its class, with the classmethods its kind's base names) and, for a
Hydra group, one config file; its name joins its registry here, through an entry point of group
"ms.<kind>" (ms.config.registry says why), or by `register()` in-process.
"""

from ms.config.registry import Registry

# What admits a new pair: each a ms.gates.base.Gate (conf/gate/<name>.yaml). rubric: the LLM grades the
# pair against its rubric; utility: it joins when it helps its nearest memories' answers (ms.gates.replay);
# both: rubric, then utility; rubric_qdep: rubric, then the answer must be likelier after its own question
# than after others (ms.gates.question_dependence); rubric_genre: rubric, then the answer must be likelier
# after its question than after requests to review a reply to it (ms.gates.genre); all and random: admission controls that judge nothing.
# Each declares its own settings (ms.gates.settings), the schema its conf/gate file is checked against
# (ms.config.options).
GATES = Registry(
    "gate",
    {
        "rubric": "ms.gates.rubric:RubricGate",
        "utility": "ms.gates.utility:UtilityGate",
        "both": "ms.gates.both:BothGate",
        "rubric_qdep": "ms.gates.rubric_qdep:RubricQdepGate",
        "rubric_genre": "ms.gates.rubric_genre:RubricGenreGate",
        "all": "ms.gates.all:AllGate",
        "random": "ms.gates.random:RandomGate",
    },
    key="gate",
    settings={
        "rubric": "ms.gates.settings:RubricSettings",
        "utility": "ms.gates.settings:UtilitySettings",
        "both": "ms.gates.settings:BothSettings",
        "rubric_qdep": "ms.gates.settings:RubricQdepSettings",
        "rubric_genre": "ms.gates.settings:RubricGenreSettings",
        "all": "ms.gates.settings:AllSettings",
        "random": "ms.gates.settings:RandomSettings",
    },
)

# What evaluation measures on each test question: each a ms.metrics.base.Metric (eval.metrics).
# bertscore: P, R, F1 of generated answers against the references; ref_logprob: the reference's mean
# log-prob per token given the agent's prompt, one forward pass, no decoding.
METRICS = Registry(
    "metric",
    {
        "bertscore": "ms.metrics.bertscore:BERTScoreMetric",
        "ref_logprob": "ms.metrics.ref_logprob:RefLogprob",
    },
    key="eval.metrics",
)

# Who runs a backbone: each an ms.llm.base.LM class (backbone.provider), with its own settings
# (ms.llm.settings), the schema its conf/backbone files name.
PROVIDERS = Registry(
    "provider",
    {
        "hf": "ms.llm.hf:HFLM",
        "openai": "ms.llm.openai:OpenAILM",
        "mistral": "ms.llm.mistral:MistralLM",
    },
    key="backbone.provider",
    settings={
        "hf": "ms.llm.settings:HFSettings",
        "openai": "ms.llm.settings:OpenAISettings",
        "mistral": "ms.llm.settings:APISettings",
    },
)

# What does greedy generation for the hf provider (scoring stays on transformers): each a factory of a
# generator, an ms.llm.engine.Engine's `load` (hf's gives None: transformers itself). hf (transformers,
# exact) | llamacpp (the GGUF in-process through llama-cpp-python, several sequences per step) |
# llamacpp-f16 / llamacpp-q4_0 (the same GGUF re-written in f16 or q4_0 weights first:
# ms.llm.llamacpp.WEIGHTS says why) | ct2 (CTranslate2, int8 weights).
ENGINES = Registry(
    "engine",
    {
        "hf": "ms.llm.hf_generation:transformers_generator",
        "llamacpp": "ms.llm.llamacpp:LlamaCppGenerator.load",
        "llamacpp-f16": "ms.llm.llamacpp:LlamaCppGenerator.load",
        "llamacpp-q4_0": "ms.llm.llamacpp:LlamaCppGenerator.load",
        "ct2": "ms.llm.ct2:CT2Generator.load",
    },
    key="backbone.engine",
)

# How memories are found for a query: each a ms.retrieval.base.Retriever class with `build` (retriever.name,
# conf/retriever/<name>.yaml). The encoder-backed ones declare their own settings (ms.retrieval.settings).
RETRIEVERS = Registry(
    "retriever",
    {
        "dense": "ms.retrieval.dense:DenseRetriever",
        "composite": "ms.retrieval.composite:CompositeRetriever",
        "bm25": "ms.retrieval.bm25:BM25Retriever",
        "random": "ms.retrieval.random:RandomRetriever",
    },
    key="retriever.name",
    settings={
        "dense": "ms.retrieval.settings:DenseSettings",
        "composite": "ms.retrieval.settings:CompositeSettings",
    },
)

# How admitted pairs become searchable memories: each a policy class with `build` (memory.policy,
# conf/memory/<policy>.yaml); stm_ltm declares its own settings (ms.retrieval.settings).
POLICIES = Registry(
    "memory policy",
    {
        "plain": "ms.retrieval.memory:PlainPolicy",
        "stm_ltm": "ms.retrieval.memory:StmLtmPolicy",
    },
    key="memory.policy",
    settings={"stm_ltm": "ms.retrieval.settings:StmLtmSettings"},
)

# Where the pool lives: each a ms.pool.backend.Database class with `connect` (pool.backend, chosen by
# pool/backend=NAME, conf/pool/backend/<name>.yaml), with its own settings (ms.pool.settings). sqlite: one
# file, processes on one machine; postgres: a server, processes on several.
POOL_BACKENDS = Registry(
    "pool backend",
    {
        "sqlite": "ms.pool.sqlite_backend:SqliteDatabase",
        "postgres": "ms.pool.postgres_backend:PostgresDatabase",
    },
    key="pool.backend",
    settings={"sqlite": "ms.pool.settings:SqliteSettings", "postgres": "ms.pool.settings:PostgresSettings"},
)

# Who may read whose memories within a scope: each a ms.pool.access.base.AccessRule (access.name,
# conf/access/<name>.yaml). open: everyone reads everything (the default); rule: a grant table by writer
# agent per reader, from a rule file (access.file) that a person writes or ms-data learn-access learns.
# rule declares its own settings (ms.pool.access.settings).
ACCESS_RULES = Registry(
    "access rule",
    {
        "open": "ms.pool.access.open:OpenAccess",
        "rule": "ms.pool.access.table:RuleFileAccess",
    },
    key="access.name",
    settings={"rule": "ms.pool.access.settings:RuleSettings"},
)

# Who else writes into the pool: each a ms.data.poison.Poisoner (poison.name, conf/poison/<name>.yaml). none: no
# one (the default); off_task, on_style, injection: a poisoning writer that asks its victim agent's stream
# questions and answers them with another domain's references, the victim's references of other questions,
# or an instruction carrying a marker string (docs/concepts/poisoning.md, "A poisoned writer");
# self_assessment, answer_plus_assessment, grader_instruction: off_task's answers made to talk to the grader;
# praise_alone, line_plus_praise: off_task's answers made into plain-words praise of what the victim's rubric
# rewards (ms.data.poison_grader; docs/concepts/poisoning.md, "Grader-directed answers", "Plain-words praise").
POISONS = Registry(
    "poison",
    {
        "none": "ms.data.poison:NoPoison",
        "off_task": "ms.data.poison:OffTask",
        "on_style": "ms.data.poison:OnStyle",
        "injection": "ms.data.poison:Injection",
        "self_assessment": "ms.data.poison_grader:SelfAssessment",
        "answer_plus_assessment": "ms.data.poison_grader:AnswerPlusAssessment",
        "grader_instruction": "ms.data.poison_grader:GraderInstruction",
        "praise_alone": "ms.data.poison_grader:PraiseAlone",
        "line_plus_praise": "ms.data.poison_grader:LinePlusPraise",
    },
    key="poison.name",
    # none declares nothing: no writer, no victim (ms.data.poison_settings)
    settings={
        **dict.fromkeys(
            (
                "off_task",
                "on_style",
                "self_assessment",
                "answer_plus_assessment",
                "grader_instruction",
                "praise_alone",
                "line_plus_praise",
            ),
            "ms.data.poison_settings:PoisonerSettings",
        ),
        "injection": "ms.data.poison_settings:InjectionSettings",
    },
)

__all__ = [
    "ACCESS_RULES",
    "ENGINES",
    "GATES",
    "METRICS",
    "POISONS",
    "POLICIES",
    "POOL_BACKENDS",
    "PROVIDERS",
    "RETRIEVERS",
]
