"""What a run's LLM calls cost, by backbone and role: the `llm_usage.json` a run writes, the lines
its printout ends with, and the price table that turns tokens into an estimated cost."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from ms.llm.base import LM, OTHER, ROLES, Usage

ROWS = (*ROLES, OTHER)


def cost(usage: Mapping[str, Any], price: Mapping[str, float] | None) -> Optional[float]:
    """Estimated cost of the tokens that reached the backend (cache hits cost nothing); None unpriced."""
    if price is None:
        return None
    return (
        usage["prompt_tokens"] * price["input_per_million"] + usage["completion_tokens"] * price["output_per_million"]
    ) / 1e6


def usage_report(lms: Iterable[LM]) -> dict[str, Any]:
    """llm_usage.json: per backbone (by config name), its usage per role, its total and, where the
    backbone config has a price, the estimated cost per role and in all; then the run's total."""
    backbones: dict[str, dict[str, Any]] = {}
    seen: set[int] = set()
    for lm in lms:
        if id(lm) in seen:  # one LM serving several parts (agents and scorer) counts once
            continue
        seen.add(id(lm))
        entry = backbones.setdefault(
            lm.name, {"model": lm.model, "provider": lm.provider, "price": lm.price, "roles": {}}
        )
        for role in ROWS:
            mine = lm.usage_by_role.get(role, Usage())
            before = entry["roles"].get(role)
            entry["roles"][role] = asdict(mine if before is None else Usage.total([Usage(**before), mine]))
    for entry in backbones.values():
        entry["total"] = asdict(Usage.total(Usage(**u) for u in entry["roles"].values()))
        if entry["price"] is not None:
            entry["cost"] = {role: cost(u, entry["price"]) for role, u in entry["roles"].items()}
            entry["cost"]["total"] = cost(entry["total"], entry["price"])
    report: dict[str, Any] = {
        "backbones": backbones,
        "total": asdict(Usage.total(Usage(**b["total"]) for b in backbones.values())),
    }
    priced = [b["cost"]["total"] for b in backbones.values() if "cost" in b]
    # Only a run whose every backbone is priced has a cost; a partial sum would read as the whole.
    report["cost"] = sum(priced) if priced and len(priced) == len(backbones) else None
    return report


def save_usage(lms: Iterable[LM], path: Path) -> dict[str, Any]:
    """Write `usage_report(lms)` to `path` (a run's llm_usage.json, or beside a command's output)."""
    report = usage_report(lms)
    path.write_text(json.dumps(report, indent=2))
    return report


def _counters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A usage dict as `Usage` holds it; counters an older writer did not keep (retries) read as 0."""
    return asdict(Usage(**{k: v for k, v in raw.items() if k in Usage.__dataclass_fields__}))


def upgraded_usage(raw: Mapping[str, Any], backbone: str) -> Optional[dict[str, Any]]:
    """Any llm_usage.json ms has written, in today's shape (`usage_report`); None for no usage.
    Two older shapes had no roles, so their calls count under OTHER: the first was one LM's counters
    (`{"calls": ...}`), the next `{"agents": counters, "scorer": counters}` (the scorer's only where
    it had its own LM). `backbone` names the run's backbone, which wrote the agents' calls."""
    if not raw:
        return None
    if "backbones" in raw:
        return dict(raw)
    lms = (
        {backbone: raw}
        if "calls" in raw
        else {(backbone if part == "agents" else part): counters for part, counters in raw.items()}
    )
    backbones = {
        name: {"model": None, "provider": None, "price": None, "roles": {OTHER: _counters(c)}, "total": _counters(c)}
        for name, c in lms.items()
    }
    return {
        "backbones": backbones,
        "total": asdict(Usage.total(Usage(**b["total"]) for b in backbones.values())),
        "cost": None,
    }


def by_role(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Usage per role summed over backbones, with each role's cost where every backbone is priced."""
    out: dict[str, dict[str, Any]] = {}
    entries = list(report["backbones"].values())
    for role in ROWS:
        # Runs written before a role existed have no entry for it: they made no such request.
        out[role] = asdict(Usage.total(Usage(**b["roles"].get(role, {})) for b in entries))
        costs = [b["cost"].get(role, 0.0) for b in entries if "cost" in b]
        out[role]["cost"] = sum(costs) if entries and len(costs) == len(entries) else None
    return out


def format_usage(report: Mapping[str, Any]) -> str:
    """The per-role lines a run's printout ends with: roles that made no request are left out."""
    head = (
        f"{'LLM usage':<11} {'calls':>6} {'cached':>6} {'prompt tok':>11} {'compl. tok':>11} "
        f"{'backend s':>10} {'est. cost':>10}"
    )
    lines = [head, "-" * len(head)]
    rows = by_role(report)
    total = dict(report["total"], cost=report.get("cost"))
    for name, u in [*((r, u) for r, u in rows.items() if u["calls"] or u["cache_hits"]), ("total", total)]:
        shown = "-" if u.get("cost") is None else f"{u['cost']:.4f}"
        lines.append(
            f"{name:<11} {u['calls']:>6} {u['cache_hits']:>6} {u['prompt_tokens']:>11} "
            f"{u['completion_tokens']:>11} {u['backend_seconds']:>10.1f} {shown:>10}"
        )
    return "\n".join(lines)
