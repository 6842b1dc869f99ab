"""The shared memory pool: prompt-answer pairs in one SQLite file that several agents, threads and
processes read and grow together.

A *scope* is the pool an agent shares: its domain name under the Domain-pool, or "single" under the
Single-pool. One file can hold every scope, and `(scope, content_hash)` is unique, so adding a memory
that is already there is a no-op instead of a duplicate that would skew retrieval and training.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

POOL_FILENAME = "pool.sqlite"
POOL_MODES = ("domain", "single")
ORIGINS = ("seed", "stream", "imported", "summary")
TIERS = ("short", "long")
SCHEMA_VERSION = 1

_REQUIRED = ("scope", "agent", "domain", "question", "answer", "origin")
_OPTIONAL = ("score", "importance", "tier", "sources")
# Everything else about a memory is fixed once written: its content is what the hash vouches for.
_MUTABLE = ("tier", "consolidated", "importance")
_COUNTABLE = ("scope", "agent", "domain", "origin", "tier", "consolidated")

# Executed one by one inside the opening transaction (executescript would commit first), so two
# processes opening a new file at once do not race to create it.
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY,
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
        UNIQUE (scope, content_hash)
    )""",
    # Index entries are ordered by (scope, rowid), so listing a scope by id and max(id) per scope
    # are index walks, not table scans.
    "CREATE INDEX IF NOT EXISTS memories_scope ON memories (scope)",
    "CREATE INDEX IF NOT EXISTS memories_scope_tier ON memories (scope, tier)",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)


@dataclass(frozen=True)
class Memory:
    id: int
    scope: str
    agent: str
    domain: str
    question: str
    answer: str
    score: float | None
    importance: float | None
    origin: str
    added_step: int
    added_at: float
    last_retrieved_step: int | None
    last_retrieved_at: float | None
    content_hash: str
    tier: str
    consolidated: bool
    sources: list[int] | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_COLUMNS = ", ".join(f.name for f in dataclasses.fields(Memory))


def scope_for(domain: str, pool_mode: str) -> str:
    """The scope an agent of `domain` reads and writes under `pool_mode`."""
    if pool_mode == "domain":
        return domain
    if pool_mode == "single":
        return "single"
    raise ValueError(f"unknown pool mode {pool_mode!r}; allowed: {', '.join(POOL_MODES)}")


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip())


def content_hash(question: str, answer: str) -> str:
    """Identity of a memory's content; whitespace-only differences hash equal."""
    blob = _normalize(question) + "\x1f" + _normalize(answer)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _check_mutable(field: str, value: Any) -> Any:
    """The one place that validates the columns a caller may set, on add and on update."""
    if field == "tier":
        if value not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {value!r}")
        return value
    if field == "importance":
        if value is not None and not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"importance must lie in [0, 1], got {value!r}")
        return None if value is None else float(value)
    if field == "consolidated":
        return int(bool(value))
    raise ValueError(f"{field!r} cannot be changed; mutable fields: {', '.join(_MUTABLE)}")


def _row_for_insert(item: dict[str, Any], step: int, now: float) -> tuple:
    unknown = set(item) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:  # a misspelt key would otherwise be dropped without a word
        raise ValueError(f"unknown memory keys: {', '.join(sorted(unknown))}")
    for key in _REQUIRED:
        value = item.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"memory is missing required key {key!r} (or it is empty)")
    if item["origin"] not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, got {item['origin']!r}")
    score = item.get("score")
    if score is not None and not 0.0 <= float(score) <= 100.0:
        raise ValueError(f"score is a rubric score in [0, 100], got {score!r}")
    sources = item.get("sources")
    return (
        item["scope"], item["agent"], item["domain"], item["question"], item["answer"],
        None if score is None else float(score),
        _check_mutable("importance", item.get("importance")),
        item["origin"], step, now,
        content_hash(item["question"], item["answer"]),
        _check_mutable("tier", item.get("tier", "long")),
        None if sources is None else json.dumps([int(s) for s in sources]),
    )


def _memory(row: sqlite3.Row) -> Memory:
    values = dict(row)
    values["consolidated"] = bool(values["consolidated"])
    if values["sources"] is not None:
        values["sources"] = json.loads(values["sources"])
    return Memory(**values)


class Pool:
    """One connection to a pool file. Processes share a pool by opening the same path; within a
    process, one Pool may be used from several threads (a lock serializes its connection)."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # Autocommit mode, so every write opens its own BEGIN IMMEDIATE: the write lock is taken up
        # front and a concurrent writer waits out the busy timeout instead of failing mid-transaction.
        self._conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None,
                                     check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        try:
            self._enable_wal(timeout_s)
            # With WAL, NORMAL survives a process crash; only a power cut can drop the latest commits.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self._write():
                found = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if found not in (0, SCHEMA_VERSION):
                    raise RuntimeError(f"{path} holds pool schema {found}; this code reads {SCHEMA_VERSION}")
                for statement in _SCHEMA:
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

    @classmethod
    def for_run(cls, run_dir: str | Path) -> Pool:
        """The default: one pool file inside the run's output folder."""
        return cls(Path(run_dir) / POOL_FILENAME)

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def add(self, items: list[dict[str, Any]], step: int) -> list[int | None]:
        """Insert `items` in one transaction. Returns each item's new id, or None where the same
        content was already in its scope (earlier, or earlier in this batch)."""
        now = time.time()
        rows = [_row_for_insert(item, step, now) for item in items]  # validate all before writing
        ids: list[int | None] = []
        with self._write():
            for row in rows:
                cursor = self._conn.execute(
                    "INSERT INTO memories (scope, agent, domain, question, answer, score, importance,"
                    " origin, added_step, added_at, content_hash, tier, sources)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (scope, content_hash) DO NOTHING", row)
                ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
        return ids

    def get(self, ids: Iterable[int]) -> list[Memory]:
        """Memories by id, in the order asked."""
        ids = [int(i) for i in ids]
        # One JSON parameter instead of one '?' per id: no limit on how many ids are asked for.
        rows = self._read(f"SELECT {_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                          [json.dumps(ids)])
        by_id = {row["id"]: _memory(row) for row in rows}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise KeyError(f"no memories with ids {missing}")
        return [by_id[i] for i in ids]

    def memories(self, scope: str, *, tier: str | None = None,
                 include_consolidated: bool = True) -> list[Memory]:
        """A scope's memories, oldest first."""
        sql = f"SELECT {_COLUMNS} FROM memories WHERE scope = ?"
        params: list[Any] = [scope]
        if tier is not None:
            sql += " AND tier = ?"
            params.append(_check_mutable("tier", tier))
        if not include_consolidated:
            sql += " AND consolidated = 0"
        return [_memory(row) for row in self._read(sql + " ORDER BY id", params)]

    def ids(self, scope: str) -> list[int]:
        return [row[0] for row in self._read("SELECT id FROM memories WHERE scope = ? ORDER BY id", [scope])]

    def count(self, scope: str | None = None) -> int:
        if scope is None:
            return self._read("SELECT count(*) FROM memories")[0][0]
        return self._read("SELECT count(*) FROM memories WHERE scope = ?", [scope])[0][0]

    def scopes(self) -> list[str]:
        return [row[0] for row in self._read("SELECT DISTINCT scope FROM memories ORDER BY scope")]

    def count_by(self, field: str, scope: str | None = None) -> dict[Any, int]:
        """How many memories per value of `field` (e.g. agent, origin), optionally within a scope."""
        if field not in _COUNTABLE:  # the name goes into the SQL text, so only known columns pass
            raise ValueError(f"cannot count by {field!r}; allowed: {', '.join(_COUNTABLE)}")
        where, params = ("WHERE scope = ?", [scope]) if scope is not None else ("", [])
        rows = self._read(f"SELECT {field}, count(*) FROM memories {where} GROUP BY {field} ORDER BY {field}",
                          params)
        return {row[0]: row[1] for row in rows}

    def mark_retrieved(self, ids: Iterable[int], step: int) -> None:
        """Record that `ids` were just retrieved: recency scores count age from here."""
        ids = sorted({int(i) for i in ids})
        now = time.time()
        with self._write():
            cursor = self._conn.execute(
                "UPDATE memories SET last_retrieved_step = ?, last_retrieved_at = ?"
                " WHERE id IN (SELECT value FROM json_each(?))", (step, now, json.dumps(ids)))
            if cursor.rowcount != len(ids):  # raising rolls the whole update back
                known = {row[0] for row in self._conn.execute(
                    "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))}
                raise KeyError(f"no memories with ids {[i for i in ids if i not in known]}")

    def set_fields(self, memory_id: int, **fields: Any) -> None:
        """Change the mutable columns (tier, consolidated, importance) of one memory."""
        if not fields:
            raise ValueError(f"nothing to set; mutable fields: {', '.join(_MUTABLE)}")
        values = {name: _check_mutable(name, value) for name, value in fields.items()}
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._write():
            cursor = self._conn.execute(f"UPDATE memories SET {assignments} WHERE id = ?",
                                        (*values.values(), memory_id))
            if cursor.rowcount == 0:
                raise KeyError(f"no memory with id {memory_id}")

    def version(self, scope: str) -> int:
        """Largest id in `scope` (0 when empty). Ids only grow, so a cache of embeddings built at
        version v needs just the memories with id > v to catch up."""
        return self._read("SELECT coalesce(max(id), 0) FROM memories WHERE scope = ?", [scope])[0][0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
