"""The pool: opened from its config (`open_pool`), adds, reads, counts and the change feed that snapshots
follow, written once over whichever database holds it (ms.pool.backend)."""

import json
import time
from pathlib import Path
from typing import Any, Hashable, Iterable, Mapping, Sequence

from ms.config.parts import POOL_BACKENDS
from ms.pool.backend import Database
from ms.pool.records import (
    COLUMNS,
    COUNTABLE,
    MUTABLE,
    Memory,
    ScopeChanges,
    check_mutable,
    memory_from_row,
    row_for_insert,
)
from ms.pool.removal import Removal, removals, remove
from ms.pool.retirement import RETIRABLE, Retired, retire


class Pool:
    """The shared pool, on a SQLite file (a path: the registry's sqlite backend) or on any other Database (see ms.pool.open_pool).
    Processes share a pool by opening the same one; within a process, one Pool may be used from
    several threads."""

    def __init__(
        self,
        where: str | Path | Database,
        timeout_s: float = 60.0,
        *,
        run_id: str | None = None,
        run_label: str | None = None,
    ):
        self._db = where if isinstance(where, Database) else POOL_BACKENDS.load("sqlite")(where, timeout_s)
        self.location = self._db.location
        self.run_id = run_id  # recorded on every memory this connection adds
        if run_id is not None:
            with self._db.write() as db:
                db.run(
                    "INSERT INTO runs (run_id, label, first_opened) VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
                    (run_id, run_label, time.time()),
                )

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[Sequence[Any]]:
        with self._db.read() as db:
            return db.rows(sql, params)

    def add(self, items: list[dict[str, Any]], step: int) -> list[int | None]:
        """Insert `items` in one transaction. Returns each item's new id, or None where the same
        content was already in its scope (earlier, or earlier in this batch)."""
        now = time.time()
        rows = [row_for_insert(item, step, now) for item in items]  # validate all before writing
        ids: list[int | None] = []
        with self._db.write() as db:
            for row in rows:
                found = db.rows(
                    "INSERT INTO memories (scope, agent, domain, question, answer, score, importance,"
                    " origin, added_step, added_at, content_hash, tier, sources, backbone, run_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (scope, content_hash) DO NOTHING RETURNING id",
                    (*row, self.run_id),
                )
                ids.append(found[0][0] if found else None)
        return ids

    def get(self, ids: Iterable[int]) -> list[Memory]:
        """Memories by id, in the order asked."""
        ids = [int(i) for i in ids]
        # One JSON parameter instead of one '?' per id: no limit on how many ids are asked for.
        rows = self._read(f"SELECT {COLUMNS} FROM memories WHERE id IN {self._db.INTS}", [json.dumps(ids)])
        by_id = {memory.id: memory for memory in map(memory_from_row, rows)}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise KeyError(f"no memories with ids {missing}")
        return [by_id[i] for i in ids]

    def memories(
        self,
        scope: str,
        *,
        tier: str | None = None,
        include_consolidated: bool = True,
        include_retired: bool = True,
    ) -> list[Memory]:
        """A scope's memories, oldest first."""
        sql = f"SELECT {COLUMNS} FROM memories WHERE scope = ?"
        params: list[Any] = [scope]
        if tier is not None:
            sql += " AND tier = ?"
            params.append(check_mutable("tier", tier))
        if not include_consolidated:
            sql += " AND consolidated = 0"
        if not include_retired:
            sql += " AND retired_step IS NULL"
        return [memory_from_row(row) for row in self._read(sql + " ORDER BY id", params)]

    def ids(self, scope: str) -> list[int]:
        return [row[0] for row in self._read("SELECT id FROM memories WHERE scope = ? ORDER BY id", [scope])]

    def count(self, scope: str | None = None) -> int:
        if scope is None:
            return self._read("SELECT count(*) FROM memories")[0][0]
        return self._read("SELECT count(*) FROM memories WHERE scope = ?", [scope])[0][0]

    def scopes(self) -> list[str]:
        return [row[0] for row in self._read("SELECT DISTINCT scope FROM memories ORDER BY scope")]

    def count_by(self, field: str) -> dict[Any, int]:
        """How many memories per value of `field` (e.g. agent, origin)."""
        return {value: n for (value,), n in self.tally([field]).items()}

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
        """Every run recorded in this pool, oldest first: run_id -> label (its run folder)."""
        return {row[0]: row[1] for row in self._read("SELECT run_id, label FROM runs ORDER BY first_opened, run_id")}

    def forget_run(self, run_id: str, keep_origins: Iterable[str] = ("seed",)) -> int:
        """Delete the memories `run_id` admitted, except those of `keep_origins`; returns how many.
        Seeds are kept by default: every run on a pool adds the same seed pairs, and only the first
        to add one records it, so other runs rely on the seeds a run happens to have written. A
        redo's clean-up: no audit record (`forget` writes one)."""
        return remove(self._db, "run", run_id, keep_origins=keep_origins).removed

    def forget(
        self,
        kind: str,
        target: str,
        *,
        scope: str | None = None,
        with_seeds: bool = False,
        command: str | None = None,
        dry_run: bool = False,
    ) -> Removal:
        """Remove the memories of a writer agent (`kind` "agent") or of a run (`kind` "run", its id),
        within `scope` if given, seeds only `with_seeds`; with `command`, an audit record in the
        removals table names it (ms.pool.removal). Other processes' scope snapshots drop the removed
        memories at their next search, through the change log."""
        keep = () if with_seeds else ("seed",)
        return remove(self._db, kind, target, scope=scope, keep_origins=keep, command=command, dry_run=dry_run)

    def removals(self) -> list[dict]:
        """The audit records of every removal with a command, oldest first (ms.pool.removal.removals)."""
        return removals(self._db)

    def mark_retrieved(self, ids: Iterable[int], step: int) -> None:
        """Record that `ids` were just retrieved: recency scores count age from here."""
        ids = sorted({int(i) for i in ids})
        now = time.time()
        with self._db.write() as db:
            changed = db.run(
                f"UPDATE memories SET last_retrieved_step = ?, last_retrieved_at = ? WHERE id IN {self._db.INTS}",
                (step, now, json.dumps(ids)),
            )
            if changed != len(ids):  # raising rolls the whole update back
                known = {
                    row[0]
                    for row in db.rows(f"SELECT id FROM memories WHERE id IN {self._db.INTS}", (json.dumps(ids),))
                }
                raise KeyError(f"no memories with ids {[i for i in ids if i not in known]}")

    def set_fields(self, memory_id: int, **fields: Any) -> None:
        """Change the mutable columns (tier, consolidated, importance) of one memory."""
        if not fields:
            raise ValueError(f"nothing to set; mutable fields: {', '.join(MUTABLE)}")
        values = {name: check_mutable(name, value) for name, value in fields.items()}
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._db.write() as db:
            if db.run(f"UPDATE memories SET {assignments} WHERE id = ?", (*values.values(), memory_id)) == 0:
                raise KeyError(f"no memory with id {memory_id}")

    def record_utility(self, effects: Mapping[int, Sequence[float]]) -> None:
        """Fold measured effects into each memory's running mean utility: memory id -> the values
        measured for it now. Ids no longer in the pool (consolidated away meanwhile) are skipped."""
        rows = [
            (sum(values), len(values), len(values), int(memory_id)) for memory_id, values in effects.items() if values
        ]
        if not rows:
            return
        with self._db.write() as db:
            db.run_many(
                "UPDATE memories SET utility = (coalesce(utility, 0) * utility_n + ?) / (utility_n + ?),"
                " utility_n = utility_n + ? WHERE id = ?",
                rows,
            )

    def retire(
        self, *, below: float, after: int, step: int, scopes: Iterable[str], origins: Iterable[str] = RETIRABLE
    ) -> list[Retired]:
        """Retire the memories of `scopes` measured to hurt: mean utility below `below` over at least
        `after` measurements, origin in `origins` (ms.pool.retirement). They stay in the pool, marked
        with `step`; no search returns them again, in this process or any other."""
        return retire(self._db, below=below, after=after, step=step, scopes=scopes, origins=origins)

    def version(self, scope: str) -> int:
        """Largest id in `scope` (0 when empty). Ids only grow, so a cache of embeddings built at
        version v needs just the memories with id > v to catch up."""
        return self._read("SELECT coalesce(max(id), 0) FROM memories WHERE scope = ?", [scope])[0][0]

    def change_token(self) -> Hashable:
        """Moves whenever the pool is written, by this connection or any other, so a reader that
        caught up at one token has nothing to read while the token stays the same."""
        return self._db.change_token()

    def changes(self, scope: str, after_id: int, after_change: int) -> ScopeChanges:
        """What a reader that holds `scope`'s memories up to id `after_id`, and has seen its change
        log up to `after_change`, lacks: read in one transaction, so the parts agree."""
        with self._db.read(consistent=True) as db:
            new = [
                memory_from_row(row)
                for row in db.rows(
                    f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND id > ? ORDER BY id", (scope, after_id)
                )
            ]
            last_change = db.rows(
                "SELECT coalesce(max(seq), ?) FROM memory_changes WHERE scope = ?", (after_change, scope)
            )[0][0]
            touched = [
                row[0]
                for row in db.rows(
                    "SELECT DISTINCT memory_id FROM memory_changes WHERE scope = ? AND seq > ? AND memory_id <= ?"
                    " ORDER BY memory_id",
                    (scope, after_change, after_id),
                )
            ]
            changed = [
                memory_from_row(row)
                for row in db.rows(
                    f"SELECT {COLUMNS} FROM memories WHERE id IN {self._db.INTS} ORDER BY id", (json.dumps(touched),)
                )
            ]
        present = {m.id for m in changed}
        return ScopeChanges(new, changed, [i for i in touched if i not in present], last_change)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_pool(cfg, default_path: Path, *, run_id: str | None = None, run_label: str | None = None) -> Pool:
    """The pool that `cfg` (a PoolConfig) names: the SQLite file pool.path (`default_path` when unset),
    or the PostgreSQL database pool.dsn; or any registered backend's, so the rest of ms never asks
    which one it is."""
    return Pool(POOL_BACKENDS.load(cfg.backend).connect(cfg, default_path), run_id=run_id, run_label=run_label)
