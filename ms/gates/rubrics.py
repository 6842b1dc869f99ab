"""The rubrics a grader scores pairs against: data files (conf/rubric/*.yaml, from the paper's appendix
A.1) read into criteria and rendered into the grading prompt, and which rubric grades an agent's pairs."""

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Iterable

import yaml

from ms.agents import SINGLE_SCOPE, Agent
from ms.common.errors import UserError
from ms.config.schema import RUBRIC_TOTAL
from ms.config.store import CONF_DIR
from ms.data.grader_directed import RubricText
from ms.pool import scope_for

RUBRIC_DIR = Path(CONF_DIR) / "rubric"
SINGLE_RUBRIC = SINGLE_SCOPE  # the rubric files are named after the pool scopes they guard


@dataclass(frozen=True)
class Criterion:
    name: str
    points: int
    rewards: str
    parts: tuple[tuple[str, int], ...] = ()  # sub-scores the points split into
    bands: tuple[tuple[str, str], ...] = ()  # (points range, what earns it), best band first
    applies_to: tuple[str, ...] = ()  # agents the criterion is meant for; empty = every agent

    def render(self) -> str:
        scope = f", {' and '.join(self.applies_to)} only" if self.applies_to else ""
        line = f"- {self.name} (0-{self.points} points{scope}): {self.rewards}"
        if self.parts:
            line += " [" + ", ".join(f"{part} {points}" for part, points in self.parts) + "]"
        if self.bands:
            line += "\n" + "\n".join(f"    {span}: {meaning}" for span, meaning in self.bands)
        return line


@dataclass(frozen=True)
class Rubric:
    name: str
    title: str
    source: str
    criteria: tuple[Criterion, ...]

    @property
    def total(self) -> int:
        return sum(c.points for c in self.criteria)

    def render(self) -> str:
        return "\n".join(c.render() for c in self.criteria)

    def quoted(self) -> RubricText:
        """What an answer aimed at its grader takes of it (ms.data.grader_directed, ms.data.plain_praise)."""
        return RubricText(
            self.title,
            tuple((c.name, c.points) for c in self.criteria),
            tuple((c.rewards, c.applies_to) for c in self.criteria),
        )

    def rewarded(self, agent: str) -> tuple[str, ...]:
        """What it rewards in a pair of `agent`, in its order: of the criteria that apply to that agent."""
        return self.quoted().rewarded(agent)

    @classmethod
    def from_file(cls, path: Path) -> "Rubric":
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        missing = [key for key in ("name", "title", "source", "criteria") if not data.get(key)]
        if missing:
            raise ValueError(f"rubric file {path} lacks {', '.join(missing)}")
        criteria = tuple(
            Criterion(
                name=c["name"],
                points=int(c["points"]),
                rewards=c["rewards"],
                parts=tuple((str(k), int(v)) for k, v in (c.get("parts") or {}).items()),
                bands=tuple((str(k), str(v)) for k, v in (c.get("bands") or {}).items()),
                applies_to=tuple(c.get("applies_to") or ()),
            )
            for c in data["criteria"]
        )
        rubric = cls(name=data["name"], title=data["title"], source=data["source"], criteria=criteria)
        if rubric.total != RUBRIC_TOTAL:
            raise ValueError(f"rubric file {path}: criteria points total {rubric.total}, expected {RUBRIC_TOTAL}")
        for c in criteria:
            if c.parts and sum(p for _, p in c.parts) != c.points:
                raise ValueError(f"rubric file {path}: the parts of '{c.name}' do not add up to its {c.points} points")
        return rubric


class RubricNotFound(UserError, FileNotFoundError):
    """A rubric that an agent or the pool mode asks for has no file."""


def rubric_path(name: str, directory: Path = RUBRIC_DIR) -> Path:
    """A rubric's file: `name` is a file's name in conf/rubric without .yaml, or a path to a .yaml file."""
    return Path(name) if name.endswith((".yaml", ".yml")) else Path(directory) / f"{name}.yaml"


@cache
def load_rubric(name: str, directory: Path = RUBRIC_DIR) -> Rubric:
    path = rubric_path(name, directory)
    if not path.is_file():
        known = sorted(p.stem for p in Path(directory).glob("*.yaml"))
        raise RubricNotFound(f"no rubric '{name}' ({path}); the rubrics are: {', '.join(known)}")
    return Rubric.from_file(path)


def load_rubrics(names: Iterable[str] | None = None) -> dict[str, Rubric]:
    """Rubrics by the name their file gives them; None: every file in conf/rubric."""
    if names is None:
        names = sorted(p.stem for p in RUBRIC_DIR.glob("*.yaml"))
    return {rubric.name: rubric for rubric in map(load_rubric, names)}


def rubric_ref(agent: Agent, pool_mode: str) -> str:
    """The rubric (a conf/rubric name or a file's path) the agent's pairs are graded with. Domain
    pools grade with the agent's rubric, by default its domain's; the single pool grades every agent
    alike, with the single rubric. The scorer knows rubrics by the name their file gives them:
    `rubric_for(...).name`."""
    return SINGLE_RUBRIC if scope_for(agent.domain, pool_mode) == SINGLE_SCOPE else agent.rubric


def rubric_for(agent: Agent, pool_mode: str) -> Rubric:
    return load_rubric(rubric_ref(agent, pool_mode))
