"""The pool in one SQLite file: safe for processes on one machine (WAL, one writer at a time), its
schema, and its migration from older files."""

import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ms.config.files import POOL_FILENAME, not_sqlite, writable_folder
from ms.pool.backend import Database, Session
from ms.pool.schema import (
    ADDED_IN,
    MEMORY_COLUMNS,
    OLDEST_ALTERABLE,
    SCHEMA_VERSION,
    PoolFileError,
    added_columns,
    check_readable,
    damaged_pool_message,
    memories_table,
    removals_table,
)


def _SPELL(declared: str) -> str:
    return declared  # the portable types are SQLite's own


MEMORIES_TABLE = memories_table("id INTEGER PRIMARY KEY AUTOINCREMENT", _SPELL)

# Executed one by one inside the opening transaction (executescript would commit first), so two
# processes opening a new file at once do not race to create it.
SCHEMA = (
    MEMORIES_TABLE,
    # The runs that wrote to this file: `run_id` is stored in each run's folder, `label` is that folder.
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        label TEXT,
        first_opened REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memories_run ON memories (run_id)",
    # Index entries are ordered by (scope, rowid), so listing a scope by id and max(id) per scope
    # are index walks, not table scans.
    "CREATE INDEX IF NOT EXISTS memories_scope ON memories (scope)",
    "CREATE INDEX IF NOT EXISTS memories_scope_tier ON memories (scope, tier)",
    # Every update or delete of a memory leaves its id here, whichever process made it, so a reader
    # holding a scope in memory catches up on the rows that changed instead of re-reading the scope
    # (new memories it finds by id, which only grows). Additive: older files gain it when opened.
    """CREATE TABLE IF NOT EXISTS memory_changes (
        seq INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL,
        scope TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memory_changes_scope ON memory_changes (scope, seq)",
    "CREATE INDEX IF NOT EXISTS memory_changes_memory ON memory_changes (memory_id)",
    # Schema 5: one audit record per removal (ms.pool.removal). Additive: older files gain it when opened.
    removals_table("id INTEGER PRIMARY KEY AUTOINCREMENT", _SPELL),
    # Only each memory's newest change is kept: a reader asks which ids changed after the seq it has
    # seen, and an id's newest seq answers that for every reader, so the log holds at most one row per
    # memory instead of a row per retrieval. The new row goes in before the old one goes out: seq is a
    # plain rowid (max + 1), and removing the largest first would hand its number out again, hiding the
    # change from a reader that saw it. Files written before this kept every change: their old triggers
    # are replaced and their log pruned the same way when opened.
    "DROP TRIGGER IF EXISTS memories_updated",
    "DROP TRIGGER IF EXISTS memories_deleted",
    "DELETE FROM memory_changes WHERE seq NOT IN (SELECT max(seq) FROM memory_changes GROUP BY memory_id)",
    """CREATE TRIGGER IF NOT EXISTS memory_updated_newest AFTER UPDATE ON memories BEGIN
        INSERT INTO memory_changes (memory_id, scope) VALUES (NEW.id, NEW.scope);
        DELETE FROM memory_changes WHERE memory_id = NEW.id
            AND seq < (SELECT max(seq) FROM memory_changes WHERE memory_id = NEW.id); END""",
    """CREATE TRIGGER IF NOT EXISTS memory_deleted_newest AFTER DELETE ON memories BEGIN
        INSERT INTO memory_changes (memory_id, scope) VALUES (OLD.id, OLD.scope);
        DELETE FROM memory_changes WHERE memory_id = OLD.id
            AND seq < (SELECT max(seq) FROM memory_changes WHERE memory_id = OLD.id); END""",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

# Schema 1 had neither run ids nor the columns later versions added.
_V1_COLUMNS = ", ".join(
    ["id"]
    + [name for name, _ in MEMORY_COLUMNS if name != "run_id" and not any(name in added for added in ADDED_IN.values())]
)


def migrate(conn: sqlite3.Connection, found: int) -> None:
    """Bring a file of schema `found` up to the current one inside the opening transaction, ids and
    rows kept. Schema 1 is rebuilt, since AUTOINCREMENT cannot be added by ALTER; later ones gain columns."""
    if found == 1:
        conn.execute("ALTER TABLE memories RENAME TO memories_v1")  # its indexes and triggers go with it
        conn.execute(MEMORIES_TABLE)
        conn.execute(f"INSERT INTO memories ({_V1_COLUMNS}) SELECT {_V1_COLUMNS} FROM memories_v1")
        conn.execute("DROP TABLE memories_v1")
    elif found >= OLDEST_ALTERABLE:
        for statement in added_columns(found, _SPELL):
            conn.execute(statement)


def open_failure(path: Path, error: BaseException) -> str:
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
        return damaged_pool_message(path, error)
    return (
        f"cannot open the pool {path} ({error}): make its folder writable, or set pool.path to a file "
        f"in a writable folder"
    )


class SqliteSession(Session):
    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[Sequence[Any]]:
        return self._conn.execute(sql, tuple(params)).fetchall()

    def run(self, sql: str, params: Iterable[Any] = ()) -> int:
        return self._conn.execute(sql, tuple(params)).rowcount

    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)


class SqliteDatabase(Database):
    """One connection to a pool file. Processes share a pool by opening the same path; within a
    process, one connection serves several threads (a lock serializes it)."""

    INTS = "(SELECT value FROM json_each(?))"
    TEXTS = INTS

    @classmethod
    def connect(cls, cfg, default_path) -> "SqliteDatabase":
        """The file pool.path names, else the run's own (`default_path`)."""
        return cls(cfg.path or default_path)

    @classmethod
    def run_files(cls, cfg) -> list[str]:
        """The run's own pool file and its WAL files; none where pool.path names a file elsewhere."""
        return [] if cfg.path else [POOL_FILENAME + suffix for suffix in ("", "-wal", "-shm")]

    @classmethod
    def problems(cls, cfg) -> Iterator[str]:
        """pool.path must lie in a writable folder, and a file already there must be a SQLite database."""
        if not cfg.path:
            return
        why = writable_folder(Path(cfg.path).parent)
        if why:
            yield f"invalid setting pool.path={cfg.path}: {why}; point pool.path at a writable folder"
        if not_sqlite(Path(cfg.path)):
            yield damaged_pool_message(Path(cfg.path), "file is not a database")

    def __init__(self, path: str | Path, timeout_s: float = 60.0):
        self.path = Path(path)
        self.location = str(path)
        self._lock = threading.RLock()
        try:
            self._open(str(path), timeout_s)
        except (OSError, sqlite3.DatabaseError) as error:
            raise PoolFileError(open_failure(self.path, error)) from error

    def _open(self, path: str, timeout_s: float) -> None:
        if path != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode, so every write opens its own BEGIN IMMEDIATE: the write lock is taken up
        # front and a concurrent writer waits out the busy timeout instead of failing mid-transaction.
        self._conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        self._session = SqliteSession(self._conn)
        try:
            self._enable_wal(timeout_s)
            # With WAL, NORMAL survives a process crash; only a power cut can drop the latest commits.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self._transaction("BEGIN IMMEDIATE"):
                found = self._conn.execute("PRAGMA user_version").fetchone()[0]
                check_readable(found, range(SCHEMA_VERSION + 1), path, "set pool.path to another file")
                migrate(self._conn, found)
                for statement in SCHEMA:
                    self._conn.execute(statement)
        except BaseException:
            self._conn.close()
            raise

    def _enable_wal(self, timeout_s: float) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite reports BUSY at once here
        # instead of calling the busy handler, so processes opening a new pool together retry.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[SqliteSession]:
        with self._lock:
            self._conn.execute(begin)
            try:
                yield self._session
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def write(self) -> Iterator[SqliteSession]:
        return self._transaction("BEGIN IMMEDIATE")

    @contextmanager
    def read(self, *, consistent: bool = False) -> Iterator[SqliteSession]:
        if consistent:
            with self._transaction("BEGIN") as session:
                yield session
        else:
            with self._lock:
                yield self._session

    def change_token(self) -> tuple[int, int]:
        # data_version moves when another connection commits; total_changes counts this one's writes.
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0], self._conn.total_changes

    def close(self) -> None:
        with self._lock:
            self._conn.close()
