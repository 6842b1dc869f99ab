"""access=rule: an arbitrary grant table, read from a rule file (access.file), which a person writes
or `ms-data learn-access` learns from a finished run. The file's keys (KEYS: `grants`, reader -> the
writers it may retrieve; an optional `default`; `learned`, recorded, not read) and an example:
docs/concepts/access.md.

A reader's own memories are granted only where the table says so; seeds count as written by the
agent they were seeded for, and `seed` grants every seed pair.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import yaml

from ms.common.errors import UserError
from ms.pool.access.base import ALL, SEED, AccessRule, Reader

KEYS = ("grants", "default", "learned")
Grants = Optional[frozenset[str]]  # None: every writer


class RuleFileError(UserError):
    """A rule file that cannot be read or says something no rule can mean: names the file and line."""


@dataclass(frozen=True)
class RuleFile:
    path: Path
    grants: dict[str, Grants]  # reader -> its writers, in the file's order
    default: Optional[Grants]  # readers the table does not list; None: there is no default
    has_default: bool
    learned: Optional[dict]
    lines: dict[str, int]  # reader (or a writer as "reader/writer") -> the line it is on, for messages


def _at(path: Path, node: yaml.Node) -> str:
    return f"{path} line {node.start_mark.line + 1}"


def _writers(path: Path, node: yaml.Node, key: str, lines: dict[str, int]) -> Grants:
    if isinstance(node, yaml.ScalarNode) and node.value == ALL:
        return None
    items = [node] if isinstance(node, yaml.ScalarNode) else node.value if isinstance(node, yaml.SequenceNode) else None
    if items is None or any(not isinstance(i, yaml.ScalarNode) or not i.value.strip() for i in items):
        raise RuleFileError(f"{_at(path, node)}: {key} must be a list of writers (agent names or {SEED}), or {ALL}")
    names = [i.value.strip() for i in items]
    if ALL in names:
        raise RuleFileError(f"{_at(path, node)}: {key}: {ALL} stands alone (`{key}: {ALL}`), not in a list")
    for i in items:
        lines.setdefault(f"{key}/{i.value.strip()}", i.start_mark.line + 1)
    return frozenset(names)


def read_rule_file(path: str | Path) -> RuleFile:
    path = Path(path)
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RuleFileError(f"cannot read the rule file {path} ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path} line {mark.line + 1}" if mark else str(path)
        raise RuleFileError(f"{where}: not YAML ({getattr(error, 'problem', None) or error})") from None
    if not isinstance(root, yaml.MappingNode):
        raise RuleFileError(f"{path}: a rule file is a mapping with `grants:` (reader -> writers)")
    found = {k.value: (k, v) for k, v in root.value}
    unknown = [k for k in found if k not in KEYS]
    if unknown:
        raise RuleFileError(
            f"{_at(path, found[unknown[0]][0])}: unknown key {unknown[0]!r}; a rule file has {', '.join(KEYS)}"
        )
    if "grants" not in found or not isinstance(found["grants"][1], yaml.MappingNode):
        raise RuleFileError(f"{path}: `grants:` must map each reader to its writers")
    grants: dict[str, Grants] = {}
    lines: dict[str, int] = {}
    for key, value in found["grants"][1].value:
        reader = str(key.value).strip()
        if reader in grants:
            raise RuleFileError(f"{_at(path, key)}: reader {reader} is listed twice")
        lines[reader] = key.start_mark.line + 1
        grants[reader] = _writers(path, value, reader, lines)
    default = _writers(path, found["default"][1], "default", lines) if "default" in found else None
    learned = None
    if "learned" in found:
        learned = yaml.safe_load(yaml.serialize(found["learned"][1]))
        if not isinstance(learned, dict):
            raise RuleFileError(f"{_at(path, found['learned'][1])}: learned must be a mapping")
    return RuleFile(path, grants, default, "default" in found, learned, lines)


def rule_file_problems(rule: RuleFile, agents: Sequence[str], running: Sequence[str]) -> Iterator[str]:
    """Names that are no configured agent (a typo would withhold silently), and running readers the
    table does not cover."""
    known = set(agents)
    for reader, writers in rule.grants.items():
        if reader not in known:
            yield (
                f"{rule.path} line {rule.lines[reader]}: reader {reader} is no configured agent; the agents are: "
                f"{', '.join(agents)}"
            )
        for writer in sorted(writers or ()):
            if writer not in known and writer != SEED:
                yield (
                    f"{rule.path} line {rule.lines[f'{reader}/{writer}']}: writer {writer} (granted to {reader}) "
                    f"is no configured agent nor {SEED}; the agents are: {', '.join(agents)}"
                )
    for writer in sorted(rule.default or ()):
        if writer not in known and writer != SEED:
            yield f"{rule.path} line {rule.lines[f'default/{writer}']}: writer {writer} is no configured agent nor {SEED}"
    missing = [a for a in running if a not in rule.grants]
    if missing and not rule.has_default:
        yield (
            f"{rule.path}: no grants for {', '.join(missing)}, which run; list them under grants:, or add "
            f"default: [...] for every reader the table does not list"
        )


def _listed(writers: Grants) -> Any:
    return ALL if writers is None else sorted(writers)


def write_rule_file(
    path: str | Path,
    grants: dict[str, Grants],
    *,
    default: Optional[Grants] = None,
    has_default: bool = False,
    learned: Optional[dict] = None,
    comment: str = "",
) -> Path:
    """Write a rule file the `access` group loads (access=rule access.file=PATH); `comment` heads it."""
    path = Path(path)
    body: dict[str, Any] = {"grants": {r: _listed(w) for r, w in grants.items()}}
    if has_default:
        body["default"] = _listed(default)
    if learned is not None:
        body["learned"] = learned
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None, allow_unicode=True, width=110)
    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + text, encoding="utf-8")
    return path


class RuleFileAccess(AccessRule):
    def __init__(self, rule: RuleFile):
        self.rule = rule

    @classmethod
    def build(cls, cfg, agents: Sequence[str]) -> "RuleFileAccess":
        return cls(read_rule_file(cfg.file))

    @classmethod
    def problems(cls, cfg, agents: Sequence[str], running: Sequence[str], plan: bool = False) -> Iterator[str]:
        if not cfg.file:
            yield (
                "invalid setting access.file: access=rule reads its grants from a rule file: access.file=PATH "
                "(docs/concepts/access.md; ms-data learn-access writes one)"
            )
            return
        if not Path(cfg.file).is_file():
            if not plan:  # a plan calls no model and reads no grants: the file may be learned later
                yield f"invalid setting access.file={cfg.file}: no such file"
            return
        try:
            rule = read_rule_file(cfg.file)
        except RuleFileError as error:
            yield f"invalid setting access.file={cfg.file}: {error}"
            return
        yield from (f"invalid setting access.file={cfg.file}: {p}" for p in rule_file_problems(rule, agents, running))

    def reader(self, agent: str) -> Reader:
        if agent in self.rule.grants:
            return Reader(agent, self.rule.grants[agent])
        if self.rule.has_default:
            return Reader(agent, self.rule.default)
        raise RuleFileError(f"{self.rule.path}: no grants for reader {agent}, and no default")

    def grants(self) -> dict[str, Optional[list[str]]]:
        return {r: None if w is None else sorted(w) for r, w in self.rule.grants.items()}

    def record(self) -> dict:
        rule = self.rule
        return {
            "access": {
                "rule": "rule",
                "file": str(rule.path),
                "grants": self.grants(),
                **({"default": None if rule.default is None else sorted(rule.default)} if rule.has_default else {}),
                **({"learned": rule.learned} if rule.learned is not None else {}),
            }
        }
