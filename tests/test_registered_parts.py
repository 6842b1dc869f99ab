"""The import-linter contracts that keep the loop, plan mode and validation off concrete parts
(pyproject.toml, run by `lint-imports`) name their modules by hand: every module a registry of
ms.config names must be among them, or a new part's module is reachable from the loop unseen."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib

from conftest import REPO

import ms.config
from ms.config.registry import Registry

# The contracts are the forbidden ones whose sources are these (ARCHITECTURE.md, "Layers").
SOURCES = {"ms.loop.pipeline", "ms.loop.answering", "ms.plan", "ms.loop.validation"}


def registries() -> list[Registry]:
    """Every registry the modules of ms.config hold, once each."""
    found = {}
    for info in pkgutil.iter_modules(ms.config.__path__, "ms.config."):
        for value in vars(importlib.import_module(info.name)).values():
            if isinstance(value, Registry):
                found[id(value)] = value
    return list(found.values())


def forbidden_modules() -> set[str]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return {
        module
        for c in contracts
        if c["type"] == "forbidden" and set(c["source_modules"]) == SOURCES
        for module in c["forbidden_modules"]
    }


def unlisted(found: list[Registry], listed: set[str]) -> list[str]:
    """'kind name: module' for each part of ms whose module the contract leaves out (an installed
    plugin's parts live outside ms, beyond the contract)."""
    return [
        f"{registry.kind} {name}: {module}"
        for registry in found
        for name in registry.names()
        if (module := registry.target(name).partition(":")[0]).startswith("ms.") and module not in listed
    ]


def test_every_registered_parts_module_is_in_the_contracts():
    found = registries()
    assert {"gate", "provider", "engine", "pool backend", "poison"} <= {r.kind for r in found}
    assert unlisted(found, forbidden_modules()) == []


def test_a_part_whose_module_the_contract_leaves_out_is_named():
    toys = Registry("gate", {"toy": "ms.gates.toy:ToyGate", "rubric": "ms.gates.rubric:RubricGate"})
    plugins = Registry("gate", {"plugin": "their_package.gate:Gate"})
    assert unlisted([toys, plugins], {"ms.gates.rubric"}) == ["gate toy: ms.gates.toy"]
