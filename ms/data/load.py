"""The project's dataset schema: one JSONL file per agent, loaded with line-exact validation, and
the fixed-form checks of the literary agents."""

import json
import logging
import re
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from ms.agents import Agent, agent_sets_defining, default_agents
from ms.common.errors import UserError

log = logging.getLogger(__name__)

SPLITS = ("seed", "stream", "test")
FIELDS = ("id", "agent", "domain", "question", "answer")
UNASSIGNED = "unassigned"  # the importer's file of records it gave no agent: in a data folder, not an agent's
ADD_AGENT = 'add it to the agents config (README: "Adding an agent")'


class DataError(UserError, ValueError):
    """A dataset that breaks the schema; the message names the source and the 1-based line or row.
    Still a ValueError, as it was before UserError existed, for callers that catch that."""


@dataclass
class Example:
    id: str
    agent: str
    domain: str
    question: str
    answer: str
    split: Optional[str] = None  # set only where the source fixes the split (e.g. the paper's files)


def check_record(record: Any, where: str, agent: str | None, agents: Mapping[str, Agent] | None = None) -> str | None:
    """Why `record` breaks the schema, or None. `agent`, when given, is the only agent allowed;
    `agents` are the configured ones (None: the default set)."""
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
    agents = default_agents() if agents is None else agents
    if record["agent"] not in agents:
        return (
            f"{where}: unknown agent {record['agent']!r}, not configured (the agents are: "
            f"{', '.join(agents)}); {ADD_AGENT}"
        )
    expected_domain = agents[record["agent"]].domain
    if record["domain"] != expected_domain:
        return (
            f"{where}: domain {record['domain']!r} does not match agent {record['agent']!r} "
            f"(its domain is {expected_domain!r})"
        )
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


def _parse_lines(path: Path, agent: str | None, agents: Mapping[str, Agent] | None) -> list[dict]:
    """Parse and validate every line ourselves first: `datasets` reports JSON and type errors
    without line numbers, and it would turn a missing field into a silent null."""
    records: list[dict] = []
    first_line_of_id: dict[str, int] = {}
    for where, number, record in json_lines(path):
        problem = check_record(record, where, agent, agents)
        if problem:
            raise DataError(problem)
        if record["id"] in first_line_of_id:
            raise DataError(f"{where}: duplicate id {record['id']!r} (first on line {first_line_of_id[record['id']]})")
        first_line_of_id[record["id"]] = number
        records.append(record)
    return records


@contextmanager
def quiet_datasets(cache: str | None):
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


def load_jsonl(path: str | Path, agent: str | None = None, agents: Mapping[str, Agent] | None = None) -> list[Example]:
    """All examples of one JSONL file, in file order; any schema break raises DataError. `agents`: the
    configured agents (None: the default set)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    records = _parse_lines(path, agent, agents)
    if not records:
        raise DataError(f"{path}: no examples")
    # A throwaway cache: nothing lands in the repo or goes stale in the user's HF cache.
    with tempfile.TemporaryDirectory(prefix="ms-data-") as cache, quiet_datasets(cache) as load_dataset:
        rows = load_dataset("json", data_files=str(path), split="train").to_list()
    if len(rows) != len(records):
        raise DataError(f"{path}: datasets read {len(rows)} rows but the file has {len(records)} examples")
    return [Example(**{key: row[key] for key in FIELDS}, split=row.get("split")) for row in rows]


def load_dir(
    data_dir: str | Path,
    names: Iterable[str] | None = None,
    created_by: str | None = None,
    agents: Mapping[str, Agent] | None = None,
) -> dict[str, list[Example]]:
    """`<agent>.jsonl` for each agent in `names` (default: every file in the folder, each of which must
    belong to a configured agent, or to an agent that another conf/agents option adds: that file is
    left out, with a note). `agents`: the configured agents (None: the default set).
    `created_by`, the command that makes the folder, is named when the folder is missing."""
    data_dir = Path(data_dir)
    agents = default_agents() if agents is None else agents
    if not data_dir.is_dir():
        hint = f"; create it with: {created_by}" if created_by else ""
        raise DataError(f"{data_dir}: no such folder{hint}")
    if names is None:
        stems = sorted(p.stem for p in data_dir.glob("*.jsonl") if p.stem != UNASSIGNED)
        # The data of an agent another agent set adds (data/haiku.jsonl, for with_haiku) sits beside
        # the nine: it is left out with a note. A file no agent set knows is a mistake to report.
        for stem in [s for s in stems if s not in agents]:
            if sets := agent_sets_defining(stem):
                log.warning(
                    "%s left out: agent %r is not in this agent set (it is in %s)",
                    data_dir / f"{stem}.jsonl",
                    stem,
                    ", ".join(f"conf/agents/{s}.yaml" for s in sets),
                )
                stems.remove(stem)
        stray = [s for s in stems if s not in agents]
        if stray:
            raise DataError(
                f"{data_dir}: no configured agent for {', '.join(f'{s}.jsonl' for s in stray)} "
                f"(the agents are: {', '.join(agents)}); {ADD_AGENT}, or move the file away"
            )
        names = [name for name in agents if name in stems]
        if not names:
            raise DataError(f"{data_dir}: no <agent>.jsonl files; the agents are: {', '.join(agents)}")
    loaded = {}
    for name in names:
        if name not in agents:
            raise DataError(
                f"unknown agent {name!r}, not configured (the agents are: {', '.join(agents)}); {ADD_AGENT}"
            )
        path = data_dir / f"{name}.jsonl"
        if not path.is_file():
            raise DataError(f"{path}: missing: the data of agent {name!r} is expected there")
        loaded[name] = load_jsonl(path, agent=name, agents=agents)
    return loaded


def line_numbers(data_dir: str | Path) -> dict[str, str]:
    """ "<agent>.jsonl:<line>" of every example id in the folder, for reports that point at lines."""
    where = {}
    for path in sorted(Path(data_dir).glob("*.jsonl")):
        if path.stem != UNASSIGNED:
            for _, number, record in json_lines(path):
                if isinstance(record, dict) and "id" in record:
                    where[record["id"]] = f"{path.name}:{number}"
    return where


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_dir(data_dir: str | Path, data: dict[str, list[Example]]) -> None:
    """`<agent>.jsonl` per agent; the `split` field is written only where an example has one."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    for agent, examples in data.items():
        write_jsonl(
            data_dir / f"{agent}.jsonl",
            [{k: v for k, v in asdict(e).items() if k != "split" or v is not None} for e in examples],
        )


# --------------------------------------------------------------------------------------------
# Form checks (fixed forms of the literary agents), shared by the CLI, the hygiene report and tests
# --------------------------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LINE_COUNTS = {"sonnet": 14, "limerick": 5}


def form_problem(example: Example) -> str | None:
    """Why the answer breaks its agent's fixed form, or None (agents without a fixed form pass)."""
    lines = [line for line in example.answer.splitlines() if line.strip()]
    if example.agent in _LINE_COUNTS:
        want = _LINE_COUNTS[example.agent]
        return None if len(lines) == want else f"{len(lines)} lines, a {example.agent} has {want}"
    if example.agent == "wuyanlvshi":
        # A line ends at a line break or at Chinese end-of-line punctuation: the paper's poems are
        # written on one line, "xxxxx，xxxxx。xxxxx，..."
        lines = [line for line in re.split(r"[\n，。？！；]", example.answer) if CJK.search(line)]
        widths = [len(CJK.findall(line)) for line in lines]
        if len(lines) != 8 or any(width != 5 for width in widths):
            return f"{len(lines)} lines of {widths} CJK characters, a wuyanlvshi has 8 lines of 5"
    return None
