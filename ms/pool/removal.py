"""Taking memories out of a pool: those of one writer agent, or of one run (`ms-data forget`, and a
redo clearing a failed attempt), never seeds unless asked, with an audit record in the pool.

A removal is one write transaction on either backend: the memories are deleted by id, the memories
that a removed summary had folded in (and that stay) become searchable again, and, where asked, a
row of the `removals` table (schema 5) says what was removed, when, how many and by which command.
The deletions go through the change log like any other change, so every process that holds a scope
in memory (ms.retrieval.snapshot) drops them at its next search; nothing has to be rebuilt by hand.
"""

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional

from ms.pool.backend import Database

KINDS = ("agent", "run")  # whose memories: a writer agent's (memories.agent) or a run's (memories.run_id)
_COLUMN = {"agent": "agent", "run": "run_id"}
# An audit record's columns, as `removals` reads them
RECORD_COLUMNS = "id removed_at kind target scope with_seeds removed unfolded counts ids command".split()


@dataclass(frozen=True)
class Removal:
    """What one removal took out (or, dry, would take out)."""

    kind: str  # agent | run
    target: str  # the agent's name or the run's id
    scope: Optional[str]  # the one scope it was limited to; None: every scope
    with_seeds: bool
    counts: dict[tuple[str, str], int]  # (scope, origin) -> memories removed
    ids: list[int]
    unfolded: int  # memories a removed summary had folded in, searchable again
    kept_seeds: int  # seed memories of the target that stayed (with_seeds off)
    at: float
    command: Optional[str]
    record_id: Optional[int]  # the audit row; None where none was written (a dry run, a redo's clean-up)

    @property
    def removed(self) -> int:
        return len(self.ids)


def remove(
    db: Database,
    kind: str,
    target: str,
    *,
    scope: Optional[str] = None,
    keep_origins: Iterable[str] = ("seed",),
    command: Optional[str] = None,
    dry_run: bool = False,
) -> Removal:
    """Remove `target`'s memories (`kind` agent or run), except those of `keep_origins`, within `scope` if
    given. With `command` an audit record naming it is written in the same transaction; `dry_run`
    counts what would go and changes nothing."""
    if kind not in KINDS:
        raise ValueError(f"cannot remove the memories of a {kind!r}; choose one of {', '.join(KINDS)}")
    keep = sorted(set(keep_origins))
    with_seeds = "seed" not in keep
    where = f"{_COLUMN[kind]} = ? AND origin NOT IN {db.TEXTS}" + (" AND scope = ?" if scope is not None else "")
    params = (target, json.dumps(keep), *([scope] if scope is not None else []))
    kept_where = f"{_COLUMN[kind]} = ? AND origin IN {db.TEXTS}" + (" AND scope = ?" if scope is not None else "")
    opened = db.read(consistent=True) if dry_run else db.write()
    with opened as session:
        rows = session.rows(f"SELECT id, scope, origin, sources FROM memories WHERE {where} ORDER BY id", params)
        kept = session.rows(f"SELECT count(*) FROM memories WHERE {kept_where}", params)[0][0] if keep else 0
        ids = [int(r[0]) for r in rows]
        counts = Counter((r[1], r[2]) for r in rows)
        # Memories that a summary being removed folded in, and that are not removed themselves, become
        # plain long-term memories again, or they would stay hidden behind a summary that is gone.
        doomed = set(ids)
        folded = sorted({int(i) for r in rows if r[3] for i in json.loads(r[3])} - doomed)
        consolidated = f"consolidated = 1 AND id IN {db.INTS}"
        if dry_run:
            unfolded = session.rows(f"SELECT count(*) FROM memories WHERE {consolidated}", (json.dumps(folded),))[0][0]
        else:
            unfolded = session.run(f"UPDATE memories SET consolidated = 0 WHERE {consolidated}", (json.dumps(folded),))
            session.run(f"DELETE FROM memories WHERE id IN {db.INTS}", (json.dumps(ids),))
        now = time.time()
        record_id = None
        if command is not None and not dry_run:
            listed = json.dumps([[s, o, n] for (s, o), n in sorted(counts.items())])
            record_id = session.rows(
                "INSERT INTO removals (removed_at, kind, target, scope, with_seeds, removed, unfolded, counts, ids,"
                " command) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (now, kind, target, scope, int(with_seeds), len(ids), unfolded, listed, json.dumps(ids), command),
            )[0][0]
    counted = dict(sorted(counts.items()))
    return Removal(kind, target, scope, with_seeds, counted, ids, int(unfolded), int(kept), now, command, record_id)


def removals(db: Database) -> list[dict]:
    """Every audit record, oldest first, as a dict of its columns (counts and ids decoded)."""
    with db.read() as session:
        rows = session.rows(f"SELECT {', '.join(RECORD_COLUMNS)} FROM removals ORDER BY id")
    out = []
    for row in rows:
        record = dict(zip(RECORD_COLUMNS, row))
        record["with_seeds"] = bool(record["with_seeds"])
        record["counts"] = [tuple(c) for c in json.loads(record["counts"])]
        record["ids"] = json.loads(record["ids"])
        out.append(record)
    return out
