"""The agents: what each is asked to do, in which domain, graded by which rubric, on which backbone,
and how it prompts its backbone.

Agents are configuration, not code: the `agents` config group maps each agent's name to an
`AgentConfig` entry. Its default, conf/agents/paper.yaml, holds the paper's nine agents; tools that
run without Hydra (ms-data, ms-report, the importers) read that same file through `default_agents`.
"""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ms.common.errors import UserError, one_line
from ms.config.schema import AgentConfig
from ms.config.store import CONF_DIR
from ms.llm.base import Message
from ms.pool import scope_for

AGENTS_DIR = Path(CONF_DIR) / "agents"
DEFAULT_AGENTS = "paper"  # the group's default option, AGENTS_DIR / "paper.yaml"
SINGLE_SCOPE = "single"  # the Single-pool's scope and rubric, so no domain may take the name
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # agent and domain names become file names


@dataclass(frozen=True)
class Agent:
    name: str
    domain: str
    instruction: str  # sent as the system message
    rubric: str  # what its pairs are graded with in a domain pool
    backbone: Optional[str] = None  # a conf/backbone name; None: the run's default backbone


def _plain(entries: Mapping[str, Any]) -> dict[str, dict]:
    """Entries as plain dicts, interpolations resolved (a twin's `instruction: ${agents.NAME.instruction}`);
    an unset field reads as MISSING ("???")."""
    if OmegaConf.is_config(entries):
        return OmegaConf.to_container(entries, resolve=True)
    return {k: dict(v) for k, v in entries.items()}


def agent_problems(entries: Mapping[str, Any], key: str = "agents") -> Iterator[str]:
    """What keeps config entries from being agents, one line each naming its key. Rubric and
    backbone files are checked by their readers (ms.gates.scorer, ms.llm.backbones)."""
    entries = _plain(entries)
    if not entries:
        yield f"invalid setting {key}: no agents are configured, so no domain has an agent; add one (see README)"
    for name, entry in entries.items():
        where = f"{key}.{name}"
        if not _NAME.fullmatch(name):
            yield f"invalid setting {where}: an agent's name is letters, digits, _ and - (it names <agent>.jsonl)"
        for field in ("domain", "instruction"):
            if entry.get(field) in (None, "", MISSING):
                yield f"{where}.{field} is not set: every agent needs a {field}"
        domain = entry.get("domain")
        if domain in (None, "", MISSING):
            continue
        if not _NAME.fullmatch(domain):
            yield f"invalid setting {where}.domain={domain}: a domain's name is letters, digits, _ and -"
        elif domain == SINGLE_SCOPE:
            yield (
                f"invalid setting {where}.domain={domain}: '{SINGLE_SCOPE}' names the Single-pool; "
                f"give the domain another name"
            )


def agents_from(entries: Mapping[str, Any]) -> dict[str, Agent]:
    """Agents from config entries (name -> AgentConfig fields), in the entries' order. Entries
    should have passed `agent_problems`; any that did not is a UserError here."""
    found = list(agent_problems(entries))
    if found:
        raise UserError("\n".join(found))
    return {
        name: Agent(
            name=name,
            domain=e["domain"],
            instruction=e["instruction"],
            rubric=e.get("rubric") or e["domain"],
            backbone=e.get("backbone") or None,
        )
        for name, e in _plain(entries).items()
    }


@cache
def _load_default() -> tuple[Agent, ...]:
    path = AGENTS_DIR / f"{DEFAULT_AGENTS}.yaml"
    try:
        entries = OmegaConf.merge(DictConfig({}, key_type=str, element_type=AgentConfig), OmegaConf.load(path))
    except (OSError, OmegaConfBaseException) as err:
        raise UserError(one_line(f"the agent config {path} cannot be read: {err}")) from err
    try:
        return tuple(agents_from(entries).values())
    except UserError as err:
        raise UserError(f"{path}: {err}") from None


def default_agents() -> dict[str, Agent]:
    """The `agents` group's default (the paper's nine agents), for tools that run without Hydra."""
    return {a.name: a for a in _load_default()}


def agent_sets_defining(name: str) -> list[str]:
    """The conf/agents options whose own entries define an agent called `name` (an option that
    extends another, as with_haiku extends paper, defines only the agents it adds)."""
    sets = []
    for path in sorted(AGENTS_DIR.glob("*.yaml")):
        try:
            entries = OmegaConf.load(path)
        except (OSError, OmegaConfBaseException) as err:
            raise UserError(one_line(f"the agent config {path} cannot be read: {err}")) from err
        if isinstance(entries, DictConfig) and name in entries and name != "defaults":
            sets.append(path.stem)
    return sets


def domains(agents: Mapping[str, Agent]) -> dict[str, tuple[str, ...]]:
    """domain -> its agents, both in the order the agents are configured."""
    out: dict[str, tuple[str, ...]] = {}
    for agent in agents.values():
        out[agent.domain] = out.get(agent.domain, ()) + (agent.name,)
    return out


def seed_memories(agent: Agent, pairs: Sequence[Any], pool_mode: str) -> list[dict[str, Any]]:
    """The pool rows an agent's seed pairs (each with `question` and `answer`) become, in the scope
    `pool_mode` gives its domain: how a run seeds its pool, and the gate check its own."""
    scope = scope_for(agent.domain, pool_mode)
    return [
        {
            "scope": scope,
            "agent": agent.name,
            "domain": agent.domain,
            "question": p.question,
            "answer": p.answer,
            "origin": "seed",
        }
        for p in pairs
    ]


@dataclass(frozen=True)
class PromptTemplate:
    """How retrieved memories become in-context examples (the paper's `Q->A | ... | instruction: X`)."""

    example: str
    separator: str
    with_examples: str
    zero_shot: str
    system: bool = True  # send the agent's instruction as a system message before the prompt

    def render(self, query: str, memories: Sequence[Mapping[str, str]] = ()) -> str:
        if not memories:
            return self.zero_shot.format(query=query)
        examples = self.separator.join(
            self.example.format(question=m["question"], answer=m["answer"]) for m in memories
        )
        return self.with_examples.format(examples=examples, query=query)


def chat(agent: Agent, user_prompt: str, system: bool = True) -> list[Message]:
    """The agent's chat; without `system`, the user prompt alone, as the authors' code sent it."""
    return ([{"role": "system", "content": agent.instruction}] if system else []) + [
        {"role": "user", "content": user_prompt}
    ]
