"""Which pool a run opens: the one place that reads pool.backend, so the rest of ms never asks."""

from __future__ import annotations

from pathlib import Path

from ms.pool.store import Pool


def open_pool(cfg, default_path: Path, *, run_id: str | None = None, run_label: str | None = None) -> Pool:
    """The pool that `cfg` (a PoolConfig) names: the SQLite file pool.path (`default_path` when unset),
    or the PostgreSQL database pool.dsn."""
    if cfg.backend == "postgres":
        from ms.pool.postgres_backend import PostgresDatabase  # psycopg is an optional extra

        return Pool(PostgresDatabase(cfg.dsn), run_id=run_id, run_label=run_label)
    return Pool(cfg.path or default_path, run_id=run_id, run_label=run_label)
