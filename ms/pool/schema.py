"""What every pool backend stores, in one place: the schema version, the memories table's columns in
portable SQL types (each backend spells them its own way), the columns each version added (an
older pool gains them in place when opened), and the errors that name a pool that cannot be used."""

import re
from pathlib import Path
from typing import Callable, Container, Iterator

from ms.common.errors import UserError

# 2: memories record the run that admitted them (run_id), the runs table, and ids never reused
# (AUTOINCREMENT), so a run's memories can be removed without a later memory taking their ids.
# 3: memories record the backbone that wrote them (agents may run on different backbones).
# 4: memories carry their measured utility as an in-context example (a running mean, ms.gates.replay)
#    and how many measurements it averages.
# 5: the removals table, one audit record per `ms-data forget` (what was removed, when, how many, by
#    which command). A new table alone: an older pool gains it in place when opened.
# 6: memories record the step they were retired at (retired_step; NULL: never), for a measured utility
#    below memory.retire_below (ms.pool.retirement): kept in the pool, never retrieved again.
SCHEMA_VERSION = 6

# The columns after `id`, in Memory's order. TEXT, REAL and INTEGER are what each backend renders.
MEMORY_COLUMNS = (
    ("scope", "TEXT NOT NULL"),
    ("agent", "TEXT NOT NULL"),
    ("domain", "TEXT NOT NULL"),
    ("question", "TEXT NOT NULL"),
    ("answer", "TEXT NOT NULL"),
    ("score", "REAL"),
    ("importance", "REAL"),
    ("origin", "TEXT NOT NULL"),
    ("added_step", "INTEGER NOT NULL"),
    ("added_at", "REAL NOT NULL"),
    ("last_retrieved_step", "INTEGER"),
    ("last_retrieved_at", "REAL"),
    ("content_hash", "TEXT NOT NULL"),
    ("tier", "TEXT NOT NULL DEFAULT 'long'"),
    ("consolidated", "INTEGER NOT NULL DEFAULT 0"),
    ("sources", "TEXT"),  # JSON list of the ids a summary folds in
    ("run_id", "TEXT"),
    ("backbone", "TEXT"),
    ("utility", "REAL"),
    ("utility_n", "INTEGER NOT NULL DEFAULT 0"),
    ("retired_step", "INTEGER"),
)
# Columns a schema version added to the table of the version before it: ADD COLUMN in place, ids
# and rows untouched, older memories reading NULL (or the default).
ADDED_IN = {3: ("backbone",), 4: ("utility", "utility_n"), 6: ("retired_step",)}
# The oldest schema that column additions alone bring up to date.
OLDEST_ALTERABLE = min(ADDED_IN) - 1
_TYPES = dict(MEMORY_COLUMNS)

# The audit record of a removal (ms.pool.removal), after its `id`.
REMOVAL_COLUMNS = (
    ("removed_at", "REAL NOT NULL"),  # time.time() when it was committed
    ("kind", "TEXT NOT NULL"),  # agent | run: whose memories
    ("target", "TEXT NOT NULL"),  # the agent's name, or the run's id
    ("scope", "TEXT"),  # the one scope it was limited to; NULL: every scope
    ("with_seeds", "INTEGER NOT NULL"),  # 1 where seed memories were removed too
    ("removed", "INTEGER NOT NULL"),  # how many memories
    ("unfolded", "INTEGER NOT NULL"),  # others' memories a removed summary had folded in, searchable again
    ("counts", "TEXT NOT NULL"),  # JSON [[scope, origin, n], ...]
    ("ids", "TEXT NOT NULL"),  # JSON list of the removed memories' ids
    ("command", "TEXT NOT NULL"),  # the command line that removed them
)

Spelling = Callable[[str], str]


def respell(types: dict[str, str]) -> Spelling:
    """A backend's spelling of the portable types: each word in `types` replaced where it stands alone."""
    pattern = re.compile(r"\b(" + "|".join(types) + r")\b")
    return lambda declared: pattern.sub(lambda m: types[m.group(1)], declared)


def memories_table(id_column: str, spell: Spelling) -> str:
    columns = ",\n        ".join(f"{name} {spell(declared)}" for name, declared in MEMORY_COLUMNS)
    return (
        f"CREATE TABLE IF NOT EXISTS memories (\n        {id_column},\n        {columns},\n"
        f"        UNIQUE (scope, content_hash)\n    )"
    )


def removals_table(id_column: str, spell: Spelling) -> str:
    columns = ",\n        ".join(f"{name} {spell(declared)}" for name, declared in REMOVAL_COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS removals (\n        {id_column},\n        {columns}\n    )"


def added_columns(found: int, spell: Spelling) -> Iterator[str]:
    """The ALTER TABLE statements that take a memories table from schema `found` to the current one."""
    for version in range(found + 1, SCHEMA_VERSION + 1):
        for name in ADDED_IN.get(version, ()):
            yield f"ALTER TABLE memories ADD COLUMN {name} {spell(_TYPES[name])}"


def check_readable(found: int, readable: Container[int], location: str, elsewhere: str) -> None:
    if found not in readable:
        raise PoolFileError(
            f"the pool {location} holds schema {found}, which this version of ms cannot read (it "
            f"reads {SCHEMA_VERSION}): update ms, or {elsewhere}"
        )


class PoolFileError(UserError):
    """The pool cannot be opened or reached, is damaged, or has a schema this code does not read."""


def damaged_pool_message(path: Path, reason: object) -> str:
    return (
        f"the pool {path} is damaged ({reason}). It holds the memories admitted by every run that "
        f"shared it, so those runs cannot be resumed or redone on it: restore it from a copy, or move it "
        f"aside and re-run them on a new pool (pool.path)"
    )
