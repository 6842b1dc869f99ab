"""One connection to a pool file: adds, reads, counts and the change feed that snapshots follow."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ms.config.files import POOL_FILENAME
from ms.pool.records import (COLUMNS, COUNTABLE, MUTABLE, Memory, ScopeChanges, check_mutable,
                             memory_from_row, row_for_insert)
from ms.pool.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION, PoolFileError, open_failure


class Pool:
    """One connection to a pool file. Processes share a pool by opening the same path; within a
    process, one Pool may be used from several threads (a lock serializes its connection)."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0, *, run_id: str | None = None,
                 run_label: str | None = None):
        self.path = Path(path)
        self.run_id = run_id  # recorded on every memory this connection adds
        self._lock = threading.RLock()
        try:
            self._open(str(path), timeout_s)
        except (OSError, sqlite3.DatabaseError) as error:
            raise PoolFileError(open_failure(self.path, error)) from error
        if run_id is not None:
            with self._write():
                self._conn.execute("INSERT OR IGNORE INTO runs (run_id, label, first_opened) VALUES (?, ?, ?)",
                                   (run_id, run_label, time.time()))

    def _open(self, path: str, timeout_s: float) -> None:
        if path != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
                if found not in (0, *MIGRATIONS, SCHEMA_VERSION):
                    raise PoolFileError(f"the pool {path} holds schema {found}, which this version of ms "
                                        f"cannot read (it reads {SCHEMA_VERSION}): update ms, or set pool.path "
                                        f"to another file")
                for migrate in MIGRATIONS.get(found, ()):
                    migrate(self._conn)
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
        rows = [row_for_insert(item, step, now) for item in items]  # validate all before writing
        ids: list[int | None] = []
        with self._write():
            for row in rows:
                cursor = self._conn.execute(
                    "INSERT INTO memories (scope, agent, domain, question, answer, score, importance,"
                    " origin, added_step, added_at, content_hash, tier, sources, backbone, run_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (scope, content_hash) DO NOTHING", (*row, self.run_id))
                ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
        return ids

    def get(self, ids: Iterable[int]) -> list[Memory]:
        """Memories by id, in the order asked."""
        ids = [int(i) for i in ids]
        # One JSON parameter instead of one '?' per id: no limit on how many ids are asked for.
        rows = self._read(f"SELECT {COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                          [json.dumps(ids)])
        by_id = {row["id"]: memory_from_row(row) for row in rows}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise KeyError(f"no memories with ids {missing}")
        return [by_id[i] for i in ids]

    def memories(self, scope: str, *, tier: str | None = None,
                 include_consolidated: bool = True) -> list[Memory]:
        """A scope's memories, oldest first."""
        sql = f"SELECT {COLUMNS} FROM memories WHERE scope = ?"
        params: list[Any] = [scope]
        if tier is not None:
            sql += " AND tier = ?"
            params.append(check_mutable("tier", tier))
        if not include_consolidated:
            sql += " AND consolidated = 0"
        return [memory_from_row(row) for row in self._read(sql + " ORDER BY id", params)]

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
        if field not in COUNTABLE:  # the name goes into the SQL text, so only known columns pass
            raise ValueError(f"cannot count by {field!r}; allowed: {', '.join(COUNTABLE)}")
        where, params = ("WHERE scope = ?", [scope]) if scope is not None else ("", [])
        rows = self._read(f"SELECT {field}, count(*) FROM memories {where} GROUP BY {field} ORDER BY {field}",
                          params)
        return {row[0]: row[1] for row in rows}

    def tally(self, fields: Iterable[str]) -> dict[tuple, int]:
        """How many memories per combination of values of `fields` (e.g. run_id, scope, agent, origin)."""
        fields = list(fields)
        unknown = [f for f in fields if f not in COUNTABLE]  # the names go into the SQL text
        if unknown or not fields:
            raise ValueError(f"cannot count by {unknown or fields}; allowed: {', '.join(COUNTABLE)}")
        names = ", ".join(fields)
        rows = self._read(f"SELECT {names}, count(*) FROM memories GROUP BY {names} ORDER BY {names}")
        return {tuple(row)[:-1]: row[-1] for row in rows}

    def runs(self) -> dict[str, str | None]:
        """Every run recorded in this file, oldest first: run_id -> label (its run folder)."""
        return {row[0]: row[1] for row in self._read("SELECT run_id, label FROM runs ORDER BY first_opened, run_id")}

    def forget_run(self, run_id: str, keep_origins: Iterable[str] = ("seed",)) -> int:
        """Delete the memories `run_id` admitted, except those of `keep_origins`; returns how many.
        Seeds are kept by default: every run on a pool adds the same seed pairs, and only the first
        to add one records it, so other runs rely on the seeds a run happens to have written."""
        keep = list(keep_origins)
        doomed = "run_id = ? AND origin NOT IN (SELECT value FROM json_each(?))"
        with self._write():
            # Other runs' memories that a deleted summary folded in become plain long-term memories
            # again, or they would stay hidden behind a summary that no longer exists.
            self._conn.execute(
                "UPDATE memories SET consolidated = 0 WHERE consolidated = 1 AND run_id IS NOT ? AND id IN"
                f" (SELECT s.value FROM memories m, json_each(m.sources) s WHERE m.sources IS NOT NULL AND {doomed})",
                (run_id, run_id, json.dumps(keep)))
            cursor = self._conn.execute(f"DELETE FROM memories WHERE {doomed}", (run_id, json.dumps(keep)))
        return cursor.rowcount

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
            raise ValueError(f"nothing to set; mutable fields: {', '.join(MUTABLE)}")
        values = {name: check_mutable(name, value) for name, value in fields.items()}
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._write():
            cursor = self._conn.execute(f"UPDATE memories SET {assignments} WHERE id = ?",
                                        (*values.values(), memory_id))
            if cursor.rowcount == 0:
                raise KeyError(f"no memory with id {memory_id}")

    def record_utility(self, effects: Mapping[int, Sequence[float]]) -> None:
        """Fold measured effects into each memory's running mean utility: memory id -> the values
        measured for it now. Ids no longer in the pool (consolidated away meanwhile) are skipped."""
        rows = [(sum(values), len(values), int(memory_id)) for memory_id, values in effects.items() if values]
        if not rows:
            return
        with self._write():
            self._conn.executemany(
                "UPDATE memories SET utility = (coalesce(utility, 0) * utility_n + ?1) / (utility_n + ?2),"
                " utility_n = utility_n + ?2 WHERE id = ?3", rows)

    def version(self, scope: str) -> int:
        """Largest id in `scope` (0 when empty). Ids only grow, so a cache of embeddings built at
        version v needs just the memories with id > v to catch up."""
        return self._read("SELECT coalesce(max(id), 0) FROM memories WHERE scope = ?", [scope])[0][0]

    def change_token(self) -> tuple[int, int]:
        """Moves whenever the file is written, by this connection or any other, so a reader that
        caught up at one token has nothing to read while the token stays the same."""
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0], self._conn.total_changes

    def changes(self, scope: str, after_id: int, after_change: int) -> ScopeChanges:
        """What a reader that holds `scope`'s memories up to id `after_id`, and has seen its change
        log up to `after_change`, lacks: read in one transaction, so the parts agree."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                new = [memory_from_row(row) for row in self._conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND id > ? ORDER BY id", (scope, after_id))]
                last_change = self._conn.execute(
                    "SELECT coalesce(max(seq), ?) FROM memory_changes WHERE scope = ?",
                    (after_change, scope)).fetchone()[0]
                touched = [row[0] for row in self._conn.execute(
                    "SELECT DISTINCT memory_id FROM memory_changes WHERE scope = ? AND seq > ? AND memory_id <= ?"
                    " ORDER BY memory_id", (scope, after_change, after_id))]
                changed = [memory_from_row(row) for row in self._conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                    (json.dumps(touched),))]
            finally:
                self._conn.execute("COMMIT")
        present = {m.id for m in changed}
        return ScopeChanges(new, changed, [i for i in touched if i not in present], last_change)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
