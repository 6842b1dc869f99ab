"""What a memory is: the row type, its content identity, the scopes, and the checks every
written row passes."""

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ms.config.schema import POOL_MODES

ORIGINS = ("seed", "stream", "imported", "summary")
TIERS = ("short", "long")

_REQUIRED = ("scope", "agent", "domain", "question", "answer", "origin")
_OPTIONAL = ("score", "importance", "tier", "sources", "backbone")
# Everything else about a memory is fixed once written: its content is what the hash vouches for.
MUTABLE = ("tier", "consolidated", "importance")
COUNTABLE = ("scope", "agent", "domain", "origin", "tier", "consolidated", "run_id", "backbone")


@dataclass(frozen=True)
class Memory:
    id: int
    scope: str
    agent: str
    domain: str
    question: str
    answer: str
    score: float | None
    importance: float | None
    origin: str
    added_step: int
    added_at: float
    last_retrieved_step: int | None
    last_retrieved_at: float | None
    content_hash: str
    tier: str
    consolidated: bool
    sources: list[int] | None
    run_id: str | None = None  # the run that admitted it; None in files from before runs were recorded
    # The backbone (conf/backbone name) that wrote it; None for seeds and imports, which no backbone
    # wrote, and in files from before backbones were recorded.
    backbone: str | None = None
    # Mean change in a probe's reference log-prob per token when this memory is the example shown
    # (ms.gates.replay), over utility_n measurements; None until first measured.
    utility: float | None = None
    utility_n: int = 0
    # The pool step at which its measured utility retired it (ms.pool.retirement); None: never. A
    # retired memory stays in the pool, readable by id, and no search returns it.
    retired_step: int | None = None

    def importance_or(self, default: float) -> float:
        """The rubric score scaled to [0, 1] when the gate graded the memory, else the importance an
        LLM assigned it, else `default`."""
        if self.score is not None:
            return self.score / 100.0
        if self.importance is not None:
            return self.importance
        return default


_FIELDS = [f.name for f in dataclasses.fields(Memory)]
COLUMNS = ", ".join(_FIELDS)


def scope_for(domain: str, pool_mode: str) -> str:
    """The scope an agent of `domain` reads and writes under `pool_mode`."""
    if pool_mode == "domain":
        return domain
    if pool_mode == "single":
        return "single"
    raise ValueError(f"unknown pool mode {pool_mode!r}; allowed: {', '.join(POOL_MODES)}")


def normalize_space(text: str) -> str:
    """Text as the pool compares it: whitespace-only differences do not count."""
    return re.sub(r"\s+", " ", text.strip())


def content_hash(question: str, answer: str) -> str:
    """Identity of a memory's content; whitespace-only differences hash equal."""
    blob = normalize_space(question) + "\x1f" + normalize_space(answer)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def check_mutable(field: str, value: Any) -> Any:
    """The one place that validates the columns a caller may set, on add and on update."""
    if field == "tier":
        if value not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {value!r}")
        return value
    if field == "importance":
        if value is not None and not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"importance must lie in [0, 1], got {value!r}")
        return None if value is None else float(value)
    if field == "consolidated":
        return int(bool(value))
    raise ValueError(f"{field!r} cannot be changed; mutable fields: {', '.join(MUTABLE)}")


def row_for_insert(item: dict[str, Any], step: int, now: float) -> tuple:
    unknown = set(item) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:  # a misspelt key would otherwise be dropped without a word
        raise ValueError(f"unknown memory keys: {', '.join(sorted(unknown))}")
    for key in _REQUIRED:
        value = item.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"memory is missing required key {key!r} (or it is empty)")
    if item["origin"] not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, got {item['origin']!r}")
    score = item.get("score")
    if score is not None and not 0.0 <= float(score) <= 100.0:
        raise ValueError(f"score is a rubric score in [0, 100], got {score!r}")
    sources = item.get("sources")
    backbone = item.get("backbone")
    if backbone is not None and (not isinstance(backbone, str) or not backbone.strip()):
        raise ValueError(f"backbone must be a backbone's name or absent, got {backbone!r}")
    return (
        *(item[key] for key in ("scope", "agent", "domain", "question", "answer")),
        None if score is None else float(score),
        check_mutable("importance", item.get("importance")),
        item["origin"],
        step,
        now,
        content_hash(item["question"], item["answer"]),
        check_mutable("tier", item.get("tier", "long")),
        None if sources is None else json.dumps([int(s) for s in sources]),
        backbone,
    )


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A row selected as COLUMNS, as a Memory."""
    values = dict(zip(_FIELDS, row))
    values["consolidated"] = bool(values["consolidated"])
    if values["sources"] is not None:
        values["sources"] = json.loads(values["sources"])
    return Memory(**values)


@dataclass(frozen=True)
class ScopeChanges:
    """What `Pool.changes` found in a scope since a reader last looked."""

    new: list[Memory]  # id above the reader's last id, oldest first
    changed: list[Memory]  # current rows of memories the reader holds that were updated
    deleted: list[int]  # ids the reader holds that are gone
    last_change: int  # position in the change log to ask from next time
