"""The table a plan prints: one line per role and backbone (calls, tokens, cached calls, estimated cost)
and their total (ms-run's and ms-data's plan mode)."""

from typing import Optional


def _calls(value: float, exact: bool) -> str:
    return f"{round(value):,}" if exact else f"~{value:,.0f}"


def _cached(value: float, exact: bool, calls: float) -> str:
    if exact or not calls:
        return f"{round(value):,}"
    return f">={round(value):,}" if value else "?"


def _cost(value: Optional[float], upper: bool) -> str:
    if value is None or value == 0:
        return "-" if value is None else "0"
    return ("<=" if upper else "~") + f"{value:.4f}"


def format_rows(rows, title_total: str = "total") -> str:
    from ms.plan.rows import total

    head = (
        f"{'role':<11} {'backbone':<16} {'calls':>8} {'~prompt tok':>12} {'~compl. tok':>12} "
        f"{'cached':>8} {'est. cost':>11}"
    )
    lines = [head, "-" * len(head)]
    summed = total(rows)
    for name, backbone, r in [
        *((r.role, r.backbone, r.__dict__ | {"cost": r.cost}) for r in rows),
        (title_total, "", summed),
    ]:
        upper = not r["cached_exact"] and r["cost"] is not None
        lines.append(
            f"{name:<11} {backbone:<16} {_calls(r['calls'], r['exact']):>8} {r['prompt_tokens']:>12,.0f} "
            f"{r['completion_tokens']:>12,.0f} {_cached(r['cached'], r['cached_exact'], r['calls']):>8} "
            f"{_cost(r['cost'], upper):>11}"
        )
    return "\n".join(lines)
