"""What a run's folder is called (conf/config.yaml's hydra.run.dir and hydra.sweep.subdir): the
command's settings, so that the same command finds the same folder again and resumes there, a single
run as a sweep's cell does (docs/running/runs.md shows the names commands get).

The resolvers are registered when ms.cli.run is imported, not in its main(): a launcher's worker
processes import it to unpickle the task, and resolve each job's folder name there.
"""

import hashlib
import re
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

# Overrides whose values are paths, named in run folders by a tag instead (Hydra's exclude_keys
# leaves them out of override_dirname, conf/config.yaml).
PATH_KEYS = ("data.dir", "gate.match", "access.file")
DEFAULT_NAME = "default"  # the folder of a run with no experiment and no override
# File systems refuse a longer name; a name that fits stays as Hydra joins it (as it always was).
MAX_NAME_BYTES = 255


def path_tags(task_overrides) -> str:
    """ ",data.dir=NAME-HASH" for each path-valued override: the path's last part, made safe for a
    folder name, and 6 hex digits of its SHA-256, so two paths that end alike still differ."""
    tags = []
    for override in task_overrides:
        key, _, value = str(override).partition("=")
        if key.lstrip("+~") in PATH_KEYS and value:
            value = value.strip("'\"")
            name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(value).name)[-40:]
            tags.append(f"{key.lstrip('+~')}={name}-{hashlib.sha256(value.encode()).hexdigest()[:6]}")
    return "".join("," + t for t in sorted(tags))


def one_folder(name: str) -> str:
    """`name` as one folder, not several: a '/' in a value (a hub model's `org/name`) is written %2F,
    as a URL writes it; a name over MAX_NAME_BYTES is cut, and 10 hex digits of its SHA-256 end it, so
    that the same settings still find the same folder and others another."""
    name = name.replace("/", "%2F")
    whole = name.encode()
    if len(whole) <= MAX_NAME_BYTES:
        return name
    return whole[: MAX_NAME_BYTES - 11].decode(errors="ignore") + "-" + hashlib.sha256(whole).hexdigest()[:10]


def run_name(experiment: Optional[str], overrides: str, task_overrides) -> str:
    """A single run's folder name: the experiment's name, then the overrides as Hydra joins them
    (override_dirname, which leaves the experiment out, since a sweep's folder names it) and the
    path tags; DEFAULT_NAME where there is none of these."""
    named = ",".join(filter(None, (experiment, overrides, path_tags(task_overrides).lstrip(","))))
    return one_folder(named or DEFAULT_NAME)


def cell_name(overrides: str, task_overrides) -> str:
    """A sweep cell's folder name under its sweep's folder: its overrides and path tags."""
    return one_folder(overrides + path_tags(task_overrides))


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("ms_run_name", run_name, replace=True)
    OmegaConf.register_new_resolver("ms_cell_name", cell_name, replace=True)
