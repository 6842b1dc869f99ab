"""Config groups whose options own their settings (ARCHITECTURE.md, "Each part owns its settings"). The
root schema types such a group's section by what every option shares (`gate`: GateConfig); each
option's own dataclass (`Registry.settings`) is stored in Hydra's ConfigStore under
`schema_name(group, option)`, and the option's file names it first in its defaults list:

    # conf/gate/utility.yaml
    defaults:
      - /ms_gate_utility@_here_
      - _self_

An option whose part declares nothing gets the shared section. Stored at the top level rather than in
the group, so that `ms-run --help` offers no schema as an option.
"""

import dataclasses
from typing import Any, Iterator, NamedTuple, Optional

from ms.config.parts import ACCESS_RULES, GATES, POISONS, POLICIES, POOL_BACKENDS, PROVIDERS, RETRIEVERS
from ms.config.registry import Registry
from ms.config.schema import (
    AccessConfig,
    BackboneConfig,
    GateConfig,
    MemoryConfig,
    PoisonConfig,
    PoolConfig,
    RetrieverConfig,
)


class Owned(NamedTuple):
    """A group whose options own their settings."""

    registry: Registry  # its options
    shared: type  # the section every option's settings extend
    selector: str = "name"  # the key of that section that names the option (memory.policy)
    # The config group whose options these are (gate=utility, pool/backend=postgres); None where the
    # section's own group's files name one each (backbone=smollm2's names provider hf).
    chooser: Optional[str] = None

    def spelled(self, section: str, option: str) -> str:
        """How a message names `option`: gate=utility, pool/backend=postgres, or backbone.provider=hf."""
        return f"{self.chooser}={option}" if self.chooser else f"{section}.{self.selector}={option}"


OWNED: dict[str, Owned] = {
    "gate": Owned(GATES, GateConfig, chooser="gate"),
    "poison": Owned(POISONS, PoisonConfig, chooser="poison"),
    "retriever": Owned(RETRIEVERS, RetrieverConfig, chooser="retriever"),
    "memory": Owned(POLICIES, MemoryConfig, "policy", chooser="memory"),
    "access": Owned(ACCESS_RULES, AccessConfig, chooser="access"),
    "backbone": Owned(PROVIDERS, BackboneConfig, "provider"),
    "pool": Owned(POOL_BACKENDS, PoolConfig, "backend", chooser="pool/backend"),
}


def chosen_by(conf_group: str) -> Optional[str]:
    """The owned section whose options `conf_group`'s files choose (pool/backend's: pool), or name in their
    body (backbone's: backbone); None for a group that chooses no owned option."""
    for section, owner in OWNED.items():
        if conf_group == (owner.chooser or section):
            return section
    return None


def schema_name(group: str, option: str) -> str:
    """The ConfigStore name of an option's settings, as its file's defaults list names it (after a '/')."""
    return f"ms_{group.replace('/', '_')}_{option}"


def settings_of(group: str, option: str) -> type:
    """The dataclass of `option`'s settings: its part's own, else the group's shared section (also for a
    name its registry does not hold, which validation reports)."""
    registry, shared = OWNED[group].registry, OWNED[group].shared
    own = registry.settings(option) if option in registry else None
    return own or shared


def declared(group: str, option: str) -> list[str]:
    """The keys `option`'s section holds, its selector first."""
    return [f.name for f in dataclasses.fields(settings_of(group, option))]


def readers(group: str, key: str) -> list[str]:
    """The options of `group` whose settings declare `key` (for the line that refuses it elsewhere)."""
    return [option for option in OWNED[group].registry if key in declared(group, option)]


def owned() -> Iterator[tuple[str, str, type]]:
    """(group, option, its settings) for every registered option of every owned group."""
    for group, owner in OWNED.items():
        for option in owner.registry:
            yield group, option, settings_of(group, option)


def option_of(key: str, node: Any) -> Optional[tuple[str, str]]:
    """(group, option) when the dotted `key` is a group's own section (`gate`) and `node` is that
    section as composed (its selector names the option); else None."""
    if key not in OWNED or node is None:
        return None
    try:
        name = node.get(OWNED[key].selector)
    except Exception:  # a section too broken to read its name: the plain message is all there is
        return None
    return (key, str(name)) if name is not None else None


def entries() -> list[tuple[str, type]]:
    """(ConfigStore name, settings dataclass) of every registered option, as ms.config.store registers them."""
    return [(schema_name(group, option), kind) for group, option, kind in owned()]
