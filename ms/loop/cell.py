"""What makes a run folder's numbers the answer to a command: its cell identity.

A sweep resumes by skipping folders that hold a finished run. That is safe only if the finished run
is the one requested, so a finished run records its identity in metrics.json (`cell`): every setting
that can change a number, and a fingerprint of the examples it read (seed, stream and test, each
question and reference), which catches other data behind the same `data.dir` or the same data
behind another path, and the content of every other file it read and of its code (ms.loop.inputs). A
request whose identity differs from a finished run's in the same folder is refused, naming the keys
that differ: it is never skipped, and never run over the old results. Only a difference of code alone
can be accepted, deliberately (`accept_code_change=true`), and the acceptance is recorded in the run.
"""

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml
from omegaconf import DictConfig, OmegaConf

from ms.common.errors import UserError
from ms.config.added import since_cell
from ms.config.options import OWNED, declared
from ms.loop.inputs import CODE_KEY, InputSettings, changed_inputs, code_sha256, dtypes, inputs_record
from ms.loop.provenance_record import CellRecord

# Settings that cannot change a number: where things are kept, how they are shown, and the data
# folder's path (its content is compared instead, by fingerprint).
NOT_IDENTITY = (
    "hydra",
    "cache_dir",
    "use_cache",
    "pool.dsn",
    "data.dir",
    "data.created_by",
    "retriever.save",
    "retriever.composite.debug",
    "eval.device",
    "accept_code_change",
)
DATA_KEY = "data (the examples read)"
# Settings added since runs began recording their cell, with the value every run before them ran
# with: a finished run whose record lacks one ran with that value, and resumes as the same cell.
ADDED_SINCE = since_cell()
# Groups whose option named here reads none of the group's other settings: under it they are no part of
# the cell (poison=none writes nothing, whichever victim an experiment file names for its poisoned cells).
IDLE_OPTIONS = {"poison": "none"}
# Settings read only while another holds some other value: (switch, value) -> the settings it leaves unread,
# then no part of the cell (a stream of single greedy answers samples nothing; a stream-only run evaluates
# nothing), so that runs made before they existed, and runs that differ in them alone, stay one cell.
IDLE_WHEN = {("stream.best_of", 1): ("stream.temperature", "stream.select"), ("eval.enabled", False): ("eval",)}


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{'a.b.c': leaf} of a nested dict; lists stay leaves."""
    if not isinstance(tree, Mapping):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def declared_only(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` less each key of a section whose options own their settings (ms.config.options) that
    the option named there does not declare: records from before each gate owned its settings hold every
    gate's keys (gate.rate under gate=rubric), which that gate never read, and an added setting
    (ADDED_SINCE) belongs only under the options that declare it."""
    unread: set[str] = set()
    for group in OWNED:
        name = settings.get(f"{group}.{OWNED[group].selector}")
        if name in OWNED[group].registry:
            keep = declared(group, name)
            unread |= {k for k in settings if k.startswith(group + ".") and k.split(".")[1] not in keep}
    return {k: v for k, v in settings.items() if k not in unread}


def with_added(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A run's recorded settings with those added since it ran, at the value it ran with (ADDED_SINCE)."""
    return declared_only({**ADDED_SINCE, **settings})


def identity(cfg: DictConfig | Mapping, *, data_dir: bool = False) -> dict[str, Any]:
    """The settings of a run that can change its numbers, flattened to dotted keys; `data_dir` keeps
    the data folder's path, the only clue to its data where a run recorded no fingerprint."""
    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    try:
        tree = OmegaConf.to_container(node, resolve=True)
    except Exception:  # a saved config whose interpolations no longer resolve here: compared as written
        tree = OmegaConf.to_container(node, resolve=False)
    skipped = [s for s in NOT_IDENTITY if not (data_dir and s == "data.dir")]
    settings = flat(tree)
    idle = [group for group, option in IDLE_OPTIONS.items() if settings.get(f"{group}.name") == option]
    unread = [
        (switch, key) for (switch, value), keys in IDLE_WHEN.items() if settings.get(switch) == value for key in keys
    ]
    return {
        k: v
        for k, v in declared_only(settings).items()
        if not any(k == skip or k.startswith(skip + ".") for skip in skipped)
        and not any(k.startswith(group + ".") and k != f"{group}.name" for group in idle)
        and not any((k == key or k.startswith(key + ".")) and k != switch for switch, key in unread)
    }


def data_fingerprint(splits: Mapping[str, Any]) -> str:
    """SHA-256 of every example a run reads, by agent and part, in the order the run reads them."""
    digest = hashlib.sha256()
    for agent, split in splits.items():
        for part in ("seed", "stream", "test"):
            for e in getattr(split, part):
                digest.update(json.dumps([agent, part, e.id, e.question, e.answer], ensure_ascii=False).encode())
    return digest.hexdigest()


def local_fingerprint(cfg: DictConfig) -> Optional[str]:
    """The data fingerprint of a run reading a data folder, read before the run (a hub dataset's is
    known only once the run reads it: None)."""
    from ms.agents import agents_from
    from ms.data import load_splits

    return data_fingerprint(load_splits(cfg.data, agents_from(cfg.agents))) if cfg.data.hf is None else None


def input_settings(cfg: DictConfig) -> InputSettings:
    """What of the root config `cfg` decides the backbones a run loads and the other files it reads."""
    return InputSettings(
        **{name: cfg[name] for name in ("agents", "backbone", "gate", "stream", "access", "retriever", "memory")},
        running=cfg.data.agents,
        grader=cfg.scorer.backbone,
        labeller=cfg.train.backbone,
        pool_mode=cfg.pool.mode,
        evaluation=cfg.eval,
    )


def record(cfg: DictConfig, fingerprint: str) -> dict:
    """metrics.json's `cell`: what a later request must match for this run to answer it. The commit is
    in the provenance, recorded but not compared: a results commit made mid-sweep changes no code."""
    return {
        "data_sha256": fingerprint,
        "config": identity(cfg),
        "dtypes": dtypes(input_settings(cfg)),
        "inputs": inputs_record(input_settings(cfg)),
        "code_sha256": code_sha256(),
    }


def stored(folder: Path, cell: Optional[CellRecord]) -> tuple[Optional[dict], Optional[str], bool]:
    """(settings, data fingerprint, whether the record is the run's own) a finished run was made with:
    from its metrics.json's cell record, or, for runs that predate the record (`cell` None), from the
    config Hydra saved beside it (then without a fingerprint)."""
    if cell is not None:
        return with_added(cell.config or {}), cell.data_sha256, True
    saved = folder / ".hydra" / "config.yaml"
    try:
        return identity(yaml.safe_load(saved.read_text(encoding="utf-8")) or {}, data_dir=True), None, False
    except (OSError, yaml.YAMLError):
        return None, None, False


def differences(wanted: Mapping[str, Any], found: Mapping[str, Any], *, every_key: bool) -> list[str]:
    """Dotted keys whose values differ. `every_key` False compares only the keys both hold: a run that
    predates the cell record may lack settings added since, whose value it ran with is not known."""
    shared = wanted.keys() & found.keys()
    unshared = (wanted.keys() ^ found.keys()) if every_key else set()
    return sorted(k for k in shared if wanted[k] != found[k]) + sorted(unshared)


def check_same_cell(folder: Path, metrics: Mapping, cfg: DictConfig, fingerprint: Optional[str]) -> Optional[str]:
    """Raise UserError (one line, naming what differs and the folder) unless the finished run in
    `folder` was made with `cfg`'s settings, on the same examples, from the same files and code.
    Returns the hash of today's code where it differs from the run's and `cfg` accepts that (for the
    caller to record), else None. A record older than the files' or the code's keys is not compared
    on them."""
    cell = CellRecord.from_json(metrics.get("cell"))  # None where the run predates the record (not `own`)
    settings, data, own = stored(folder, cell)
    if settings is None:
        raise UserError(
            f"{folder} holds a finished run whose settings cannot be read (no cell record in "
            f"metrics.json, no .hydra/config.yaml); move it away or name another output folder"
        )
    keys = differences(identity(cfg, data_dir=not own), settings, every_key=own)
    if fingerprint is not None and data is not None and data != fingerprint:
        keys.insert(0, DATA_KEY)
    if cell is not None and isinstance(cell.dtypes, Mapping):
        here = dtypes(input_settings(cfg))
        keys += [
            f"backbone {n}'s resolved dtype"
            for n in sorted(here.keys() | cell.dtypes.keys())
            if here.get(n) != cell.dtypes.get(n)
        ]
    if cell is not None and isinstance(cell.inputs, Mapping):
        keys += changed_inputs(inputs_record(input_settings(cfg), known=cell.inputs), cell.inputs)
    code = code_sha256()
    other_code = cell is not None and bool(cell.code_sha256) and code not in (cell.code_sha256, *cell.accepted_code)
    if keys:
        keys += [CODE_KEY] * other_code
        shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise UserError(
            f"{folder} holds a finished run of other settings ({shown}); it is left as it "
            f"is: name another output folder (hydra.run.dir= or hydra.sweep.dir=), or move that one away"
        )
    if other_code and not cfg.get("accept_code_change", False):
        raise UserError(
            f"{folder} holds a finished run made by other code (only the ms package's source differs); "
            f"it is left as it is: add accept_code_change=true to reuse its numbers as this code's "
            f"(recorded in its metrics.json), or name another output folder"
        )
    return code if other_code else None
