"""Importer for any dataset the Hugging Face `datasets` library opens, by column mapping."""

import tempfile
from pathlib import Path
from typing import Mapping

from ms.agents import Agent, default_agents

from .load import DataError, Example, check_record, quiet_datasets


def _hf_builder(path: Path) -> str:
    suffixes = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
    try:
        return suffixes[path.suffix.lower()]
    except KeyError:
        raise DataError(f"{path}: unsupported file type; use one of {', '.join(suffixes)}") from None


def load_hf(
    name_or_path: str,
    *,
    question: str,
    answer: str,
    agent: str | None = None,
    split: str = "train",
    agent_column: str | None = None,
    agents: Mapping[str, Agent] | None = None,
) -> list[Example]:
    """Any dataset `datasets` can open (hub name, folder or local file), mapped onto Example by
    column names. Give `agent` for a single-agent dataset, or `agent_column` naming each row's agent.
    `agents`: the configured agents (None: the default set)."""
    agents = default_agents() if agents is None else agents
    if (agent is None) == (agent_column is None):
        raise DataError(f"{name_or_path}: give exactly one of agent (all rows) or agent_column (per row)")
    path = Path(name_or_path)
    if path.is_file():
        extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
        with tempfile.TemporaryDirectory(prefix="ms-data-") as cache, quiet_datasets(cache) as load_dataset:
            table = load_dataset(_hf_builder(path), data_files={split: str(path)}, split=split, **extra)
    else:
        # Hub downloads are worth keeping, so they go to the user's HF cache (never the repo).
        with quiet_datasets(None) as load_dataset:
            table = load_dataset(name_or_path, split=split)
    wanted = [question, answer] + ([agent_column] if agent_column else [])
    absent = [column for column in wanted if column not in table.column_names]
    if absent:
        raise DataError(
            f"{name_or_path}: no column(s) {', '.join(absent)}; its columns are: {', '.join(table.column_names)}"
        )
    examples = []
    for index, row in enumerate(table):
        name = row[agent_column] if agent_column else agent
        record = {
            "id": f"{name}-hf-{index + 1:05d}",
            "agent": name,
            "domain": agents[name].domain if name in agents else "",
            "question": row[question],
            "answer": row[answer],
        }
        problem = check_record(record, f"{name_or_path} ({split}) row {index + 1}", None, agents)
        if problem:
            raise DataError(problem)
        examples.append(Example(**record))
    return examples
