"""`ms-run ... +plan=true`: the plan of a run, or with -m of every cell of a sweep and their total,
printed before anything is spent (see ms.plan). The configs are composed as Hydra would compose
them, sweeps expanded by its basic sweeper, but no job is launched: no output folder is made.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ms.compose import jobs
from ms.errors import UserError
from ms.plan_measured import Measured, measured, wall_time

PLAN = re.compile(r"\+{0,2}plan=(.*)")
ACCEPT = re.compile(r"\+{0,2}plan_accept=(.*)")
FROM = re.compile(r"\+{0,2}plan_from=(.*)")
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0")


def take_plan_flags(args: Sequence[str]) -> tuple[list[str], bool, Optional[float | Measured]]:
    """(the other arguments, whether plan mode is on, the acceptance rate given by plan_accept or
    measured in the finished run plan_from names)."""
    rest, plan, accept, run = [], False, None, None
    for arg in args:
        if found := PLAN.fullmatch(arg):
            value = found.group(1).lower()
            if value not in TRUE + FALSE:
                raise UserError(f"invalid setting plan={found.group(1)}: must be true or false")
            plan = value in TRUE
        elif found := ACCEPT.fullmatch(arg):
            try:
                accept = float(found.group(1))
            except ValueError:
                accept = -1.0
            if not 0 <= accept <= 1:
                raise UserError(f"invalid setting plan_accept={found.group(1)}: must be a rate from 0 to 1")
        elif found := FROM.fullmatch(arg):
            run = Path(found.group(1))
        else:
            rest.append(arg)
    if (accept is not None or run is not None) and not plan:
        raise UserError(f"{'plan_accept' if run is None else 'plan_from'} is a setting of plan mode: add +plan=true")
    if accept is not None and run is not None:
        raise UserError("plan_accept and plan_from both set the admission rate: give one of them")
    return rest, plan, accept if run is None else measured(run)


def output_dir(cfg: DictConfig, multirun: bool) -> Optional[Path]:
    """The folder Hydra would run the job in; None where it cannot be worked out before launch."""
    try:
        return Path(cfg.hydra.sweep.dir) / str(cfg.hydra.sweep.subdir) if multirun else Path(cfg.hydra.run.dir)
    except OmegaConfBaseException:  # e.g. a folder named by hydra.job.num, which only the launcher sets
        return None


# ---- printing ---------------------------------------------------------------------------------

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
    from ms.plan import total

    head = (f"{'role':<11} {'backbone':<16} {'calls':>8} {'~prompt tok':>12} {'~compl. tok':>12} "
            f"{'cached':>8} {'est. cost':>11}")
    lines = [head, "-" * len(head)]
    summed = total(rows)
    for name, backbone, r in [*((r.role, r.backbone, r.__dict__ | {"cost": r.cost}) for r in rows),
                              (title_total, "", summed)]:
        upper = not r["cached_exact"] and r["cost"] is not None
        lines.append(f"{name:<11} {backbone:<16} {_calls(r['calls'], r['exact']):>8} {r['prompt_tokens']:>12,.0f} "
                     f"{r['completion_tokens']:>12,.0f} {_cached(r['cached'], r['cached_exact'], r['calls']):>8} "
                     f"{_cost(r['cost'], upper):>11}")
    return "\n".join(lines)


LEGEND = ("calls: requests the run will make (~: an estimate); cached: how many of them the response cache "
          "will answer (?: unknown, because the request depends on the pool the run grows; >=: at least); "
          "est. cost: the backbone's `price` times the tokens of the calls the cache will not answer "
          "(<=: at most, where cached is unknown; -: no price set). Tokens are estimates (ms/plan.py says how).")


def plan_main(overrides: list[str], multirun: bool, accept: Optional[float | Measured]) -> int:
    from ms.backbones import Backbones
    from ms.llm import provider_class
    from ms.plan import CacheProbe, Row, plan_run
    from ms.run_folder import completed
    from ms.validation import validate

    unknown = [a for a in overrides if a.startswith("-")]
    if unknown:
        raise UserError(f"plan mode takes overrides and -m only, not {' '.join(unknown)}")
    probe: Optional[CacheProbe] = None
    summed: dict[tuple[str, str], Row] = {}
    cells = jobs(overrides, multirun)
    for number, (job, cfg) in enumerate(cells, 1):
        validate(cfg, plan=True)  # a plan calls no model and opens no pool: no API key or DSN needed
        probe = probe if probe is not None and probe.path.parent == Path(cfg.cache_dir) else CacheProbe(cfg.cache_dir)
        folder = output_dir(cfg, multirun)
        # Nothing is written there: it names the run the plan is for.
        head = f"plan {number}/{len(cells)}" if multirun else "plan"
        head += f" for {folder}" if folder else " for a run whose folder is named at launch"
        print(head + (f": {' '.join(job) or '(no overrides)'}" if multirun else ""))
        if folder is not None and completed(folder) is not None:
            print(f"  {folder} already holds a complete run: it is skipped, nothing is spent\n")
            continue
        plan = plan_run(cfg, accept, probe)
        print(f"  {plan.title}")
        print(format_rows(plan.rows))
        # A finished run's seconds per token time the local backbones' calls (plan_from).
        backbones = Backbones(cfg.backbone)
        timed = (wall_time(plan.rows, accept.run,
                           lambda name: provider_class(backbones.config(name)).runs_locally is True)
                 if isinstance(accept, Measured) else None)
        print("".join(f"- {note}\n" for note in plan.notes + ([timed] if timed else [])))
        for r in plan.rows:
            summed.setdefault((r.role, r.backbone), Row(r.role, r.backbone, r.price)).merge(r)
    if multirun:
        print(f"Sweep total over {len(cells)} runs (complete ones cost nothing):")
        print(format_rows(list(summed.values()), "sweep total"))
    print(LEGEND)
    return 0
