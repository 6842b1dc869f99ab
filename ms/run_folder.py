"""A run's folder: its files, whether it finished, what an interrupted attempt left, and its pool.

Re-running a sweep redoes only unfinished cells; these functions decide what "finished" means and
clean up after an attempt that was killed."""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

from omegaconf import DictConfig

from ms.config.files import (DECISIONS_FILE, METRICS_FILE, POOL_FILENAME, PREDICTIONS_FILE, RUN_ID_FILE,
                             USAGE_FILE)
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


def clear_partial(out_dir: Path, cfg: DictConfig) -> None:
    """Remove what an interrupted run left here, so a redo starts from an empty pool."""
    names = [PREDICTIONS_FILE, DECISIONS_FILE, USAGE_FILE]
    if not cfg.pool.path and cfg.pool.backend == "sqlite":
        names += [POOL_FILENAME + suffix for suffix in ("", "-wal", "-shm")]
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


def open_run_pool(cfg: DictConfig, out_dir: Path) -> Pool:
    """The run's pool, without what an interrupted earlier attempt of this run admitted to it: that
    attempt's memories would otherwise count twice once the redo admits them again. Other runs'
    memories stay, and so do seeds (see Pool.forget_run): every run adds the same seed pairs, the
    first to write one is recorded as its owner, and others rely on it."""
    run_id, redo = run_id_for(out_dir)
    pool = open_pool(cfg.pool, out_dir / POOL_FILENAME, run_id=run_id, run_label=str(out_dir))
    if redo:
        removed = pool.forget_run(run_id)
        log.info("redoing interrupted run %s: removed the %d memories its earlier attempt admitted to %s",
                 run_id, removed, pool.location)
    return pool
