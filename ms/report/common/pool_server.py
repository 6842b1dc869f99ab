"""Who wrote each memory of a run whose pool lives on a PostgreSQL server (pool/backend=postgres), for
the sharing matrix and memories.csv.

The connection string comes from MS_POOL_DSN in ms-report's environment, as it came to ms-run: the
run's .hydra/config.yaml holds only the reference to that variable, so nothing the report writes can
name the server's DSN. The report only reads (a read-only transaction): it never creates the pool's
tables on a database that lacks them, as opening the pool would.
"""

import os
from pathlib import Path

from ms.common.errors import UserError
from ms.config.files import WRITERS_FILE
from ms.config.schema import POOL_DSN_ENV
from ms.report.common.saved_config import SavedConfig

# The writers table's columns and the run that admitted each memory; `run` is that run's folder.
SELECT = (
    "SELECT m.id, m.agent, m.domain, m.origin, m.backbone, m.run_id, r.label AS run"
    " FROM memories m LEFT JOIN runs r ON r.run_id = m.run_id"
)


def pool_dsn(run_dir: Path, saved: SavedConfig) -> str:
    """MS_POOL_DSN; else a DSN the run's config spells out (an experiment file may, without a password)."""
    dsn = os.environ.get(POOL_DSN_ENV)
    written = saved.pool.dsn
    if not dsn and written and "${" not in written:
        dsn = written
    if not dsn:
        raise UserError(
            f"{run_dir} kept its pool on PostgreSQL (pool/backend=postgres): set {POOL_DSN_ENV} to the "
            f"connection string of the database it wrote to, or put its {WRITERS_FILE} in the folder "
            f"(python -m ms.report.export)"
        )
    return dsn


def server_rows(run_dir: Path, saved: SavedConfig) -> list[dict]:
    """Every memory of the run's PostgreSQL pool as a writers row (id, agent, domain, origin, backbone,
    run_id, run). A server that cannot be reached or read is one line naming it, never the password."""
    try:
        import psycopg
    except ImportError as error:  # the postgres extra
        raise UserError(
            f"reading the pool of {run_dir} from PostgreSQL needs psycopg ({error}): pip install 'ms[postgres]'"
        ) from None
    from ms.pool.postgres_backend import CONNECT_TIMEOUT_S, dsn_problem, failure_line, server_of

    dsn = pool_dsn(run_dir, saved)
    problem = dsn_problem(dsn)
    if problem:
        raise UserError(f"cannot use {POOL_DSN_ENV} to read the pool of {run_dir}: {problem}")
    host, port, database = server_of(dsn)
    where = f"the PostgreSQL server at host {host}, port {port}, database {database}"
    try:
        with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.read_only = True
            cursor = conn.execute(SELECT)
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
    except psycopg.errors.UndefinedTable:
        raise UserError(
            f"{where} holds no ms pool (no memories table): set {POOL_DSN_ENV} to the database {run_dir} wrote to"
        ) from None
    except psycopg.Error as error:
        raise UserError(
            f"cannot read the pool of {run_dir} from {where} ({failure_line(error)}): start the server, or set "
            f"{POOL_DSN_ENV} to the database the run wrote to"
        ) from None
