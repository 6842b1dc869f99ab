"""Retiring memories whose measured utility says they hurt (memory.retire_below): a memory admitted by
mistake otherwise keeps taking a shot's place, the seed pair's it displaced included, for the rest of
the run.

A memory's utility is the running mean of what measurements already showed about it (Pool.record_utility:
the utility gate's probes, memory train's labels with train.utility_from_labels), so retiring costs no
model call. One write transaction finds the memories below the threshold with enough measurements
and sets their `retired_step`: the row stays in the pool, with its texts and its utility as they were
when it was retired (the pool's record of it), and the update reaches every process's scope snapshot
through the change log like any other, so no search returns it any more (ms.retrieval.snapshot).
Retirement is never undone: a pool reopened, shared or redone keeps it.
"""

import json
from dataclasses import dataclass
from typing import Iterable

from ms.pool.backend import Database

# Only what the stream wrote can be retired: admitted pairs and the summaries made of them. Seeds are
# the dataset's reference pairs, the floor a bad admission should not push out; and most of what a
# seed is measured by is the displaced shot's side of a candidate's probe (the negated delta), which
# says the candidate did better than the seed, not that the seed hurts. Imported memories came from
# outside the run's gate and are kept for the same reason.
RETIRABLE = ("stream", "summary")


@dataclass(frozen=True)
class Retired:
    """One memory retired, with the measurements that retired it."""

    memory_id: int
    scope: str
    agent: str
    origin: str
    utility: float  # mean nats per token over utility_n measurements
    utility_n: int
    step: int


def retire(
    db: Database,
    *,
    below: float,
    after: int,
    step: int,
    scopes: Iterable[str],
    origins: Iterable[str] = RETIRABLE,
) -> list[Retired]:
    """Retire, at `step`, every memory of `scopes` and `origins` not yet retired whose mean measured
    utility is below `below` over at least `after` measurements; returns them, oldest first."""
    scopes, origins = sorted(set(scopes)), sorted(set(origins))
    with db.write() as session:
        rows = session.rows(
            "SELECT id, scope, agent, origin, utility, utility_n FROM memories WHERE retired_step IS NULL"
            f" AND utility < ? AND utility_n >= ? AND scope IN {db.TEXTS} AND origin IN {db.TEXTS} ORDER BY id",
            (float(below), int(after), json.dumps(scopes), json.dumps(origins)),
        )
        if rows:
            session.run(
                f"UPDATE memories SET retired_step = ? WHERE id IN {db.INTS}",
                (step, json.dumps([int(r[0]) for r in rows])),
            )
    return [Retired(int(i), s, a, o, float(u), int(n), step) for i, s, a, o, u, n in rows]
