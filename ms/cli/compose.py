"""Compose ms-run's configs as Hydra will, before Hydra makes any folder: every job of a command (a
sweep's cells too), each composition mistake turned into one line that names the key and what would
be right there: the nearest valid key (difflib), the group's options, or the type the key takes.

Hydra's own messages run over several lines, suggest `+key=` for a misspelt key, and list the
config search path; the exceptions behind them carry the key, the node and the options, which is
what these lines are made from. A `+key=` the schema does not declare is refused too: Hydra would
add it, and the run would ignore it. `compose_checked` composes one config outside Hydra's
launch and checks it as ms-run would, for ms-data's commands."""

import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from ms.common.errors import UserError, one_line
from ms.config.store import CONF_DIR, register

CONFIG_NAME = "config"
HYDRA_KEY = "hydra"  # Hydra's own node: its schema is Hydra's, not ms's


def _nearest(word: str, choices: Sequence[str]) -> Optional[str]:
    found = difflib.get_close_matches(word, list(choices), n=1)
    return found[0] if found else None


def _joined(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _unknown_key(full_key: str, known: Sequence[str], node: Any = None) -> str:
    """The line for a key its section does not declare; `node`: that section, which, where it is an
    option's own (gate=rubric's), has the line name the option and the options that do read the key."""
    from ms.config.options import OWNED, option_of, readers

    parent, _, key = full_key.rpartition(".")
    option = option_of(parent, node)
    owner = OWNED[parent].spelled(parent, option[1]) if option else parent or "the config"
    under = f" under {owner}" if option else ""
    elsewhere = (
        [OWNED[parent].spelled(parent, name) for name in readers(parent, key) if name != option[1]] if option else []
    )
    has = f"{owner} has only the key {known[0]}" if len(known) == 1 else f"{owner} has the keys {', '.join(known)}"
    if elsewhere:
        return f"unknown key {full_key}{under}: a setting of {' and '.join(elsewhere)} only; {has}"
    close = _nearest(key, known)
    if close is not None:
        return f"unknown key {full_key}{under}: did you mean {_joined(parent, close)}?"
    return f"unknown key {full_key}{under}: {has}"


# (one, several): what a key of this type takes, and what a list of them holds
_NAMES = {
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "booleans"),
    str: ("text", "strings"),
}


def _described(kind: Any) -> str:
    """A type as a setting's error names it: 'an integer', 'a list of numbers', 'an integer or null'."""
    if kind in _NAMES:
        return _NAMES[kind][0]
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    origin = typing.get_origin(kind)
    if origin is typing.Union:
        return " or ".join(_described(a) for a in args) + " or null"
    if origin is list:
        return f"a list of {_NAMES[args[0]][1]}" if args and args[0] in _NAMES else "a list"
    if origin is dict or (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        return "a group of settings (set its keys one by one: KEY.NAME=VALUE)"
    return getattr(kind, "__name__", str(kind))


def _expected(error) -> Optional[str]:
    """What the key of a ValidationError takes, read from its parent's type."""
    owner = error.object_type
    if isinstance(owner, type) and dataclasses.is_dataclass(owner):
        return _described(typing.get_type_hints(owner).get(error.key))
    item = typing.get_args(error.ref_type)  # a list's items, or a dict's values
    return _described(item[-1]) if item else None


def _under(error) -> str:
    """' under gate=utility' where the key of a ValidationError is an option's own setting, else ''."""
    from ms.config.options import OWNED, option_of

    parent = error.full_key.rpartition(".")[0]
    option = option_of(parent, error.parent_node) if parent else None
    return f" under {OWNED[parent].spelled(parent, option[1])}" if option else ""


def explain(error: Exception) -> str:
    """One line for an error Hydra or OmegaConf raised while composing a config."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    if isinstance(error, MissingConfigException) and error.options is not None:
        group, _, option = (error.missing_cfg_file or "").rpartition("/")
        close = _nearest(option, error.options)
        return f"unknown {group}={option}: choose one of {', '.join(error.options)}" + (
            f" (did you mean {group}={close}?)" if close else ""
        )
    # An override's error is the cause of Hydra's; a config file's is raised while Hydra handles
    # it, and Hydra's message begins by naming the file ("In 'experiment/x': ...").
    cause = error.__cause__ or error.__context__ or error
    where = str(error).split(": ", 1)[0] + ": " if str(error).startswith("In '") else ""
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.full_key:
        known = [k for k in (cause.parent_node or {}) if k != HYDRA_KEY or cause.full_key.startswith(HYDRA_KEY)]
        return where + _unknown_key(cause.full_key, known, cause.parent_node)
    if isinstance(cause, ValidationError) and cause.full_key:
        expected = _expected(cause)
        if expected is not None:
            return f"{where}invalid setting {cause.full_key}={cause.value}{_under(cause)}: must be {expected}"
    return one_line(str(error) if cause is error else f"{error}: {cause}")


def outside_schema(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """Keys a `+key=` override added where the schema declares none: one line each."""
    kind = OmegaConf.get_type(node)
    declared = [f.name for f in dataclasses.fields(kind)] if dataclasses.is_dataclass(kind) else None
    for key in node:
        if not prefix and key == HYDRA_KEY:
            continue
        if declared is not None and key not in declared:
            yield _unknown_key(_joined(prefix, key), declared, node) + " (a +key= override cannot add a setting)"
        elif not OmegaConf.is_missing(node, key) and isinstance(child := node.get(key), DictConfig):
            yield from outside_schema(child, _joined(prefix, key))


def _parse(overrides: list[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except HydraException as err:
        raise UserError(f"cannot parse the overrides: {one_line(str(err))}") from None


def jobs(overrides: list[str], multirun: bool, config_dir: Optional[str] = None) -> list[tuple[list[str], DictConfig]]:
    """(overrides, composed config with its `hydra` node) of every job the command would launch;
    `config_dir` adds a folder of configs, as Hydra's --config-dir does. Raises UserError with one
    line per mistake found."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ms.cli.folders import register_resolvers

    register()  # the options' settings as registered now, a part registered in-process included
    register_resolvers()  # what names a job's folder, which check_folder and plan mode read
    searched = [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]"] if config_dir else []

    def composed(job: list[str]) -> DictConfig:
        try:
            cfg = compose(CONFIG_NAME, overrides=searched + job, return_hydra_config=True)
        except (HydraException, OmegaConfBaseException) as err:
            raise UserError(explain(err)) from None
        added = list(outside_schema(cfg))
        if added:
            raise UserError("\n".join(added))
        return cfg

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        if not multirun:
            return [(overrides, composed(overrides))]
        parsed = _parse(overrides)
        master = composed([o.input_line for o in parsed if not o.is_sweep_override()])
        params = dict(master.hydra.sweeper.get("params") or {})
        # As Hydra's basic sweeper does it, with its own code: the config's sweep params first, the
        # command line's after them, then the product of every axis.
        axes = _parse([f"{k}={v}" for k, v in params.items()] + overrides)
        try:
            [cells] = BasicSweeper.split_arguments(axes, max_batch_size=None)
        except HydraException as err:
            raise UserError(f"a sweep expands as Hydra's basic sweeper does: {one_line(str(err))}") from None
        return [(cell, composed(cell)) for cell in cells]


def compose_checked(overrides, check: bool = True, plan: bool = False):
    """The config ms-run would compose from these overrides, checked as ms-run checks it (`check`),
    or as its plan mode does (`plan`: no API key or pool DSN needed)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from ms.loop.validation import validate

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        try:
            cfg = compose("config", overrides=list(overrides))
        except HydraException as err:  # a misspelt key or option
            raise UserError(one_line(f"{err} {err.__cause__ or ''}", 500)) from err
    if check:
        validate(cfg, plan=plan)
    return cfg
