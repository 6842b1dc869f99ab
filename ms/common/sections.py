"""How a typed section of metrics.json keeps the keys its vintage wrote: a section is a frozen dataclass
whose fields are its keys, in the order runs write them, and whose `absent` names those its file lacks.
A reader takes the keys a file holds and names the ones it lacks (`read`); a writer writes the fields in
their order, less those (`written`), so that every committed file reads back to the dict it was written
as. Runs of different vintages write different keys, and a report must read them all."""

from dataclasses import fields
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

S = TypeVar("S")


def absent_from(found: Mapping[str, Any], names: Sequence[str]) -> frozenset[str]:
    """The names of `names` that the section `found` does not hold."""
    return frozenset(name for name in names if name not in found)


def keys(section_type: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(section_type) if f.name != "absent")


def read(section_type: type[S], found: Mapping[str, Any], **typed: Callable[[Any], Any]) -> S:
    """The section `found` as a `section_type`: each key's value as written (None where it lacks it), those
    named in `typed` read through their function (a list into a tuple, a dict into its typed section)."""
    names = keys(section_type)
    values = {name: found.get(name) for name in names}
    values.update((name, typed_value(found.get(name))) for name, typed_value in typed.items())
    return section_type(**values, absent=absent_from(found, names))


def as_json(value: Any) -> Any:
    """A field's value as metrics.json holds it: a typed section (or a mapping of them) by its `to_json`, a
    tuple as a list, anything else as it is."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping) and any(hasattr(v, "to_json") for v in value.values()):
        return {key: v.to_json() for key, v in value.items()}
    return value


def written(section: Any, names: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """The fields `names` of `section` (default: its keys), in order, less those its `absent` names, as_json."""
    names = keys(type(section)) if names is None else names
    return {name: as_json(getattr(section, name)) for name in names if name not in section.absent}


class Section:
    """A typed section as its file holds it: read with `read`, written back with `written`."""

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]):
        return read(cls, fields)

    def to_json(self) -> dict[str, Any]:
        return written(self)
