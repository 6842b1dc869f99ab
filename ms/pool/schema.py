"""The pool file's schema, its migration from older files, and the errors that name a pool file
that cannot be used."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from ms.errors import UserError
from ms.pool.records import Memory

# 2: memories record the run that admitted them (run_id), the runs table, and ids never reused
# (AUTOINCREMENT), so a run's memories can be removed without a later memory taking their ids.
# 3: memories record the backbone that wrote them (agents may run on different backbones).
# 4: memories carry their measured utility as an in-context example (a running mean, ms.utility)
#    and how many measurements it averages.
SCHEMA_VERSION = 4

# Executed one by one inside the opening transaction (executescript would commit first), so two
# processes opening a new file at once do not race to create it.
MEMORIES_TABLE = """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL,
        agent TEXT NOT NULL,
        domain TEXT NOT NULL,
        question TEXT NOT NULL,
        answer TEXT NOT NULL,
        score REAL,
        importance REAL,
        origin TEXT NOT NULL,
        added_step INTEGER NOT NULL,
        added_at REAL NOT NULL,
        last_retrieved_step INTEGER,
        last_retrieved_at REAL,
        content_hash TEXT NOT NULL,
        tier TEXT NOT NULL DEFAULT 'long',
        consolidated INTEGER NOT NULL DEFAULT 0,
        sources TEXT,
        run_id TEXT,
        backbone TEXT,
        utility REAL,
        utility_n INTEGER NOT NULL DEFAULT 0,
        UNIQUE (scope, content_hash)
    )"""
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


_V1_COLUMNS = ", ".join(f.name for f in dataclasses.fields(Memory)
                        if f.name not in ("run_id", "backbone", "utility", "utility_n"))


def migrate_from_v1(conn: sqlite3.Connection) -> None:
    """Rebuild a schema-1 table as the current one inside the opening transaction: same ids and rows,
    run_id and backbone NULL and no utility measured (written before any was recorded). A rebuild, since AUTOINCREMENT
    cannot be added by ALTER."""
    conn.execute("ALTER TABLE memories RENAME TO memories_v1")  # its indexes and triggers go with it
    conn.execute(MEMORIES_TABLE)
    conn.execute(f"INSERT INTO memories ({_V1_COLUMNS}) SELECT {_V1_COLUMNS} FROM memories_v1")
    conn.execute("DROP TABLE memories_v1")


def migrate_from_v2(conn: sqlite3.Connection) -> None:
    """Add schema 3's backbone column in place (ids and rows untouched); older memories read NULL."""
    conn.execute("ALTER TABLE memories ADD COLUMN backbone TEXT")


def migrate_from_v3(conn: sqlite3.Connection) -> None:
    """Add schema 4's utility columns in place (ids and rows untouched); older memories are unmeasured."""
    conn.execute("ALTER TABLE memories ADD COLUMN utility REAL")
    conn.execute("ALTER TABLE memories ADD COLUMN utility_n INTEGER NOT NULL DEFAULT 0")


# Each step takes a file from the schema it is keyed by to the next; a schema-1 file is rebuilt as
# the current table in one step.
MIGRATIONS = {1: (migrate_from_v1,), 2: (migrate_from_v2, migrate_from_v3), 3: (migrate_from_v3,)}


class PoolFileError(UserError):
    """The pool file cannot be opened, is damaged, or has a schema this code does not read."""


def damaged_pool_message(path: Path, reason: object) -> str:
    return (f"the pool {path} is damaged ({reason}). It holds the memories admitted by every run that "
            f"shared it, so those runs cannot be resumed or redone on it: restore it from a copy, or move it "
            f"aside and re-run them on a new pool (pool.path)")


def open_failure(path: Path, error: BaseException) -> str:
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
        return damaged_pool_message(path, error)
    return (f"cannot open the pool {path} ({error}): make its folder writable, or set pool.path to a file "
            f"in a writable folder")


