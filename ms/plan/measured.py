"""Plan mode from a finished run (`+plan_from=RUN_DIR`): the share of stream pairs that run's gate
admitted, in place of the rate the plan otherwise assumes, and its backends' seconds per token, which
turn the plan's tokens into a rough wall time for local backbones. Both are only as good as the
named run is like the planned one: same gate, threshold, backbones and machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

import yaml

from ms.config.files import USAGE_FILE
from ms.common.errors import UserError
from ms.llm.usage import upgraded_usage
from ms.loop.run_folder import completed


class Measured(NamedTuple):
    """An admission rate read from a finished run, with how it was read."""

    rate: float
    said: str
    run: Path


def _gate_of(run: Path) -> str:
    """" (gate=rubric, scorer.threshold=15)": the settings the rate was measured under, where known."""
    try:
        config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return ""
    gate, threshold = (config.get("gate") or {}).get("name"), (config.get("scorer") or {}).get("threshold")
    return f" (gate={gate}, scorer.threshold={threshold})" if gate else ""


def measured(run: Path) -> Measured:
    """The share of stream pairs the finished run in `run` admitted (its metrics.json)."""
    metrics = completed(run)
    if metrics is None:
        raise UserError(f"invalid setting plan_from={run}: no finished run there (a metrics.json with "
                        f"\"complete\": true); name the folder of a finished run")
    stream = metrics.get("stream") or {}
    accepted, rejected = (sum((stream.get(key) or {}).values()) for key in ("accepted", "rejected"))
    if not accepted + rejected:
        raise UserError(f"invalid setting plan_from={run}: that run's gate judged no stream pair (k=0 skips "
                        f"the stream); name a run that streamed")
    rate = accepted / (accepted + rejected)
    return Measured(rate, f"{rate:.2f} of stream pairs admitted, measured: the finished run {run}{_gate_of(run)} "
                          f"admitted {accepted} of {accepted + rejected}", run)


def _per_token(usage: Optional[dict]) -> Optional[float]:
    tokens = usage and usage["prompt_tokens"] + usage["completion_tokens"]
    return usage["backend_seconds"] / tokens if tokens and usage["backend_seconds"] else None


def wall_time(rows: Sequence, run: Path, local: Callable[[str], bool]) -> Optional[str]:
    """A note estimating the backend time of `rows` (ms.plan.rows.Row) on the local backbones (`local(name)`)
    from the seconds per token the run's llm_usage.json recorded; None where it recorded none."""
    try:
        raw = json.loads((run / USAGE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    usage = upgraded_usage(raw, ((completed(run) or {}).get("run") or {}).get("backbone", ""))
    seconds, used, unmeasured = 0.0, set(), set()
    for r in rows:
        if not r.calls or not local(r.backbone):
            continue
        entry = (usage or {"backbones": {}})["backbones"].get(r.backbone)
        # Per role where the run measured the role (scoring reads a prompt, answering decodes), else the backbone's.
        rate = entry and (_per_token(entry["roles"].get(r.role)) or _per_token(entry["total"]))
        if not rate:
            unmeasured.add(r.backbone)
            continue
        seconds += rate * (r.billed["prompt_tokens"] + r.billed["completion_tokens"])
        used.add(r.backbone)
    if not used:
        return None
    took = f"{seconds:,.0f} s" if seconds < 90 else f"{seconds / 60:,.0f} min"
    return (f"wall time: ~{took} of backend time on {', '.join(sorted(used))}: the backend seconds "
            f"per token in {run / USAGE_FILE} (per role where it has the role) times this plan's tokens the cache "
            f"will not answer (an upper bound where cached is unknown); rough: the tokens are estimates, and loading "
            f"models, memory train's steps and BERTScore are left out"
            + (f"; {', '.join(sorted(unmeasured))}: not measured there" if unmeasured else ""))
