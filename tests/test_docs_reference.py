"""The configuration reference (ms.config.reference) names every group and option under conf/, every
field of the schema and of each option's own settings, and every registered part, a part registered for
the test included. That the built site carries it: test_docs_site.py."""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path

from test_registry import toy  # noqa: F401  (the fixture: a toy gate and metric from outside ms)

from ms.config.parts import GATES, METRICS
from ms.config.reference import markdown, registries
from ms.config.schema import Config
from ms.config.store import CONF_DIR


def conf_listing(conf: Path) -> dict[str, set[str]]:
    """group -> its options, from the files under the config folder (what the reference must list)."""
    listing: dict[str, set[str]] = {}
    for folder, _, files in os.walk(conf):
        group = Path(folder).relative_to(conf).as_posix()
        for name in files:
            if name.endswith(".yaml") and group != ".":
                listing.setdefault(group, set()).add(name[: -len(".yaml")])
    return listing


def schema_keys(kind: type = Config, prefix: str = "") -> set[str]:
    """Every settable dotted key of the schema (agents' entries as agents.NAME.field)."""
    keys = set()
    hints = typing.get_type_hints(kind)
    for field in dataclasses.fields(kind):
        hint, key = hints[field.name], f"{prefix}{field.name}"
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = (
            hint
            if dataclasses.is_dataclass(hint)
            else (args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else None)
        )
        if typing.get_origin(hint) is dict:
            keys |= schema_keys(typing.get_args(hint)[1], f"{key}.NAME.")
        elif inner is not None:
            keys |= schema_keys(inner, f"{key}.")
        else:
            keys.add(key)
    return keys


def test_the_reference_lists_every_group_and_option_under_conf():
    page = markdown()
    listing = conf_listing(Path(CONF_DIR))
    assert {"access", "gate", "grader", "poison", "hydra/callbacks", "experiment"} <= set(listing)
    for group, names in listing.items():
        assert f"### `{group}`" in page, group
        for name in names:
            assert f"#### `{group}={name}`" in page, f"{group}={name}"
    for option in (
        "gate=all",
        "gate=random",
        "access=rule",
        "grader=qwen2.5-0.5b",
        "poison=grader_instruction",
        "poison=self_assessment",
        "hydra/callbacks=mlflow",
    ):
        assert f"`{option}`" in page, option
    # a file whose selector names another option is typed by that option's settings, and links to them
    assert "File: `conf/retriever/dense_frozen.yaml`. Its settings: [`retriever` under `retriever=dense`]" in page
    stm_ltm = page.split("{#settings-memory-stm-ltm}")[1].split("\n### ")[0]
    assert "Its settings besides those every option shares" in stm_ltm  # memory.stm_ltm, its own, nested


def option_keys() -> set[str]:
    """Every settable key of each group option's own settings (ms.config.options: gate=random's gate.rate,
    retriever=composite's retriever.composite.decay)."""
    from ms.config.options import owned

    return {key for group, _, kind in owned() for key in schema_keys(kind, f"{group}.")}


def test_the_reference_lists_every_setting_of_the_schema_with_its_choices():
    page = markdown()
    keys = schema_keys() | option_keys()
    assert {
        "k",
        "gate.rate",
        "gate.decide_on",
        "scorer.defence",
        "backbone.dtype",
        "accept_code_change",
        "agents.NAME.rubric",
        "retriever.composite.utility_weight",
        "data.hf.name",
    } <= keys
    for key in keys:
        assert f"| `{key}` |" in page, key
    row = next(line for line in page.splitlines() if line.startswith("| `scorer.defence` |"))
    assert "one of none, quote, strip, reject" in row
    row = next(line for line in page.splitlines() if line.startswith("| `backbone.dtype` |"))
    assert "one of auto, float32, float16, bfloat16" in row
    # each gate's own settings under its option, after the section every gate shares
    assert page.index("### `gate` {#settings-gate}") < page.index(
        "### `gate` under `gate=utility` {#settings-gate-utility}"
    )
    utility = page.split("{#settings-gate-utility}")[1].split("\n### ")[0]
    assert "| `gate.decide_on` | str | `mean` | one of mean, lower |" in utility and "gate.rate" not in utility


def test_the_reference_lists_every_registered_part():
    page = markdown()
    found = registries()
    assert {name for name, _, _ in found} >= {
        "GATES",
        "METRICS",
        "PROVIDERS",
        "ENGINES",
        "RETRIEVERS",
        "POLICIES",
        "POOL_BACKENDS",
        "ACCESS_RULES",
        "POISONS",
    }
    for _, registry, _ in found:
        for name in registry.names():
            assert f"| `{name}` | `{registry.target(name)}` |" in page, (registry.kind, name)


def test_a_part_registered_from_outside_ms_and_its_config_folder_join_the_reference(toy):  # noqa: F811
    """The toy gate and metric of tests/test_registry.py, registered in-process, with the config folder
    that holds gate/toy.yaml given as ms-run's --config-dir would be."""
    assert "toy" in GATES and "ref_words" in METRICS
    page = markdown([CONF_DIR, toy])
    assert "| `toy` | `toy_parts.gate:ToyGate` |" in page
    assert "| `ref_words` | `toy_parts.metric:RefWords` |" in page
    assert "#### `gate=toy`" in page and "A toy gate from outside ms" in page
    assert "### `gate` under `gate=toy`" in page and "| `gate.ratio` | float | `3.0` | &gt; 0 |" in page
    row = next(line for line in page.splitlines() if line.startswith("| `gate.name` |"))
    built_in = [name for name in GATES if name != "toy"]
    assert (
        "one of " + ", ".join(name.replace("_", "\\_") for name in [*built_in, "toy"]) in row
    )  # Markdown escapes the _
