"""Memories that left a run's pool after the run: `ms-data forget` deletes a writer's memories from the
pool file, but the run retrieved them, and its own files still say who wrote them (memories.csv, which
ms-run exports when it finishes) and what they said (decisions.jsonl). The report describes them from
those files, each marked with why it is no longer in the pool, so that a question's prompt can still be
rebuilt and the sharing matrix still counts it under its writer.

An id counts as gone only where the pool file no longer holds it and either the pool's `removals`
table (the audit record each `ms-data forget` writes) lists it or the run's memories.csv records it:
decisions.jsonl alone says only what the run admitted, not that anything left."""

import json
import sqlite3
from typing import Callable, Iterable, Mapping, Optional

# Why a memory memories.csv records is missing from the pool file where no removal lists it (a pool
# from before removals were recorded, or one changed by hand).
UNRECORDED_REMOVAL = (
    "not in the pool file any more, though the run's memories.csv records it (no removal of it is recorded)"
)


def removal_reasons(conn: sqlite3.Connection) -> dict[int, str]:
    """memory id -> the removal that took it out of the pool, in words; {} for a pool without a removals
    table (schema 4 and older)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'removals'").fetchall():
        return {}
    out = {}
    for number, ids, command in conn.execute("SELECT id, ids, command FROM removals ORDER BY id"):
        for memory_id in json.loads(ids or "[]"):
            out[int(memory_id)] = f"removed from the pool by `{command}` (removal #{number})"
    return out


def gone_rows(
    held: Iterable[int],
    recorded: Iterable[dict],
    decisions: Iterable[dict],
    removed: Mapping[int, str],
    domain_of: Callable[[str], Optional[str]],
    run_id: Optional[str],
) -> list[dict]:
    """Writer rows (as the pool's: id, agent, domain, origin, backbone, run_id, run) of the memories the
    pool no longer holds, each with `forgotten`: why. `recorded`: memories.csv's rows; `decisions`:
    decisions.jsonl's; `removed`: removal_reasons; `domain_of`: an agent's domain, where a row comes
    from decisions.jsonl (which records the asking agent, and a poisoner's pairs under `writer`)."""
    held = set(held)
    by_id = {int(r["id"]): r for r in recorded}
    admitted = {int(d["memory_id"]): d for d in decisions if d.get("memory_id") is not None}
    out = []
    for memory_id in sorted((set(by_id) | set(removed)) - held):
        if memory_id in by_id:
            row = dict(by_id[memory_id])
        elif memory_id in admitted:  # a removed memory this run admitted, from a run that kept no memories.csv
            d = admitted[memory_id]
            row = {
                "agent": d.get("writer") or d["agent"],
                "domain": domain_of(d["agent"]),
                "origin": "stream",
                "backbone": None,
                "run_id": run_id,
                "run": None,
            }
        else:  # removed, but no file of the run says who wrote it: it stays unknown, and is reported so
            continue
        # A table exported after a removal says why itself, where the pool's audit record does not.
        why = removed.get(memory_id) or row.get("forgotten") or UNRECORDED_REMOVAL
        out.append({**row, "id": memory_id, "forgotten": why})
    return out
