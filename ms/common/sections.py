"""How a typed section of metrics.json keeps the keys its vintage wrote: a reader takes the keys a file
holds and names the ones it lacks (`absent_from`); a writer writes the fields in their order, less those
(`written`), so that every committed file reads back to the dict it was written as. Runs of different
vintages write different keys, and a report must read them all."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence


def absent_from(fields: Mapping[str, Any], names: Sequence[str]) -> frozenset[str]:
    """The names of `names` that the section `fields` does not hold."""
    return frozenset(name for name in names if name not in fields)


def written(
    section: Any, names: Sequence[str], as_json: Callable[[str, Any], Any] = lambda name, value: value
) -> dict[str, Any]:
    """The fields `names` of `section`, in that order, less those its `absent` names; each written as
    `as_json(name, value)` says (a typed value to its dict, a tuple to a list)."""
    return {name: as_json(name, getattr(section, name)) for name in names if name not in section.absent}
