"""One pass over the composed config, before any model, pool or cache is opened.

Each config dataclass declares the limits of its fields next to them, with `setting(...)` (see
ms.config.fields); a dataclass with rules that span several fields adds a `problems(self)` method
yielding (field, message) pairs. `validate` walks the config along its dataclass types, applies every rule,
adds the checks that look outside the config (data files, writable folders, API keys in the
environment), and raises one ConfigError that lists every violation with its full key. A plan
(`+plan=true`) is checked without what only spending needs, an API key and a pool's DSN: it calls
no model and opens no pool.

Hydra has already checked types and unknown keys at composition (ms.compose makes each of those one
line); this pass checks values.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ms.agents import agent_problems, agents_from
from ms.backbones import backbone_config, can, named_backbones
from ms.config.fields import CHECK
from ms.config.files import DECISIONS_FILE
from ms.errors import UserError
from ms.llm.api import api_key_from_env
from ms.llm.base import engine_problem
from ms.llm.cache import CACHE_FILENAME, damaged_cache_message
from ms.pool import PoolFileError, damaged_pool_message
from ms.retrieval.ann import ann_problem
from ms.scorer import rubric_path

SQLITE_HEADER = b"SQLite format 3\x00"


class ConfigError(UserError):
    """Settings that break their declared limits: one line per violation, each naming its key."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _shown(value: Any) -> str:
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


# Settings only a run that spends needs: a plan reads them nowhere (see the module's docstring).
SPENDING_ONLY = ("pool.dsn",)


def _walk(node: DictConfig, prefix: str, plan: bool = False) -> Iterator[str]:
    """Every violation under `node`, a config node of some dataclass type."""
    kind = OmegaConf.get_type(node)
    if kind is None or not dataclasses.is_dataclass(kind):
        return
    for f in dataclasses.fields(kind):
        key = f"{prefix}{f.name}"
        if OmegaConf.is_missing(node, f.name):
            yield f"{key} is not set: give it a value (it is ??? in the config)"
            continue
        value = node[f.name]
        if isinstance(value, DictConfig):
            yield from _walk(value, key + ".", plan)
            continue
        check = f.metadata.get(CHECK)
        if check is not None:
            yield from (f"invalid setting {key}={_shown(value)}: {problem}" for problem in check.problems(value))
    problems = getattr(kind, "problems", None)
    if problems is not None:  # cross-field rules, read through the node (attribute access only)
        for name, problem in problems(node):
            if plan and f"{prefix}{name}" in SPENDING_ONLY:
                continue
            yield f"invalid setting {prefix}{name}={_shown(node[name])}: {problem}"


def _writable_folder(path: Path) -> Optional[str]:
    """Why files cannot be created in folder `path` (created on first use), or None if they can."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"the folder {existing} is not writable"
    return None


def _not_sqlite(path: Path) -> bool:
    """Whether an existing, non-empty file lacks SQLite's header: the damage seen most, checked
    without opening the file as a database (deeper damage is caught when it is opened)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:  # missing (created on first use) or unreadable (reported when opened)
        return False
    return bool(head) and head != SQLITE_HEADER


def _outside_problems(cfg: DictConfig, plan: bool = False) -> Iterator[str]:
    """Checks that read the file system or other modules: the data, and where files will be written."""
    yield from _agent_problems(cfg, plan)
    data = cfg.data
    running = list(cfg.agents) if data.agents is None else list(data.agents)
    unknown = [a for a in running if a not in cfg.agents]
    if unknown:
        yield (f"invalid setting data.agents: unknown agent(s) {', '.join(unknown)}; the agents are: "
               f"{', '.join(cfg.agents)} (add one to the agents config: README, \"Adding an agent\")")
    elif not running and cfg.agents:  # no agents at all is reported with the agents
        yield "invalid setting data.agents=[]: name at least one agent"
    elif data.get("hf") is None:
        folder = Path(data.dir)
        if not folder.is_dir():
            made_by = data.get("created_by")  # data configs whose folder a command makes (data=paper)
            yield (f"invalid setting data.dir={data.dir}: no such folder (the <agent>.jsonl files are read there)"
                   + (f"; create it with: {made_by}" if made_by else ""))
        else:
            missing = [a for a in running if not (folder / f"{a}.jsonl").is_file()]
            if missing:
                yield (f"invalid setting data.agents: no data file for {', '.join(missing)} in {folder} "
                       f"(expected <agent>.jsonl; set data.dir or data.agents)")
    fractions = list(data.fractions)
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        yield (f"invalid setting data.fractions={_shown(data.fractions)}: must be three non-negative numbers "
               f"(seed, stream, test) summing to 1")
    for cap in ("max_seed", "max_stream", "max_test"):
        if data.get(cap) is not None and data[cap] < 0:
            yield f"invalid setting data.{cap}={data[cap]}: must be at least 0"
    if cfg.pool.backend == "postgres":
        yield from _dsn_problems(cfg.pool.dsn)
    elif cfg.pool.path:
        why = _writable_folder(Path(cfg.pool.path).parent)
        if why:
            yield f"invalid setting pool.path={cfg.pool.path}: {why}; point pool.path at a writable folder"
    why = _writable_folder(Path(cfg.cache_dir))
    if why:
        yield f"invalid setting cache_dir={cfg.cache_dir}: {why}; point cache_dir at a writable folder"
    if cfg.pool.backend == "sqlite" and cfg.pool.path and _not_sqlite(Path(cfg.pool.path)):
        yield damaged_pool_message(Path(cfg.pool.path), "file is not a database")
    if cfg.use_cache and _not_sqlite(Path(cfg.cache_dir) / CACHE_FILENAME):
        yield damaged_cache_message(Path(cfg.cache_dir) / CACHE_FILENAME, "file is not a database")
    if list(cfg.eval.metrics) == ["ref_logprob"] and not unknown:
        yield from _unscorable(cfg, running)
    if cfg.gate.name in ("utility", "both") and not unknown:
        yield from _unmeasurable(cfg, running)
    if cfg.gate.name == "random" and cfg.gate.match and not (Path(cfg.gate.match) / DECISIONS_FILE).is_file():
        yield (f"invalid setting gate.match={cfg.gate.match}: no {DECISIONS_FILE} there; name the folder of a "
               f"finished run to match")
    if cfg.retriever.index == "ann" and (missing := ann_problem()):
        yield f"invalid setting retriever.index=ann: {missing}"


def _dsn_problems(dsn: Optional[str]) -> Iterator[str]:
    """Named without its value: a DSN may hold a password. A missing one is PoolConfig's to report."""
    if not dsn:
        return
    from ms.pool.postgres_backend import dsn_problem  # psycopg is an optional extra

    try:
        problem = dsn_problem(dsn)
    except PoolFileError as missing:
        yield f"invalid setting pool.backend=postgres: {missing}"
        return
    if problem:
        yield f"invalid setting pool.dsn: {problem}"


def _agent_problems(cfg: DictConfig, plan: bool) -> Iterator[str]:
    """The agents' entries, the rubric files they are graded with, and every backbone a role names
    (agents.NAME.backbone, scorer.backbone, train.backbone): a conf/backbone file that passes its checks."""
    found = list(agent_problems(cfg.agents))
    yield from found
    if found:
        return
    agents = agents_from(cfg.agents)
    for agent in agents.values():
        path = rubric_path(agent.rubric)
        if not path.is_file():
            key = "rubric" if cfg.agents[agent.name].rubric else "domain"
            yield (f"invalid setting agents.{agent.name}.{key}={cfg.agents[agent.name][key]}: no rubric file {path} "
                   f"(a domain's rubric is conf/rubric/<domain>.yaml); add it, or set agents.{agent.name}.rubric")
    if not plan:
        yield from _missing_key(cfg.backbone, "")
        yield from _missing_engine(cfg.backbone, "")
    for key, name in named_backbones(cfg, agents):
        try:
            node = backbone_config(cfg, name)
        except UserError as error:
            yield f"invalid setting {key}={name}: {error}"
            continue
        yield from _walk(node, f"{key}={name}: backbone.")
        if not plan:
            yield from _missing_key(node, f"invalid setting {key}={name}: ")
            yield from _missing_engine(node, f"invalid setting {key}={name}: ")


def _missing_engine(backbone: DictConfig, prefix: str) -> Iterator[str]:
    """A local backbone's generation engine must be installed: found missing once the model has
    loaded, it would stop a run whose folder is already made."""
    if backbone.provider == "hf" and (missing := engine_problem(backbone.engine)):
        yield prefix + missing


def _missing_key(backbone: DictConfig, prefix: str) -> Iterator[str]:
    """An API backbone's key must be in the environment now: found missing once the backbone is
    built, it would stop a run that has already opened its pool."""
    if backbone.provider == "hf":
        return
    try:
        api_key_from_env(backbone.api_key_env, backbone.provider)
    except UserError as error:
        yield prefix + str(error)


def _blind(cfg: DictConfig, running: list[str]) -> dict[tuple[str, str], list[str]]:
    """(backbone name, provider) -> the running agents whose backbone cannot score given text."""
    blind: dict[tuple[str, str], list[str]] = {}
    for agent in running:
        try:
            backbone = backbone_config(cfg, cfg.agents[agent].backbone)
            scores = can(cfg, cfg.agents[agent].backbone, "scores_text")
        except UserError:  # reported with the agent's backbone
            continue
        if not scores:
            blind.setdefault((backbone.name, backbone.provider), []).append(agent)
    return blind


def _whose(agents: list[str], running: list[str]) -> str:
    return "" if len(agents) == len(running) else f" (the backbone of {', '.join(agents)})"


def _unscorable(cfg: DictConfig, running: list[str]) -> Iterator[str]:
    """eval.metrics=[ref_logprob] leaves an agent whose backbone cannot score given text with no metric."""
    by_provider: dict[str, list[str]] = {}
    for (_, provider), agents in _blind(cfg, running).items():
        by_provider.setdefault(provider, []).extend(agents)
    for provider, agents in by_provider.items():
        served = (" (or backbone.prompt_logprobs=echo, on a server that returns prompt log-probs)"
                  if provider == "openai" else "")
        yield (f"invalid setting eval.metrics=[ref_logprob]: provider '{provider}' cannot score given text"
               f"{_whose(agents, running)}; use eval.metrics=[bertscore]{served}")


def _unmeasurable(cfg: DictConfig, running: list[str]) -> Iterator[str]:
    """The utility gate scores probe answers on each agent's backbone, so each must score given text."""
    for (name, provider), agents in _blind(cfg, running).items():
        yield (f"invalid setting gate={cfg.gate.name}: backbone '{name}' (provider {provider}) cannot score given "
               f"text{_whose(agents, running)}; use a backbone that can (hf), or backbone.prompt_logprobs=echo "
               f"on a server that returns prompt log-probs")


def problems(cfg: DictConfig, plan: bool = False) -> list[str]:
    """Every violation in `cfg`, one line each, in the order the keys appear; `plan`: for a plan,
    which needs no API key and no pool DSN."""
    found = list(_walk(cfg, "", plan))
    found += _outside_problems(cfg, plan)
    return found


def validate(cfg: DictConfig, plan: bool = False) -> None:
    """Raise ConfigError listing every violation in `cfg`; return quietly when there is none."""
    found = problems(cfg, plan)
    if found:
        raise ConfigError(found)

