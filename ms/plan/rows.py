"""What a plan counts: a `Row` per role and backbone (its requests, their tokens, how many the response
cache will answer, and the cost of the rest), a run's `RunPlan`, and the `total` of rows. Plan mode's
planners fill them (ms.plan.planner for a run, ms.plan.data for ms-data's commands); ms.plan.table prints
them, and a sweep's plan sums them (ms.cli.plan).
"""

from dataclasses import dataclass, field
from typing import Any, Optional

from ms.llm.usage import cost


@dataclass
class Row:
    """One role on one backbone: requests the run will make, their tokens, and how many of them the
    response cache will answer (known to hold, or repeated within the run)."""

    role: str
    backbone: str
    price: Optional[dict] = None
    calls: float = 0.0
    exact: bool = True  # False: `calls` is an estimate
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cached: float = 0.0
    cached_exact: bool = True  # False: `cached` is a lower bound (requests that depend on the pool)
    billed: dict = field(default_factory=lambda: {"prompt_tokens": 0.0, "completion_tokens": 0.0})  # uncached

    def add(
        self,
        n: float,
        prompt: float,
        completion: float,
        *,
        exact: bool = True,
        cached: float = 0.0,
        cached_exact: bool = True,
    ) -> None:
        billed = {"prompt_tokens": (n - cached) * prompt, "completion_tokens": (n - cached) * completion}
        counts = (n, exact, n * prompt, n * completion, cached, cached_exact, billed)
        self.merge(Row(self.role, self.backbone, self.price, *counts))

    def merge(self, other: "Row") -> None:
        """Add `other`'s counts: one call's, or another run's row of this role and backbone."""
        for name in ("calls", "prompt_tokens", "completion_tokens", "cached"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.exact &= other.exact
        self.cached_exact &= other.cached_exact
        for name in self.billed:
            self.billed[name] += other.billed[name]

    @property
    def cost(self) -> Optional[float]:
        """Estimated cost of the calls the cache will not answer (an upper bound where `cached` is)."""
        return cost(self.billed, self.price)


@dataclass
class RunPlan:
    title: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    done: Optional[str] = None  # a complete run already in the output folder: the run will be skipped


def total(rows: list[Row]) -> dict[str, Any]:
    """Calls, tokens, cache answers and cost of rows; cost None unless every row with calls is priced."""
    costs = [r.cost for r in rows if r.calls]
    return {
        "calls": sum(r.calls for r in rows),
        "exact": all(r.exact for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "completion_tokens": sum(r.completion_tokens for r in rows),
        "cached": sum(r.cached for r in rows),
        "cached_exact": all(r.cached_exact for r in rows),
        "cost": sum(costs) if None not in costs else None,
    }
