"""What the runs' LLM calls cost: usage.md and usage.csv, per run and per role, and the sweep's
total. Read from each run's metrics.json (`usage`, as llm_usage.json holds it), else its
llm_usage.json, in any of the shapes ms has written them (ms.llm.usage.upgraded_usage)."""

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Sequence

from ms.config.files import USAGE_FILE
from ms.llm.base import OTHER, Usage
from ms.llm.usage import ROWS, by_role
from ms.llm.usage_record import UsageRecord
from ms.report.common.render import csv_text
from ms.report.common.runs import Run

log = logging.getLogger(__name__)

FIELDS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "backend_seconds", "cost")


def _usage(run: Run) -> Optional[dict]:
    """The run's usage report in today's shape; None for a run that kept none."""
    usage, path = run.written.usage, run.path / USAGE_FILE
    if not usage.kept and path.is_file():
        try:
            usage = UsageRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as err:
            log.warning("%s unreadable, its usage left out: %s", path, err)
    return usage.upgraded(str(run.record.backbone))


def _without_roles(report: dict) -> bool:
    """Usage written before calls were counted per role: all of it sits under OTHER."""
    return all(set(b["roles"]) == {OTHER} for b in report["backbones"].values())


def _cells(u: dict) -> list[str]:
    cost = u.get("cost")
    counts = [str(u[field]) for field in FIELDS[:4]]  # calls, cache hits, prompt and completion tokens
    return [*counts, f"{u['backend_seconds']:.1f}", "-" if cost is None else f"{cost:.4f}"]


def write_usage(runs: Sequence[Run], out: Path) -> str:
    """Write usage.md and usage.csv; returns what summary.md shows (the per-role totals and the cost)."""
    reports = {r.name: u for r in runs if (u := _usage(r)) is not None}
    per_role = {name: by_role(u) for name, u in reports.items()}
    unpriced = [name for name, u in reports.items() if u.get("cost") is None]
    roles = {
        role: asdict(
            Usage.total(Usage(**{k: v for k, v in rows[role].items() if k != "cost"}) for rows in per_role.values())
        )
        for role in ROWS
    }
    for role in roles:
        costs = [rows[role]["cost"] for rows in per_role.values()]
        roles[role]["cost"] = sum(costs) if costs and None not in costs else None
    total = asdict(Usage.total(Usage(**u["total"]) for u in reports.values()))
    total["cost"] = sum(u["cost"] for u in reports.values()) if reports and not unpriced else None

    head = (
        "| | calls | cache hits | prompt tokens | completion tokens | backend s | est. cost |\n"
        "|---|---|---|---|---|---|---|"
    )
    role_rows = [
        f"| {role} | " + " | ".join(_cells(u)) + " |" for role, u in roles.items() if u["calls"] or u["cache_hits"]
    ]
    roleless = sum(map(_without_roles, reports.values()))
    summary = [
        f"LLM usage of {len(reports)} of {len(runs)} runs"
        + (
            f" ({roleless} written before usage was kept per role: their calls count under `{OTHER}`)"
            if roleless
            else ""
        )
        + ". Calls reached the backend; cache hits did not, and cost nothing. The cost is the "
        "backbone configs' `price` times the tokens"
        + (f"; it is left out because {len(unpriced)} run(s) have an unpriced backbone" if unpriced else "")
        + ". Per run: [usage.md](usage.md), [usage.csv](usage.csv).\n",
        head,
        *role_rows,
        "| **sweep total** | " + " | ".join(_cells(total)) + " |",
    ]
    per_run = [
        f"| `{name}` | " + " | ".join(_cells(dict(u["total"], cost=u.get("cost")))) + " |"
        for name, u in reports.items()
    ]
    (out / "usage.md").write_text(
        "# LLM usage\n\n"
        + "\n".join(summary)
        + "\n\n## Per run\n\n"
        + "\n".join([head.replace("| |", "| run |", 1), *per_run])
        + "\n",
        encoding="utf-8",
    )
    rows = [["run", "role", *FIELDS]]
    for name, u in reports.items():
        rows += [[name, role, *(values[f] for f in FIELDS)] for role, values in per_role[name].items()]
        rows.append([name, "total", *(dict(u["total"], cost=u.get("cost"))[f] for f in FIELDS)])
    (out / "usage.csv").write_text(csv_text(rows), encoding="utf-8")
    return "\n".join(summary)
