"""Each pool backend's own settings: one dataclass per registered backend, extending what every pool
shares (ms.config.PoolConfig: its mode and backend), registered as the schema of its option in the
`pool/backend` group (ms.config.options; conf/pool/backend/<name>.yaml names it in its defaults list).
So `pool.dsn` under the SQLite pool, or `pool.path` under PostgreSQL, is refused at composition in one
line (ms.cli.compose).

Light on purpose: it imports the config layer only, no torch, since composing a config loads it.
"""

from dataclasses import dataclass
from typing import Optional

from ms.config.schema import POOL_DSN_ENV, PoolConfig


@dataclass
class SqliteSettings(PoolConfig):
    """pool/backend=sqlite: one file, shared by the processes of one machine (ms.pool.sqlite_backend)."""

    path: Optional[str] = None  # None: pool.sqlite in the run folder; a path lets processes share one


@dataclass
class PostgresSettings(PoolConfig):
    """pool/backend=postgres: a server, shared by processes on several machines (ms.pool.postgres_backend)."""

    # A libpq connection string (key=value pairs or a postgresql:// URI) without a password. ms-run moves a
    # `pool.dsn=...` it is given into POOL_DSN_ENV before Hydra sees it, so it never reaches a run folder.
    dsn: Optional[str] = "${oc.env:" + POOL_DSN_ENV + ",null}"

    def problems(self):
        """Cross-field limits (see ms.loop.validation): a server pool needs to know its server."""
        if not self.dsn:
            yield (
                "dsn",
                f"pool/backend=postgres needs a connection string: pool.dsn=... or the environment variable {POOL_DSN_ENV}",
            )
