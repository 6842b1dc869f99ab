"""One pass over the composed config, before any model, pool or cache is opened.

Each config dataclass declares the limits of its fields next to them, with `setting(...)` (see
ms.config.fields); a dataclass with rules that span several fields adds a `problems(self)` method
yielding (field, message) pairs. `validate` walks the config along its dataclass types, applies every rule,
adds the checks that look outside the config (data files, writable folders, API keys in the
environment), and raises one ConfigError that lists every violation with its full key. A plan
(`+plan=true`) is checked without what only spending needs, an API key and a pool's DSN: it calls
no model and opens no pool.

Hydra has already checked types and unknown keys at composition (ms.cli.compose makes each of those one
line); this pass checks values.
"""

import dataclasses
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ms.agents import agent_problems, agents_from
from ms.common.errors import UserError
from ms.config.fields import CHECK
from ms.config.files import not_sqlite, writable_folder
from ms.config.options import OWNED, owned, schema_name, settings_of
from ms.config.parts import ACCESS_RULES, GATES, METRICS, POISONS, POOL_BACKENDS
from ms.data.splits import FRACTIONS_RULE, bad_fractions
from ms.gates.scorer import rubric_path
from ms.llm import offered_variant
from ms.llm.api import api_key_from_env
from ms.llm.backbones import Backbones
from ms.llm.cache import CACHE_FILENAME, damaged_cache_message
from ms.llm.engine_packages import engine_problem


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


def _outside_problems(cfg: DictConfig, plan: bool = False) -> Iterator[str]:
    """Checks that read the file system or other modules: the data, and where files will be written."""
    yield from _agent_problems(cfg, plan)
    data = cfg.data
    running = list(cfg.agents) if data.agents is None else list(data.agents)
    unknown = [a for a in running if a not in cfg.agents]
    if unknown:
        yield (
            f"invalid setting data.agents: unknown agent(s) {', '.join(unknown)}; the agents are: "
            f'{", ".join(cfg.agents)} (add one to the agents config: README, "Adding an agent")'
        )
    elif not running and cfg.agents:  # no agents at all is reported with the agents
        yield "invalid setting data.agents=[]: name at least one agent"
    elif data.get("hf") is None:
        folder = Path(data.dir)
        if not folder.is_dir():
            made_by = data.get("created_by")  # data configs whose folder a command makes (data=paper)
            yield (
                f"invalid setting data.dir={data.dir}: no such folder (the <agent>.jsonl files are read there)"
                + (f"; create it with: {made_by}" if made_by else "")
            )
        else:
            missing = [a for a in running if not (folder / f"{a}.jsonl").is_file()]
            if missing:
                yield (
                    f"invalid setting data.agents: no data file for {', '.join(missing)} in {folder} "
                    f"(expected <agent>.jsonl; set data.dir or data.agents)"
                )
    if bad_fractions(list(data.fractions)):
        yield f"invalid setting data.fractions={_shown(data.fractions)}: must be {FRACTIONS_RULE}"
    for cap in ("max_seed", "max_stream", "max_test"):
        if data.get(cap) is not None and data[cap] < 0:
            yield f"invalid setting data.{cap}={data[cap]}: must be at least 0"
    if _typed_as_named(cfg, "pool"):  # the pool's backend checks its own settings (ms.pool)
        yield from POOL_BACKENDS.load(cfg.pool.backend).problems(cfg.pool)
    why = writable_folder(Path(cfg.cache_dir))
    if why:
        yield f"invalid setting cache_dir={cfg.cache_dir}: {why}; point cache_dir at a writable folder"
    if cfg.use_cache and not_sqlite(Path(cfg.cache_dir) / CACHE_FILENAME):
        yield damaged_cache_message(Path(cfg.cache_dir) / CACHE_FILENAME, "file is not a database")
    if not unknown:
        yield from _unmeasurable_metrics(cfg, running)
        yield from _stream_problems(cfg, running)
    yield from _option_problems(cfg)
    if cfg.gate.name in GATES:  # the gate checks its own settings (ms.gates)
        yield from GATES.load(cfg.gate.name).problems(cfg.gate, _RunningBackbones(cfg, [] if unknown else running))
    if cfg.access.name in ACCESS_RULES:  # the access rule checks its own settings and file (ms.pool.access)
        yield from ACCESS_RULES.load(cfg.access.name).problems(
            cfg.access, list(cfg.agents), [] if unknown else running, plan
        )
    if cfg.poison.name in POISONS and not unknown and not list(agent_problems(cfg.agents)):
        # the poisoner checks its victim, writer and instruction (ms.data.poison)
        yield from POISONS.load(cfg.poison.name).problems(cfg.poison, agents_from(cfg.agents), running)


def _typed_as_named(cfg: DictConfig, group: str) -> bool:
    """Whether `group`'s section holds the settings of the option it names (else _option_problems says so)."""
    name = cfg[group][OWNED[group].selector]
    return name in OWNED[group].registry and OmegaConf.get_type(cfg[group]) is settings_of(group, name)


def _option_problems(cfg: DictConfig) -> Iterator[str]:
    """A section whose options own their settings (ms.config.options) must hold its named option's: a
    `gate.name=utility` under gate=rubric would run the utility gate on the rubric's settings (and
    `memory.policy=stm_ltm` under memory=plain a policy without its own)."""
    for group, owner in OWNED.items():
        selector = owner.selector
        name = cfg[group][selector]
        if name not in owner.registry or _typed_as_named(cfg, group):
            continue  # an unknown name is reported with the name's choices
        found = OmegaConf.get_type(cfg[group])
        whose = [owner.spelled(group, o) for g, o, kind in owned() if g == group and kind is found and o != name]
        remedy = (
            f"choose it with {owner.chooser}={name}"
            if owner.chooser
            else f"choose a {group} whose file names {selector} {name}"
        )
        holds = f"{whose[0]}'s" if whose else "other"
        yield (
            f"invalid setting {group}.{selector}={name}: the {group} section holds {holds} settings, "
            f"not {owner.spelled(group, name)}'s; {remedy}"
            + ("" if whose else f", whose file names /{schema_name(group, name)}@_here_ first in its defaults list")
        )


def _agent_problems(cfg: DictConfig, plan: bool) -> Iterator[str]:
    """The agents' entries, the rubric files they are graded with, and every backbone a role names
    (agents.NAME.backbone, scorer.backbone, train.backbone, gate.test_backbone): a conf/backbone file that passes
    its checks."""
    found = list(agent_problems(cfg.agents))
    yield from found
    if found:
        return
    agents = agents_from(cfg.agents)
    for agent in agents.values():
        path = rubric_path(agent.rubric)
        if not path.is_file():
            key = "rubric" if cfg.agents[agent.name].rubric else "domain"
            yield (
                f"invalid setting agents.{agent.name}.{key}={cfg.agents[agent.name][key]}: no rubric file {path} "
                f"(a domain's rubric is conf/rubric/<domain>.yaml); add it, or set agents.{agent.name}.rubric"
            )
    if not plan:
        yield from _not_ready(cfg.backbone, "")
    backbones = Backbones(cfg.backbone)
    roles = [(f"agents.{a.name}.backbone", a.backbone) for a in agents.values()]
    roles += [("scorer.backbone", cfg.scorer.backbone), ("train.backbone", cfg.train.backbone)]
    if cfg.gate.get("test_backbone"):
        roles.append(("gate.test_backbone", cfg.gate.test_backbone))
    for key, name in backbones.named(roles):
        try:
            node = backbones.config(name)
        except UserError as error:
            yield f"invalid setting {key}={name}: {error}"
            continue
        yield from _walk(node, f"{key}={name}: backbone.")
        if not plan:
            yield from _not_ready(node, f"invalid setting {key}={name}: ")


def _not_ready(backbone: DictConfig, prefix: str) -> Iterator[str]:
    """What a run that spends needs of a backbone now, where found missing later it would stop a run that
    has already made its folder and opened its pool.

    The API key, where the backbone names its variable (`backbone.api_key_env`); one that names none needs
    none (a local model, or a local server). Then a local backbone's generation engine, installed: asked of
    the engine alone, since the default one, transformers, needs nothing more, and another is refused under
    a provider that does not run it (an API provider declares no engine); the provider's class is not
    loaded, as that would import torch."""
    try:
        api_key_from_env(backbone.get("api_key_env"), backbone.provider)
    except UserError as error:
        yield prefix + str(error)
    if (engine := backbone.get("engine")) and (missing := engine_problem(engine)):
        yield prefix + missing


def _blind(cfg: DictConfig, running: list[str], what: str) -> dict[tuple[str, str], list[str]]:
    """(backbone name, provider) -> the running agents whose backbone cannot do `what` ("scores_text")."""
    backbones = Backbones(cfg.backbone)
    blind: dict[tuple[str, str], list[str]] = {}
    for agent in running:
        try:
            backbone = backbones.config(cfg.agents[agent].backbone)
            able = backbones.can(cfg.agents[agent].backbone, what)
        except UserError:  # reported with the agent's backbone
            continue
        if not able:
            blind.setdefault((backbone.name, backbone.provider), []).append(agent)
    return blind


def _whose(agents: list[str], running: list[str]) -> str:
    return "" if len(agents) == len(running) else f" (the backbone of {', '.join(agents)})"


class _RunningBackbones:
    """What a gate's own checks may ask of the running agents' backbones (ms.gates.base.Backbones)."""

    def __init__(self, cfg: DictConfig, running: list[str]):
        self.cfg, self.running = cfg, running

    def unable(self, what: str, named: Optional[tuple[str, str]] = None) -> list[tuple[str, str, str]]:
        if named:
            key, name = named
            backbones = Backbones(self.cfg.backbone)
            try:
                able, provider = backbones.can(name, what), backbones.config(name).provider
            except UserError:  # reported with its key (_agent_problems)
                return []
            return [] if able else [(name, provider, f" ({key})")]
        return [
            (name, provider, _whose(agents, self.running))
            for (name, provider), agents in _blind(self.cfg, self.running, what).items()
        ]


def _stream_problems(cfg: DictConfig, running: list[str]) -> Iterator[str]:
    """Best-of-n by likelihood scores each candidate on its writer's backbone; and a stream-only run at k=0
    would do nothing at all (zero-shot runs skip the stream: ms.loop.schedule.skips_stream)."""
    if cfg.stream.best_of > 1 and cfg.stream.select == "likelihood":
        for (_, provider), agents in _blind(cfg, running, "scores_text").items():
            yield (
                f"invalid setting stream.select=likelihood: provider '{provider}' cannot score given text"
                f"{_whose(agents, running)}; use stream.select=grader"
            )
    if not cfg.eval.enabled and cfg.k == 0:
        yield "invalid setting eval.enabled=false: at k=0 the stream is skipped too, so the run would do nothing"


def _unmeasurable_metrics(cfg: DictConfig, running: list[str]) -> Iterator[str]:
    """eval.metrics whose every metric needs what some agent's backbone cannot do (ms.metrics: ref_logprob
    needs a backbone that scores given text) leaves that agent with no metric."""
    names = list(dict.fromkeys(cfg.eval.metrics))
    if not names or any(m not in METRICS for m in names):  # none, or an unknown one: reported with its key
        return
    needed = {what for m in names for what in METRICS.load(m).needs}
    if not all(METRICS.load(m).needs for m in names):
        return
    others = ",".join(m for m in METRICS if not METRICS.load(m).needs)
    for what in sorted(needed):
        words = next(METRICS.load(m).needs_words for m in names if what in METRICS.load(m).needs)
        by_provider: dict[str, list[str]] = {}
        for (_, provider), agents in _blind(cfg, running, what).items():
            by_provider.setdefault(provider, []).extend(agents)
        for provider, agents in by_provider.items():
            offer = offered_variant(provider, what)
            served = f" (or {offer})" if offer else ""
            yield (
                f"invalid setting eval.metrics={_shown(cfg.eval.metrics)}: provider '{provider}' cannot "
                f"{words}{_whose(agents, running)}; use eval.metrics=[{others}]{served}"
            )


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
