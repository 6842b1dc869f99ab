"""A run's folder: its files, whether it finished, what an interrupted attempt left, and its pool.

Re-running a sweep redoes only unfinished cells; these functions decide what "finished" means and
clean up after an attempt that was killed."""

import json
import logging
import os
import re
import shlex
import shutil
import time
import uuid
from pathlib import Path

from ms.config.files import (
    DECISIONS_FILE,
    FAILED_FILE,
    METRICS_FILE,
    POOL_FILENAME,
    PREDICTIONS_FILE,
    RETIREMENTS_FILE,
    RUN_ID_FILE,
    USAGE_FILE,
)
from ms.config.parts import POOL_BACKENDS
from ms.pool import Pool, open_pool

log = logging.getLogger(__name__)


def write_atomic(path: Path, text: str) -> None:
    """A reader never sees half a file: write beside it, then rename over it."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def completed(out_dir: Path) -> dict | None:
    """The metrics of a finished run in this folder, or None."""
    try:
        metrics = json.loads((out_dir / METRICS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return metrics if metrics.get("complete") is True else None


def clear_partial(out_dir: Path, pool_cfg) -> None:
    """Remove what an interrupted run left here, so a redo starts from an empty pool: its files, and
    its pool's where the pool (`pool_cfg`, a PoolConfig) lives in the run's folder."""
    names = [PREDICTIONS_FILE, DECISIONS_FILE, RETIREMENTS_FILE, USAGE_FILE, FAILED_FILE]
    names += POOL_BACKENDS.load(pool_cfg.backend).run_files(pool_cfg)
    for name in names:
        (out_dir / name).unlink(missing_ok=True)


def run_id_for(out_dir: Path) -> tuple[str, bool]:
    """The run's stable id, and whether an earlier attempt made it. Written before the run's first
    memory, so a redo knows which memories its interrupted attempt admitted to a shared pool."""
    path = out_dir / RUN_ID_FILE
    if path.is_file() and path.read_text(encoding="utf-8").strip():
        return path.read_text(encoding="utf-8").strip(), True
    run_id = uuid.uuid4().hex
    write_atomic(path, run_id + "\n")
    return run_id, False


def open_run_pool(pool_cfg, out_dir: Path) -> Pool:
    """The run's pool, without what an interrupted earlier attempt of this run admitted to it: that
    attempt's memories would otherwise count twice once the redo admits them again. Other runs'
    memories stay, and so do seeds (see Pool.forget_run): every run adds the same seed pairs, the
    first to write one is recorded as its owner, and others rely on it."""
    run_id, redo = run_id_for(out_dir)
    pool = open_pool(pool_cfg, out_dir / POOL_FILENAME, run_id=run_id, run_label=str(out_dir))
    if redo:
        removed = pool.forget_run(run_id)
        log.info(
            "redoing interrupted run %s: removed the %d memories its earlier attempt admitted to %s",
            run_id,
            removed,
            pool.location,
        )
    return pool


# What Hydra writes into a job's folder before the job runs: a folder holding nothing else never began.
HYDRA_ONLY_FILES = {".hydra", "cli.log"}
# Overrides that name where a job's folder is: the resume command names the folder itself instead.
FOLDER_OVERRIDES = ("hydra.run.dir=", "hydra.sweep.dir=", "hydra.sweep.subdir=", "hydra.mode=")


def began(out_dir: Path) -> bool:
    """Whether a run started in this folder: it writes its id before its first memory."""
    return (out_dir / RUN_ID_FILE).is_file()


def hydra_quoted(value: str) -> str:
    """`value` as one double-quoted value of Hydra's override grammar, which gives it back unchanged:
    '=', ',', brackets and spaces stay part of it. In a quoted value a backslash escapes only a quote,
    an interpolation's `${` or the backslashes before them; so each of these (the closing quote
    included) gets a backslash, and the backslashes before it are doubled."""
    return '"' + re.sub(r'(\\*)("|\$\{|\Z)', lambda m: m[1] * 2 + ("\\" + m[2] if m[2] else ""), value) + '"'


def folder_override(key: str, folder) -> str:
    """`key=FOLDER` (hydra.run.dir, hydra.sweep.dir) as one word to paste into a shell: quoted for
    Hydra's override grammar, then for the shell. Every printed resume command names its folder so:
    a folder Hydra named after the overrides holds '=', ',' and brackets, which Hydra would otherwise
    read as syntax."""
    return shlex.quote(f"{key}={hydra_quoted(str(folder))}")


def resume_command(prog: str, out_dir: Path, task: list[str], hydra: list[str]) -> str:
    """The command that resumes this run in its own folder (for a sweep's cell, that cell alone): its
    overrides, and hydra.run.dir naming the folder, whose run id makes it remove this attempt's memories first."""
    kept = [o for o in hydra if not o.startswith(FOLDER_OVERRIDES)]
    return f"{shlex.join([prog, *task, *kept])} {folder_override('hydra.run.dir', out_dir)}"


def mark_failed(out_dir: Path, reason: str) -> None:
    """Say why an attempt that had begun stopped, so that ms-report lists the folder as failed; a
    folder where nothing began is removed instead: it holds only what Hydra wrote before the job. A
    finished run's folder is left as it is (a refused request must change nothing there)."""
    if completed(out_dir) is not None:
        return
    if began(out_dir):
        write_atomic(
            out_dir / FAILED_FILE,
            json.dumps({"reason": reason, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, ensure_ascii=False) + "\n",
        )
    elif out_dir.is_dir() and {p.name for p in out_dir.iterdir()} <= HYDRA_ONLY_FILES:
        shutil.rmtree(out_dir, ignore_errors=True)


def failure(out_dir: Path) -> str | None:
    """Why the attempt in this folder failed, where it says so."""
    try:
        return str(json.loads((out_dir / FAILED_FILE).read_text(encoding="utf-8")).get("reason"))
    except (OSError, ValueError, AttributeError):
        return None
