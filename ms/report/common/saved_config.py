"""The settings Hydra saved beside a run (.hydra/config.yaml), typed for what the report reads of them.

The run record (metrics.json, ms.loop.run_record) says what a cell was. The report also needs a few
settings the record leaves out: where the pool lives, the data folder, the prompt template, each agent's
entry. They are read here, once, so that no report module reads the saved file by its keys. A run without
the file, or one from before a setting existed, reads as empty (None, or {}); what a missing setting ran
with is the caller's to say, as it differs by setting.
"""

from collections import defaultdict
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml
from omegaconf import OmegaConf

from ms.agents import Agent, agents_from, default_agents
from ms.common.errors import UserError

SAVED = Path(".hydra") / "config.yaml"


def _mapping(value: Any) -> dict:
    return dict(value) if isinstance(value, Mapping) else {}


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)


@dataclass(frozen=True)
class SavedPool:
    """The `pool` section: its backend, mode, the file it shares (`path`) and `dsn` as written (most often a
    reference to MS_POOL_DSN, never resolved here, so no password is read from it)."""

    backend: Optional[str] = None
    mode: Optional[str] = None
    path: Optional[str] = None
    dsn: Optional[str] = None


@dataclass(frozen=True)
class SavedPoison:
    """The `poison` section: the poisoner's name and the name its memories are stored under."""

    name: Optional[str] = None
    writer: Optional[str] = None


@dataclass(frozen=True)
class SavedConfig:
    """A run's saved settings. `tree` is the whole file, for the settings the report compares as they are
    written (ms.report.sharing.baseline) and the sections it types with today's schema (`typed`)."""

    tree: Mapping[str, Any] = field(default_factory=dict)
    agents: Mapping[str, Any] = field(default_factory=dict)  # agent -> its entry as saved (None: all defaults)
    backbone: Optional[str] = None  # the run's backbone
    pool: SavedPool = SavedPool()
    poison: Optional[SavedPoison] = None  # None: no poison section
    data: Optional[Mapping[str, Any]] = None
    prompt: Mapping[str, Any] = field(default_factory=dict)
    memory_question: Optional[str] = None  # what a memory stores as its question (memory.question)

    @classmethod
    def parse(cls, tree: Any) -> "SavedConfig":
        tree = _mapping(tree)
        pool, poison, data = tree.get("pool"), tree.get("poison"), tree.get("data")
        return cls(
            tree=tree,
            agents=_mapping(tree.get("agents")),
            backbone=_text(_mapping(tree.get("backbone")).get("name")),
            pool=SavedPool(**{f.name: _text(_mapping(pool).get(f.name)) for f in fields(SavedPool)}),
            poison=SavedPoison(_text(poison.get("name")), _text(poison.get("writer")))
            if isinstance(poison, Mapping)
            else None,
            data=dict(data) if isinstance(data, Mapping) else None,
            prompt=_mapping(tree.get("prompt")),
            memory_question=_text(_mapping(tree.get("memory")).get("question")),
        )

    @classmethod
    def of(cls, run_dir: Path) -> "SavedConfig":
        """The run folder's saved settings; empty for a folder without them."""
        path = Path(run_dir) / SAVED
        if not path.exists():
            return cls()
        try:
            return cls.parse(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError) as error:
            raise UserError(f"{path}: not a readable Hydra config ({error})") from None

    def entry(self, agent: str) -> Mapping[str, Any]:
        """The agent's saved entry ({} where it has none, or it is not a section)."""
        return _mapping(self.agents.get(agent))

    def run_agents(self) -> dict[str, Agent]:
        """The agents the run ran: its agents group, else the default agents (runs from before the agents
        were a config group saved none)."""
        return agents_from(self.agents) if self.agents else default_agents()

    def agent_backbones(self, default: str) -> dict[str, str]:
        """agent -> the backbone it ran on: its own entry's, else the run's, else `default`."""
        fallback = self.backbone or default
        own = {a: str(self.entry(a)["backbone"]) for a in self.agents if self.entry(a).get("backbone")}
        return defaultdict(lambda: fallback, own)

    def agent_domains(self) -> dict[str, Optional[str]]:
        """agent -> its domain, as the run's agents group names it (else the default agents')."""
        named = {a: self.entry(a).get("domain") for a, e in self.agents.items() if e is None or isinstance(e, Mapping)}
        return named or {a.name: a.domain for a in default_agents().values()}

    def setting(self, dotted: str) -> Any:
        """A setting as written, by its dotted key; None where the file has no such key."""
        value: Any = self.tree
        for key in dotted.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        return value

    def typed(self, section: str, schema: type) -> Any:
        """The section as today's `schema` (a dataclass) types it, interpolations resolved against the whole
        file: keys the schema has dropped since are left out, and keys added since take their defaults,
        which are what the run, predating them, ran with."""
        found = OmegaConf.create(dict(self.tree)).get(section)
        saved = OmegaConf.to_container(found, resolve=True) if found is not None else {}
        known = {f.name for f in fields(schema)}
        return OmegaConf.merge(OmegaConf.structured(schema), {k: v for k, v in saved.items() if k in known})
