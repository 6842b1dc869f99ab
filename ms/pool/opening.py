"""Which pool a run opens: the backend pool.backend names (ms.config.parts.POOL_BACKENDS), so the rest
of ms never asks which one it is."""

from __future__ import annotations

from pathlib import Path

from ms.config.parts import POOL_BACKENDS
from ms.pool.store import Pool


def open_pool(cfg, default_path: Path, *, run_id: str | None = None, run_label: str | None = None) -> Pool:
    """The pool that `cfg` (a PoolConfig) names: the SQLite file pool.path (`default_path` when unset),
    or the PostgreSQL database pool.dsn; or any registered backend's."""
    return Pool(POOL_BACKENDS.load(cfg.backend).connect(cfg, default_path), run_id=run_id, run_label=run_label)
