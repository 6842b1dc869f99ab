"""The pool's two backends for tests: a throwaway PostgreSQL cluster on 127.0.0.1 (ms.pool.local_server's,
which runs it as `nobody` under root), and how a test (or a process it starts) opens the same pool on
either backend.

Password authentication is on (scram), with the password given only through PGPASSWORD, so the tests
can check that no message or run file ever shows it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from ms.pool.local_server import Cluster, postgres_bin  # noqa: F401  (conftest imports postgres_bin from here)

PASSWORD = "pw-7Hq2-never-printed"
SERVER_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60"


def throwaway_cluster(bin_dir: Path, port: int) -> Cluster:
    """A new cluster in its own 0700 folder under /tmp (pytest's tmp_path is unreadable to `nobody`),
    initialised with PASSWORD; the caller starts it and removes it."""
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="ms-pg-", dir="/tmp")), port, bin_dir, SERVER_OPTIONS)
    cluster.initdb(PASSWORD)
    return cluster


@dataclass(frozen=True)
class Where:
    """One pool as a picklable value, so a process the test starts opens the same one."""

    backend: str  # sqlite | postgres
    target: str  # the SQLite file, or the PostgreSQL DSN

    def open(self, **kwargs):
        from ms.pool import Pool

        if self.backend == "postgres":
            from ms.pool.postgres_backend import PostgresDatabase

            return Pool(PostgresDatabase(self.target), **kwargs)
        return Pool(self.target, **kwargs)

    def pool_config(self) -> dict:
        """The `pool` settings of a run on this pool."""
        if self.backend == "postgres":
            return {"mode": "domain", "backend": "postgres", "dsn": self.target, "path": None}
        return {"mode": "domain", "backend": "sqlite", "dsn": None, "path": self.target}
