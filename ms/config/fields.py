"""`setting`: a dataclass field that declares its own limits, and `Check`, those limits.

    k: int = setting(3, ge=0)
    fills: list[int] = setting(factory=lambda: [20, 40], ge=0, le=100, increasing=True)

ms.loop.validation walks a composed config along its dataclass types and applies every Check; a
dataclass whose rules span several fields adds a `problems(self)` method yielding (field, message).
"""

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from omegaconf import ListConfig

CHECK = "ms_check"  # the dataclass field metadata key `setting` writes and ms.loop.validation reads
_NO_DEFAULT = object()


@dataclass(frozen=True)
class Check:
    """Limits of one field; for a list, each item must meet the bounds and choices."""

    ge: Optional[float] = None
    gt: Optional[float] = None
    le: Optional[float] = None
    lt: Optional[float] = None
    choices: Optional[Any] = None  # a tuple, or a Registry (ms.config.registry): its names now
    increasing: bool = False  # a list: strictly increasing
    nonempty: bool = False  # a list: at least one item

    def problems(self, value: Any) -> Iterator[str]:
        if value is None:  # Optional fields mean "use the default behaviour"
            return
        if isinstance(value, (list, tuple, ListConfig)):
            items = list(value)
            if self.nonempty and not items:
                yield "must list at least one value"
            if self.increasing and any(b <= a for a, b in zip(items, items[1:])):
                yield "must be strictly increasing"
            for item in items:
                yield from (f"{item!r} {problem}" for problem in self._item_problems(item))
            return
        yield from self._item_problems(value)

    def _item_problems(self, value: Any) -> Iterator[str]:
        if self.choices is not None and value not in self.choices:
            yield f"must be one of {', '.join(map(str, self.choices))}"
            return
        if self.ge is not None and value < self.ge:
            yield f"must be at least {number(self.ge)}"
        if self.gt is not None and value <= self.gt:
            yield f"must be greater than {number(self.gt)}"
        if self.le is not None and value > self.le:
            yield f"must be at most {number(self.le)}"
        if self.lt is not None and value >= self.lt:
            yield f"must be less than {number(self.lt)}"


def number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def setting(default: Any = _NO_DEFAULT, *, factory: Optional[Callable[[], Any]] = None, **limits: Any) -> Any:
    """A dataclass field with its limits (see Check); `factory` for mutable defaults."""
    if "choices" in limits and not hasattr(limits["choices"], "register"):  # a Registry stays live:
        limits["choices"] = tuple(limits["choices"])  # a name registered later is a choice too
    metadata = {CHECK: Check(**limits)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    if default is _NO_DEFAULT:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def violations(cfg: Any, kind: type, key: str) -> Iterator[str]:
    """Every declared limit of dataclass `kind` that `cfg` (an instance, or a config node of that
    type) breaks, one line each naming `key.field`; nested dataclasses are left to their own owners."""
    for f in dataclasses.fields(kind):
        check = f.metadata.get(CHECK)
        if check is not None:
            value = getattr(cfg, f.name)
            yield from (f"invalid setting {key}.{f.name}={value}: {problem}" for problem in check.problems(value))
    cross = getattr(kind, "problems", None)
    if cross is not None:
        yield from (f"invalid setting {key}.{name}={getattr(cfg, name)}: {problem}" for name, problem in cross(cfg))


def require(cfg: Any, kind: type, key: str) -> None:
    """Raise ValueError listing what `violations` finds. The parts call it on the config they are
    built with, so a part built without ms-run (a test, a script) is held to the same limits that
    ms.loop.validation reports before a run, and no part writes those limits out a second time."""
    found = list(violations(cfg, kind, key))
    if found:
        raise ValueError("; ".join(found))
