"""`Registry`: the variants of one kind of part (gate, metric, provider, ...), by name.

Each entry is a name and where its implementation lives, "module:attribute", so the names are known
(listed, offered as a setting's choices, checked) without importing any implementation: the config
layer stays free of torch, and a bad name is reported before anything heavy loads. `load(name)`
imports the one that is used.

    GATES = Registry("gate", {"rubric": "ms.gates.rubric:RubricGate", ...}, key="gate")
    "rubric" in GATES; list(GATES); GATES.load("rubric")  # -> the class
    GATES.register("toy", "my_package.toy:ToyGate")       # a new variant, in-process

Third parties plug in by Python entry points, one group per kind (docs/extending.md lists them),
because an entry point's value is already the "module:attribute" string a table holds: ms-run,
ms-data and ms-report offer and check an installed plugin's names from the installed metadata, still
without importing it. Each entry point goes through `register()`, so a plugin's name is refused where
it repeats a built-in or another plugin's.

This module imports nothing of ms (it lives in the config layer).
"""

import difflib
import importlib
from typing import Any, Iterator, Optional

ENTRY_POINT_PREFIX = "ms."  # group of a kind's entry points: "ms." + the kind, spaces as underscores
SETTINGS_SUFFIX = "_settings"  # the group of their settings' entry points: the kind's group + this
CONF_GROUP = "ms.conf"  # entry points naming a package whose folder holds config files (conf_packages)


class UnknownPart(ValueError):
    """A name no entry of the registry has: one line, with the choices and the nearest name."""


class DuplicatePart(ValueError):
    """A name registered twice."""


class Registry:
    def __init__(
        self,
        kind: str,
        table: dict[str, str],
        *,
        key: Optional[str] = None,
        settings: Optional[dict[str, str]] = None,
    ):
        """`kind`: what the entries are, in words ("gate", "pool backend"); `table`: name -> "module:attribute";
        `key`: the setting that names one (for messages; default: the kind); `settings`: name -> the
        "module:attribute" of the dataclass of that entry's own settings, where it has some."""
        self.kind = kind
        self.key = key or kind
        self.group = ENTRY_POINT_PREFIX + kind.replace(" ", "_")
        self._table: dict[str, str] = {}
        self._settings: dict[str, str] = {}
        self._plugins_read = False
        for name, target in table.items():
            self.register(name, target, settings=(settings or {}).get(name))

    # ---- the names ------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every name, built-ins first in their table's order, then what was registered or installed."""
        self._read_plugins()
        return list(self._table)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"

    def target(self, name: str) -> str:
        """Where `name`'s implementation lives, "module:attribute"; UnknownPart for a name not registered."""
        self._read_plugins()
        if name not in self._table:
            raise UnknownPart(self.unknown(name))
        return self._table[name]

    def unknown(self, name: Any) -> str:
        """The one line an unknown name gets: the choices, and the nearest name where one is close."""
        close = difflib.get_close_matches(str(name), self.names(), n=1)
        return f"unknown {self.key} '{name}': choose one of {', '.join(self.names())}" + (
            f" (did you mean {close[0]}?)" if close else ""
        )

    # ---- changing and loading -------------------------------------------------------------------

    def register(self, name: str, target: str, settings: Optional[str] = None) -> None:
        """Add `name`, implemented at `target` ("module:attribute"), with its own settings' dataclass at
        `settings` where it has some; a name already registered is refused."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind}'s name must be a non-empty string, not {name!r}")
        for where in filter(None, (target, settings)):
            module, _, attribute = where.partition(":")
            if not module or not attribute:
                raise ValueError(f"{self.kind} '{name}': a target must be 'module:attribute', not {where!r}")
        if name in self._table:
            raise DuplicatePart(
                f"a {self.kind} named '{name}' is registered already ({self._table[name]}); {target} needs another name"
            )
        self._table[name] = target
        if settings:
            self._settings[name] = settings

    def unregister(self, name: str) -> None:
        """Withdraw `name` (a test's toy part, or a plugin taking its entry back); unknown names are refused."""
        self.target(name)
        del self._table[name]
        self._settings.pop(name, None)

    def load(self, name: str) -> Any:
        """The implementation of `name` (a class or factory), imported now."""
        return _resolve(self.target(name))

    def settings(self, name: str) -> Optional[type]:
        """The dataclass of `name`'s own settings, imported now (a light module: no torch), or None
        where it declares none; UnknownPart for a name not registered."""
        self.target(name)
        found = self._settings.get(name)
        return _resolve(found) if found else None

    def loaded(self) -> dict[str, Any]:
        """name -> implementation, every entry imported (for what asks each variant, e.g. the gate check)."""
        return {name: self.load(name) for name in self.names()}

    def _read_plugins(self) -> None:
        """The installed packages' entry points of this kind, read once, on the first question asked."""
        if self._plugins_read:
            return
        self._plugins_read = True
        for point in _entry_points(self.group):
            self.register(point.name, point.value)
        for point in _entry_points(self.group + SETTINGS_SUFFIX):  # a settings entry of no registered part: unread
            if point.name in self._table:
                self._settings.setdefault(point.name, point.value)


def conf_packages() -> list[str]:
    """The packages installed distributions name in the entry-point group ms.conf (`toy = "toy_parts.conf"`),
    each a folder of config files laid out as conf/ is (gate/toy.yaml). Hydra searches them after ms's own
    conf/ (the plugin hydra_plugins.ms_conf), and the configuration reference lists their options. Read
    from the installed metadata, like the parts' names: nothing is imported."""
    return list(dict.fromkeys(point.module for point in _entry_points(CONF_GROUP)))


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


def _entry_points(group: str) -> list:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))
