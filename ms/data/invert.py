"""Interactive learning's question generator: an agent reads an answer and writes the question
it answers, so a stream can grow from answers alone (`ms-data invert`)."""

from pathlib import Path
from typing import Mapping, Sequence

from ms.agents import Agent, chat, default_agents
from ms.data import DataError, Example, json_lines
from ms.llm import LM

INVERT_PROMPT = (
    "Below is an answer that you wrote earlier.\n\n{answer}\n\n"
    "Write the question or request that this answer responds to, as the user would have asked it. "
    "Reply with that question only."
)


def read_answers(
    path: str | Path, agent: str | None = None, agents: Mapping[str, Agent] | None = None
) -> list[tuple[str, str, str]]:
    """(id, agent, answer) for each line of a JSONL file; a line needs `answer`, and `agent` unless
    one is given for the whole file. Errors name the file and line. `agents`: the configured agents
    (None: the default set)."""
    agents = default_agents() if agents is None else agents
    rows = []
    for where, number, record in json_lines(path):
        answer = record.get("answer") if isinstance(record, dict) else None
        if not isinstance(answer, str) or not answer.strip():
            raise DataError(f"{where}: needs a non-empty string 'answer'")
        name = record.get("agent") or agent
        if name not in agents:
            raise DataError(
                f"{where}: unknown or missing agent {name!r} (the agents are: {', '.join(agents)}); "
                f"give --agent or an 'agent' field"
            )
        rows.append((str(record.get("id") or f"{Path(path).stem}-{number}"), name, answer))
    return rows


def invert(
    lm: LM, rows: Sequence[tuple[str, str, str]], agents: Mapping[str, Agent] | None = None
) -> tuple[list[Example], list[str]]:
    """New stream examples, and the ids whose generated question came back empty."""
    agents = default_agents() if agents is None else agents
    with lm.acting_as("invert"):
        questions = lm.generate([chat(agents[agent], INVERT_PROMPT.format(answer=answer)) for _, agent, answer in rows])
    made, empty = [], []
    for (source_id, agent, answer), question in zip(rows, questions):
        if not question.strip():
            empty.append(source_id)
            continue
        made.append(
            Example(
                id=f"{source_id}-inv",
                agent=agent,
                domain=agents[agent].domain,
                question=question.strip(),
                answer=answer,
                split="stream",
            )
        )
    return made, empty
