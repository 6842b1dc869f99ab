"""`ms-run ... +plan=true`: the plan of a run, or with -m of every cell of a sweep and their total,
printed before anything is spent (see ms.plan.planner). The configs are composed as Hydra would compose
them, sweeps expanded by its basic sweeper, but no job is launched: no output folder is made.
"""

from pathlib import Path
from typing import Optional

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ms.cli.compose import jobs
from ms.common.errors import UserError
from ms.plan.flags import take_plan_flags
from ms.plan.measured import Measured, wall_time
from ms.plan.table import format_rows

__all__ = ["output_dir", "plan_main", "take_plan_flags"]


def output_dir(cfg: DictConfig, multirun: bool) -> Optional[Path]:
    """The folder Hydra would run the job in; None where it cannot be worked out before launch."""
    try:
        return Path(cfg.hydra.sweep.dir) / str(cfg.hydra.sweep.subdir) if multirun else Path(cfg.hydra.run.dir)
    except OmegaConfBaseException:  # e.g. a folder named by hydra.job.num, which only the launcher sets
        return None


CONFIG_DIR_FLAGS = ("--config-dir", "-cd")  # Hydra's spellings of the flag that adds a config folder


def take_config_dir(args: list[str]) -> tuple[list[str], Optional[str]]:
    """(the other arguments, the folder that `--config-dir DIR`, `--config-dir=DIR` or `-cd DIR` adds, or
    None): plan mode composes as ms-run would, a folder of configs added included."""
    rest: list[str] = []
    folder = None
    words = iter(args)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag not in CONFIG_DIR_FLAGS:
            rest.append(word)
            continue
        folder = value if equals else next(words, "")
        if not folder:
            raise UserError(f"{flag} needs a folder: {flag} DIR")
    return rest, folder


LEGEND = (
    "calls: requests the run will make (~: an estimate); cached: how many of them the response cache "
    "will answer (?: unknown, because the request depends on the pool the run grows; >=: at least); "
    "est. cost: the backbone's `price` times the tokens of the calls the cache will not answer "
    "(<=: at most, where cached is unknown; -: no price set). Tokens are estimates (ms/plan/planner.py says how)."
)


def plan_main(overrides: list[str], multirun: bool, accept: Optional[float | Measured]) -> int:
    from ms.llm import provider_class
    from ms.llm.backbones import Backbones
    from ms.loop.cell import check_same_cell, local_fingerprint
    from ms.loop.run_folder import completed
    from ms.loop.validation import validate
    from ms.plan.calls import CacheProbe
    from ms.plan.planner import plan_run
    from ms.plan.rows import Row

    overrides, config_dir = take_config_dir(overrides)
    unknown = [a for a in overrides if a.startswith("-")]
    if unknown:
        raise UserError(f"plan mode takes overrides, -m and --config-dir only, not {' '.join(unknown)}")
    probe: Optional[CacheProbe] = None
    summed: dict[tuple[str, str], Row] = {}
    cells = jobs(overrides, multirun, config_dir)
    for number, (job, cfg) in enumerate(cells, 1):
        validate(cfg, plan=True)  # a plan calls no model and opens no pool: no API key or DSN needed
        probe = probe if probe is not None and probe.path.parent == Path(cfg.cache_dir) else CacheProbe(cfg.cache_dir)
        folder = output_dir(cfg, multirun)
        # Nothing is written there: it names the run the plan is for.
        head = f"plan {number}/{len(cells)}" if multirun else "plan"
        head += f" for {folder}" if folder else " for a run whose folder is named at launch"
        print(head + (f": {' '.join(job) or '(no overrides)'}" if multirun else ""))
        finished = completed(folder) if folder is not None else None
        if finished is not None:
            try:
                check_same_cell(folder, finished, cfg, local_fingerprint(cfg))
                print(f"  {folder} already holds a complete run: it is skipped, nothing is spent\n")
            except UserError as refused:
                print(f"  the run would be refused: {refused}\n")
            continue
        plan = plan_run(cfg, accept, probe)
        print(f"  {plan.title}")
        print(format_rows(plan.rows))
        # A finished run's seconds per token time the local backbones' calls (plan_from).
        backbones = Backbones(cfg.backbone)
        timed = (
            wall_time(plan.rows, accept.run, lambda name: provider_class(backbones.config(name)).runs_locally is True)
            if isinstance(accept, Measured)
            else None
        )
        print("".join(f"- {note}\n" for note in plan.notes + ([timed] if timed else [])))
        for r in plan.rows:
            summed.setdefault((r.role, r.backbone), Row(r.role, r.backbone, r.price)).merge(r)
    if multirun:
        print(f"Sweep total over {len(cells)} runs (complete ones cost nothing):")
        print(format_rows(list(summed.values()), "sweep total"))
    print(LEGEND)
    return 0
