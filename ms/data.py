"""Question-answer datasets: loading with line-exact validation, deterministic per-agent splits,
the Hydra data config, and an importer for the paper authors' repository layout."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from omegaconf import MISSING

from ms.agents import AGENTS, DOMAINS

SPLITS = ("seed", "stream", "test")
FIELDS = ("id", "agent", "domain", "question", "answer")


class DataError(ValueError):
    """A dataset that breaks the schema; the message names the source and the 1-based line or row."""


@dataclass
class Example:
    id: str
    agent: str
    domain: str
    question: str
    answer: str
    split: Optional[str] = None  # set only where the source fixes the split (e.g. the paper's files)


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------

def _check_record(record: Any, where: str, agent: str | None) -> str | None:
    """Why `record` breaks the schema, or None. `agent`, when given, is the only agent allowed."""
    if not isinstance(record, dict):
        return f"{where}: expected a JSON object, got {type(record).__name__}"
    missing = [key for key in FIELDS if key not in record]
    if missing:
        return f"{where}: missing field(s) {', '.join(missing)}"
    unknown = sorted(set(record) - set(FIELDS) - {"split"})
    if unknown:
        return f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}, split"
    split = record.get("split")
    if split is not None and split not in SPLITS:
        return f"{where}: split must be one of {', '.join(SPLITS)} or absent, got {split!r}"
    for key in FIELDS:
        value = record[key]
        if not isinstance(value, str):
            return f"{where}: field '{key}' must be a string, got {type(value).__name__}"
        # Stream items are answered live, so the paper's problem files may carry no answer.
        if not value.strip() and not (key == "answer" and split == "stream"):
            return f"{where}: field '{key}' is empty"
    if record["agent"] not in AGENTS:
        return f"{where}: unknown agent {record['agent']!r}; the agents are: {', '.join(AGENTS)}"
    expected_domain = AGENTS[record["agent"]].domain
    if record["domain"] != expected_domain:
        return (f"{where}: domain {record['domain']!r} does not match agent {record['agent']!r} "
                f"(its domain is {expected_domain!r})")
    if agent is not None and record["agent"] != agent:
        return f"{where}: agent {record['agent']!r} in the file of agent {agent!r}"
    return None


def json_lines(path: str | Path) -> Iterator[tuple[str, int, Any]]:
    """("file:line", line number, parsed JSON) for every non-blank line; malformed JSON is a
    DataError naming the file and line (numbers count blank lines too, as editors do)."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield where, number, json.loads(line.rstrip("\r\n"))  # keeps error columns on this line
            except json.JSONDecodeError as err:
                raise DataError(f"{where}: malformed JSON ({err.msg} at column {err.colno})") from None


def _parse_lines(path: Path, agent: str | None) -> list[dict]:
    """Parse and validate every line ourselves first: `datasets` reports JSON and type errors
    without line numbers, and it would turn a missing field into a silent null."""
    records: list[dict] = []
    first_line_of_id: dict[str, int] = {}
    for where, number, record in json_lines(path):
        problem = _check_record(record, where, agent)
        if problem:
            raise DataError(problem)
        if record["id"] in first_line_of_id:
            raise DataError(f"{where}: duplicate id {record['id']!r} (first on line "
                            f"{first_line_of_id[record['id']]})")
        first_line_of_id[record["id"]] = number
        records.append(record)
    return records


@contextmanager
def _quiet_datasets(cache: str | None):
    """`datasets.load_dataset` without progress bars or info logs, caching into `cache` (None: the
    user's HF cache); the caller's settings come back afterwards."""
    import datasets

    bars_were_on, verbosity = datasets.is_progress_bar_enabled(), datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        yield partial(datasets.load_dataset, cache_dir=cache, keep_in_memory=True)
    finally:
        datasets.logging.set_verbosity(verbosity)
        if bars_were_on:
            datasets.enable_progress_bars()


def load_jsonl(path: str | Path, agent: str | None = None) -> list[Example]:
    """All examples of one JSONL file, in file order; any schema break raises DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    records = _parse_lines(path, agent)
    if not records:
        raise DataError(f"{path}: no examples")
    # A throwaway cache: nothing lands in the repo or goes stale in the user's HF cache.
    with tempfile.TemporaryDirectory(prefix="ms-data-") as cache, _quiet_datasets(cache) as load_dataset:
        rows = load_dataset("json", data_files=str(path), split="train").to_list()
    if len(rows) != len(records):
        raise DataError(f"{path}: datasets read {len(rows)} rows but the file has {len(records)} examples")
    return [Example(**{key: row[key] for key in FIELDS}, split=row.get("split")) for row in rows]


def load_dir(data_dir: str | Path, agents: Iterable[str] | None = None) -> dict[str, list[Example]]:
    """`<agent>.jsonl` for each asked agent (default: every agent with a file in the folder)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: no such folder")
    if agents is None:
        agents = [name for name in AGENTS if (data_dir / f"{name}.jsonl").is_file()]
        if not agents:
            raise DataError(f"{data_dir}: no <agent>.jsonl files; the agents are: {', '.join(AGENTS)}")
    loaded = {}
    for name in agents:
        if name not in AGENTS:
            raise DataError(f"unknown agent {name!r}; the agents are: {', '.join(AGENTS)}")
        path = data_dir / f"{name}.jsonl"
        if not path.is_file():
            raise DataError(f"{path}: missing: the data of agent {name!r} is expected there")
        loaded[name] = load_jsonl(path, agent=name)
    return loaded


def _hf_builder(path: Path) -> str:
    suffixes = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
    try:
        return suffixes[path.suffix.lower()]
    except KeyError:
        raise DataError(f"{path}: unsupported file type; use one of {', '.join(suffixes)}") from None


def load_hf(name_or_path: str, *, question: str, answer: str, agent: str | None = None,
            split: str = "train", agent_column: str | None = None) -> list[Example]:
    """Any dataset `datasets` can open (hub name, folder or local file), mapped onto Example by
    column names. Give `agent` for a single-agent dataset, or `agent_column` naming each row's agent."""
    if (agent is None) == (agent_column is None):
        raise DataError(f"{name_or_path}: give exactly one of agent (all rows) or agent_column (per row)")
    path = Path(name_or_path)
    if path.is_file():
        extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
        with tempfile.TemporaryDirectory(prefix="ms-data-") as cache, _quiet_datasets(cache) as load_dataset:
            table = load_dataset(_hf_builder(path), data_files={split: str(path)}, split=split, **extra)
    else:
        # Hub downloads are worth keeping, so they go to the user's HF cache (never the repo).
        with _quiet_datasets(None) as load_dataset:
            table = load_dataset(name_or_path, split=split)
    wanted = [question, answer] + ([agent_column] if agent_column else [])
    absent = [column for column in wanted if column not in table.column_names]
    if absent:
        raise DataError(f"{name_or_path}: no column(s) {', '.join(absent)}; "
                        f"its columns are: {', '.join(table.column_names)}")
    examples = []
    for index, row in enumerate(table):
        name = row[agent_column] if agent_column else agent
        record = {"id": f"{name}-hf-{index + 1:05d}", "agent": name,
                  "domain": AGENTS[name].domain if name in AGENTS else "",
                  "question": row[question], "answer": row[answer]}
        problem = _check_record(record, f"{name_or_path} ({split}) row {index + 1}", None)
        if problem:
            raise DataError(problem)
        examples.append(Example(**record))
    return examples


# --------------------------------------------------------------------------------------------
# Form checks (fixed forms of the literary agents), shared by the CLI and the tests
# --------------------------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LINE_COUNTS = {"sonnet": 14, "limerick": 5}


def form_problem(example: Example) -> str | None:
    """Why the answer breaks its agent's fixed form, or None (agents without a fixed form pass)."""
    lines = [line for line in example.answer.splitlines() if line.strip()]
    if example.agent in _LINE_COUNTS:
        want = _LINE_COUNTS[example.agent]
        return None if len(lines) == want else f"{len(lines)} lines, a {example.agent} has {want}"
    if example.agent == "wuyanlvshi":
        widths = [len(_CJK.findall(line)) for line in lines]
        if len(lines) != 8 or any(width != 5 for width in widths):
            return f"{len(lines)} lines of {widths} CJK characters, a wuyanlvshi has 8 lines of 5"
    return None


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------

@dataclass
class Splits:
    seed: list[Example]  # the part that seeds the pool
    stream: list[Example]  # queries answered live, growing the pool
    test: list[Example]


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be three non-negative numbers (seed, stream, test) summing to 1, "
                         f"got {list(fractions)}")
    return fractions


def _part_sizes(n: int, fractions: tuple[float, float, float]) -> list[int]:
    """Largest-remainder rounding, so the sizes always add up to n and follow the fractions."""
    exact = [n * f for f in fractions]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(3), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[:n - sum(sizes)]:
        sizes[i] += 1
    return sizes


def _order_key(seed: int, example_id: str) -> str:
    # A hash of the id alone (not a shuffle of the list) keeps each example's place independent of
    # file order and of every other agent's data.
    return hashlib.sha256(f"{seed}\0{example_id}".encode()).hexdigest()


def split_examples(examples: Sequence[Example], fractions: Sequence[float] = (0.2, 0.4, 0.4),
                   seed: int = 0) -> Splits:
    """Seed/stream/test parts, disjoint and covering all examples, decided per agent. Examples
    that carry a split keep it; the others are cut by `fractions` in hash order."""
    fractions = _check_fractions(fractions)
    parts: dict[str, list[Example]] = {name: [] for name in SPLITS}
    by_agent: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        by_agent[example.agent].append(example)
    for group in by_agent.values():
        for example in group:
            if example.split is not None:
                parts[example.split].append(example)
        free = sorted((e for e in group if e.split is None), key=lambda e: _order_key(seed, e.id))
        n_seed, n_stream, _ = _part_sizes(len(free), fractions)
        parts["seed"] += free[:n_seed]
        parts["stream"] += free[n_seed:n_seed + n_stream]
        parts["test"] += free[n_seed + n_stream:]
    return Splits(**parts)


# --------------------------------------------------------------------------------------------
# Hydra config
# --------------------------------------------------------------------------------------------

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
    agents: list[str] = field(default_factory=lambda: [a for names in DOMAINS.values() for a in names])
    fractions: list[float] = field(default_factory=lambda: [0.2, 0.4, 0.4])
    split_seed: int = 0
    # Per-agent caps for quick runs: the first n of each part after splitting.
    max_seed: Optional[int] = None
    max_stream: Optional[int] = None
    max_test: Optional[int] = None
    hf: Optional[HFDataConfig] = None  # when set, read this dataset instead of `dir`


def load_splits(cfg: DataConfig) -> dict[str, Splits]:
    """The splits of every configured agent. From `hf`, only the configured agents that occur in
    the dataset are returned; from `dir`, every configured agent must have its file."""
    agents = list(cfg.agents)
    if cfg.hf is not None:
        rows = load_hf(cfg.hf.name, question=cfg.hf.question, answer=cfg.hf.answer, agent=cfg.hf.agent,
                       split=cfg.hf.split, agent_column=cfg.hf.agent_column)
        by_agent = {name: [r for r in rows if r.agent == name] for name in agents}
        by_agent = {name: group for name, group in by_agent.items() if group}
        if not by_agent:
            raise DataError(f"{cfg.hf.name}: none of the configured agents ({', '.join(agents)}) occurs in it")
    else:
        by_agent = load_dir(cfg.dir, agents)

    def cap(part: list[Example], limit: Optional[int]) -> list[Example]:
        return part if limit is None else part[:limit]

    result = {}
    for name, group in by_agent.items():
        parts = split_examples(group, cfg.fractions, cfg.split_seed)
        result[name] = Splits(cap(parts.seed, cfg.max_seed), cap(parts.stream, cfg.max_stream),
                              cap(parts.test, cfg.max_test))
    return result


# --------------------------------------------------------------------------------------------
# Importer for the paper authors' repository
# --------------------------------------------------------------------------------------------
# Layout: one folder per domain ("Literal Creation", "Logic Problem_Solving", "Plan Generation")
# plus "OnePool", each with a pool file (seed), a problem file (stream) and one test file per agent.
# Every line is {"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}.
#
# Test files name their agent. Pool and problem files mix a domain's agents (OnePool: all nine),
# so each item is assigned by the first rule that decides:
#   1. script:  Chinese characters in the question or answer -> wuyanlvshi;
#   2. name:    the question names exactly one candidate's form (sonnet, limerick, riddle, ...);
#   3. shape:   an answer of 5 lines -> limerick, of 14 lines -> sonnet;
#   4. words:   the candidate whose vocabulary shares the most words with the item, strictly more
#               than any other; a vocabulary is a few topical keywords plus the words that occur in
#               that agent's test items and in no other candidate's.
# Items no rule decides go to unassigned.jsonl with the reason, and are counted in the report.

_FOLDER_DOMAINS = (("liter", "literary"), ("logic", "logic"), ("plan", "plan"),
                   ("onepool", None), ("single", None), ("total", None))
_TEST_ALIASES = {"lvshi": "wuyanlvshi", "wuyan": "wuyanlvshi", "wuyanlvshi": "wuyanlvshi"}
_FORM_NAMES = {
    "wuyanlvshi": r"五言|律诗|wuyan|regulated verse",
    "limerick": r"limericks?",
    "sonnet": r"sonnets?",
    "puzzle": r"puzzles?|lateral[- ]thinking",
    "riddle": r"riddles?|what am i",
    "pun": r"puns?|wordplay",
    "study": r"study plan|studying|learn(?:ing)?",
    "travel": r"travel|trip|itinerary|vacation|holiday",
    "fitness": r"fitness|workouts?|exercises?",
}
_TOPIC_WORDS = {
    "puzzle": {"why", "died", "dead", "police", "reason", "killed", "suddenly"},
    "riddle": {"has", "gets", "never", "always", "keys", "am"},
    "pun": {"call", "favorite", "joke", "say", "said"},
    "study": {"exam", "exams", "learn", "study", "course", "skills", "practice", "review"},
    "travel": {"visit", "explore", "trip", "tour", "beaches", "itinerary", "city", "travel"},
    "fitness": {"workout", "exercise", "strength", "cardio", "muscle", "weight", "training", "reps"},
}


def _folder_domain(name: str) -> tuple[bool, str | None]:
    """(recognized, domain); domain None means the folder mixes all nine agents."""
    key = re.sub(r"[^a-z]", "", name.lower())
    for marker, domain in _FOLDER_DOMAINS:
        if marker in key:
            return True, domain
    return False, None


def _test_agent(stem: str) -> str | None:
    """The agent a file like `punsTest` or `LvshiTest` is for, or None."""
    prefix = re.sub(r"[^a-z]", "", stem.lower())[: -len("test")]
    if prefix in _TEST_ALIASES:
        return _TEST_ALIASES[prefix]
    for candidate in (prefix, prefix[:-1]):  # plural forms: puns, riddles, puzzles
        if candidate in AGENTS:
            return candidate
    return None


def _file_role(stem: str) -> str | None:
    low = stem.lower()
    if low.endswith("test"):
        return "test"
    if "pool" in low or "train" in low:  # older versions of the repository called the pool *Train
        return "seed"
    if "problem" in low:
        return "stream"
    return None


def _read_messages(path: Path, split: str) -> list[tuple[int, str, str]]:
    """(line number, question, answer) per line; an answer is required except in stream files."""
    items = []
    for where, number, record in json_lines(path):
        try:
            by_role = {m["role"]: m["content"] for m in record["messages"]}
        except (KeyError, TypeError) as err:
            raise DataError(f"{where}: malformed line, expected {{\"messages\": [{{\"role\", \"content\"}}, "
                            f"...]}} ({type(err).__name__}: {err})") from None
        question, answer = by_role.get("user"), by_role.get("assistant", "")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where}: no user message with the question")
        if not isinstance(answer, str) or (split != "stream" and not answer.strip()):
            raise DataError(f"{where}: no assistant message with the answer")
        items.append((number, question.strip(), answer.strip()))
    return items


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _vocabularies(candidates: Sequence[str], tests: dict[str, list[str]]) -> dict[str, set[str]]:
    seen = {name: set().union(*map(_words, tests.get(name, []))) for name in candidates}
    vocab = {}
    for name in candidates:
        others = set().union(*(seen[other] for other in candidates if other != name))
        vocab[name] = (seen[name] - others) | _TOPIC_WORDS.get(name, set())
    return vocab


def _assign(question: str, answer: str, candidates: Sequence[str],
            vocab: dict[str, set[str]]) -> tuple[str | None, str]:
    """(agent, rule) or (None, why not)."""
    if "wuyanlvshi" in candidates and _CJK.search(question + answer):
        return "wuyanlvshi", "script"
    named = [name for name in candidates if re.search(rf"\b(?:{_FORM_NAMES[name]})\b", question, re.I)]
    if len(named) == 1:
        return named[0], "name"
    lines = len([line for line in answer.splitlines() if line.strip()])
    for name, count in _LINE_COUNTS.items():
        if name in candidates and lines == count:
            return name, "shape"
    words = _words(question + " " + answer)
    scores = sorted(((len(words & vocab[name]), name) for name in candidates), reverse=True)
    (best, winner), (runner_up, second) = scores[0], scores[1]
    if best > runner_up:
        return winner, "words"
    if best == 0:
        return None, "no rule matched"
    return None, f"tie: {winner} and {second} share {best} words each with it"


@dataclass
class _Source:
    path: Path
    split: str
    candidates: tuple[str, ...]  # the agents an item of this file may belong to
    agent: str | None = None  # fixed by the file name (test files)


def _find_sources(root: Path) -> tuple[list[_Source], list[str]]:
    """Every recognized file (domain folders before the mixed OnePool), and what was skipped."""
    sources, skipped = [], []
    folders = sorted(f for f in root.iterdir() if f.is_dir() and not f.name.startswith("."))
    recognized = []
    for folder in folders:
        known, domain = _folder_domain(folder.name)
        if known:
            recognized.append((domain is None, folder.name, folder, domain))
        else:
            skipped.append(f"{folder.name}/ (not a domain folder)")
    for _, _, folder, domain in sorted(recognized):
        candidates = DOMAINS[domain] if domain else tuple(AGENTS)
        for path in sorted(p for p in folder.iterdir() if p.suffix.lower() == ".jsonl"):
            role = _file_role(path.stem)
            agent = _test_agent(path.stem) if role == "test" else None
            if role is None or (role == "test" and agent is None):
                skipped.append(f"{folder.name}/{path.name} (not a pool, problem or <agent>Test file)")
                continue
            sources.append(_Source(path, role, candidates, agent))
    if not sources:
        raise DataError(f"{root}: no pool, problem or test files in any domain folder")
    return sources, skipped


def import_paper(src: str | Path, out: str | Path) -> dict:
    """Convert the authors' repository at `src` into `out/<agent>.jsonl` (with the paper's split
    kept in `split`), `out/unassigned.jsonl` and `out/import_report.json`; returns the report."""
    root, out = Path(src), Path(out)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder")
    sources, skipped = _find_sources(root)
    items = {id(source): _read_messages(source.path, source.split) for source in sources}

    test_questions: dict[str, list[str]] = defaultdict(list)
    for source in sources:
        if source.agent:
            test_questions[source.agent] += [q + " " + a for _, q, a in items[id(source)]]

    by_agent: dict[str, list[Example]] = defaultdict(list)
    unassigned, rules, duplicates = [], Counter(), Counter()
    seen: set[tuple[str, str, str]] = set()
    numbering: Counter = Counter()
    for source in sources:
        vocab = _vocabularies(source.candidates, test_questions)
        relative = source.path.relative_to(root).as_posix()
        for line, question, answer in items[id(source)]:
            # OnePool repeats the domain folders' items; the first copy wins, the rest are counted.
            key = (source.split, question, answer)
            if key in seen:
                duplicates[relative] += 1
                continue
            seen.add(key)
            if source.agent:
                agent, rule = source.agent, "file name"
            else:
                agent, rule = _assign(question, answer, source.candidates, vocab)
            if agent is None:
                unassigned.append({"file": relative, "line": line, "split": source.split,
                                   "question": question, "answer": answer, "reason": rule})
                continue
            rules[rule] += 1
            numbering[agent, source.split] += 1
            by_agent[agent].append(Example(
                id=f"{agent}-paper-{source.split}-{numbering[agent, source.split]:03d}", agent=agent,
                domain=AGENTS[agent].domain, question=question, answer=answer, split=source.split))

    out.mkdir(parents=True, exist_ok=True)
    for agent, examples in by_agent.items():
        _write_jsonl(out / f"{agent}.jsonl", [asdict(e) for e in examples])
    _write_jsonl(out / "unassigned.jsonl", unassigned)
    load_dir(out, list(by_agent))  # what we wrote must pass the loader's own schema checks
    report = {
        "source": str(root),
        "counts": {agent: {split: numbering[agent, split] for split in SPLITS} for agent in AGENTS},
        "total": sum(numbering.values()),
        "unassigned": len(unassigned),
        "unassigned_by_reason": dict(Counter(u["reason"].split(":")[0] for u in unassigned)),
        "assigned_by_rule": dict(rules),
        "duplicates_skipped": dict(duplicates),
        # The authors' test files repeat some pool items; kept as published, but worth knowing.
        "test_questions_also_in_seed": {agent: n for agent in AGENTS if (n := _overlap(by_agent.get(agent, [])))},
        "skipped_files": skipped,
    }
    (out / "import_report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    return report


def _overlap(examples: list[Example]) -> int:
    seed = {e.question for e in examples if e.split == "seed"}
    return sum(e.question in seed for e in examples if e.split == "test")


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
