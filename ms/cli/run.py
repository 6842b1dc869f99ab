"""The Hydra entry point: compose and check every job before Hydra starts, then hand each composed
config to the plain `run` function.

Exit status 2 means a user error (a bad setting, bad data, a missing or damaged file, a missing
key, an unreachable endpoint): one message, no traceback. `--debug` or HYDRA_FULL_ERROR=1 adds the
traceback. A bug exits with status 1 and its traceback, as Hydra reports it.
"""

import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional

import hydra
from omegaconf import DictConfig, OmegaConf

from ms.cli.folders import register_resolvers
from ms.common.errors import USER_ERROR_EXIT, UserError, print_user_error, take_debug_flag
from ms.config.files import DECISIONS_FILE, WRITERS_FILE
from ms.config.schema import POOL_DSN_ENV
from ms.config.store import CONF_DIR, register
from ms.loop.run_folder import began, completed, folder_override, mark_failed, resume_command

PROG = "ms-run"
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
MULTIRUN = ("-m", "--multirun")
# Flags with which Hydra prints its own help or information, or composes from another primary
# config: ms-run leaves these commands to Hydra unchecked.
HYDRA_ONLY = ("help", "hydra_help", "shell_completion", "info", "config_path", "config_name", "experimental_rerun")

# What --cfg says on stderr: the config it prints was composed (a misspelt key is refused) but not checked.
UNCHECKED = "--cfg prints the config without checking its values; +plan=true instead checks them and runs nothing"

log = logging.getLogger(__name__)

register_resolvers()  # at import, for a launcher's worker processes too (ms.cli.folders says why)

# Set once Hydra has composed a config and called the task. Hydra exits with status 1 both for
# a config it cannot compose and for a bug in the task; only the first is the user's to fix, and
# this tells them apart where `preflight` left the command to Hydra (see HYDRA_ONLY). A multirun's
# launcher may call the task in other processes, where this flag is never set, so a multirun's
# status 1 is left as it is.
_composed = False


@hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")
def hydra_main(cfg: DictConfig) -> None:
    global _composed
    _composed = True
    from hydra.core.hydra_config import HydraConfig

    out = Path(HydraConfig.get().runtime.output_dir)
    earlier = decisions_state(out)  # an earlier attempt's decisions.jsonl, which says nothing of this one
    finished = completed(out) is not None  # the loop then skips the run: this attempt writes no result
    log.info("output folder: %s", out)  # first, before the seconds that importing torch takes
    try:
        from tqdm.contrib.logging import logging_redirect_tqdm
        from transformers.utils import logging as transformers_logging

        from ms.loop.pipeline import run

        # Our own bars show progress; a loading bar per model load would only bury them.
        transformers_logging.disable_progress_bar()
        with logging_redirect_tqdm():  # a log line goes above the bars instead of through them
            run(cfg, out)
            export_memories(out)
        if not finished:
            log.info("done; this run wrote to %s", out)
    except UserError as error:
        mark_failed(out, str(error))
        if began(out):
            hc = HydraConfig.get()
            error = UserError(
                f"{error}; to resume this run in its folder, removing what this attempt admitted "
                f"first: {resume_command(PROG, out, list(hc.overrides.task), list(hc.overrides.hydra))}"
            )
        print_user_error(PROG, error)
        sys.exit(USER_ERROR_EXIT)
    except Exception as bug:  # a bug keeps its traceback; its folder still says the attempt failed
        mark_failed(out, f"{type(bug).__name__}: {bug}")
        raise
    except KeyboardInterrupt:
        # Nothing is left half-written that a re-run would trust: metrics.json, which marks a run
        # finished, is written last and atomically, and a re-run in this folder clears what an
        # unfinished attempt left (ms.loop.run_folder.clear_partial) and starts it over.
        print(f"{PROG}: interrupted{after_step(out, earlier)}; {resume_hint(HydraConfig.get(), out)}", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)


def export_memories(out: Path) -> None:
    """memories.csv beside the run's results: who wrote each memory of its pool, so that ms-report and
    the sharing matrix never need the pool's file or server again."""
    from ms.report.common.writers import export_writers

    if (out / WRITERS_FILE).exists():
        return
    try:
        rows = export_writers(out, out / WRITERS_FILE)
    except UserError as missing:  # no pool to read (a stubbed run): the results stand without it
        log.debug("no %s: %s", WRITERS_FILE, missing)
        return
    log.info("wrote %s (%d memories)", out / WRITERS_FILE, rows)


def decisions_state(out: Path) -> Optional[tuple]:
    """What identifies the run's decisions.jsonl as it is now (None: there is none)."""
    try:
        found = (out / DECISIONS_FILE).stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def after_step(out: Path, earlier: Optional[tuple]) -> str:
    """ " after stream step N": the last step this attempt wrote to the run's decisions.jsonl (the
    loop's own counter lives in the run, out of reach here); "" where it wrote none, the file being
    missing or as an earlier attempt left it (`earlier`, decisions_state when the job began)."""
    path = out / DECISIONS_FILE
    if decisions_state(out) in (None, earlier):
        return ""
    steps = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            steps.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):  # a line the interrupt cut short
            continue
    return f" after stream step {max(steps)}" if steps else ""


def resume_hint(hydra_config, out: Path) -> str:
    """How to resume: the same command, in the same folder, which a folder named by the clock is not."""
    from hydra.types import RunMode

    multirun = hydra_config.mode == RunMode.MULTIRUN
    named = OmegaConf.to_container(hydra_config.sweep if multirun else hydra_config.run, resolve=False)["dir"]
    where = (
        ""
        if "${now:" not in str(named)
        else (
            f" with {folder_override('hydra.sweep.dir', hydra_config.sweep.dir)}"
            if multirun
            else f" with {folder_override('hydra.run.dir', out)}"
        )
    )
    return f"re-run the same command{where} to resume (the unfinished run starts over in its folder)"


def take_pool_dsn(argv: list[str]) -> list[str]:
    """Move a `pool.dsn=...` setting into the environment, where the config reads it (POOL_DSN_ENV):
    Hydra would write it into the run folder's name and .hydra/overrides.yaml. Launchers' worker
    processes inherit it."""
    kept = []
    for arg in argv:
        key, given, value = arg.partition("=")
        if given and key.lstrip("+") == "pool.dsn":
            os.environ[POOL_DSN_ENV] = value
        else:
            kept.append(arg)
    return kept


def preflight(args: list[str]) -> None:
    """Compose every job the command will launch and check each (the settings, the files they
    name, the API keys), before Hydra starts: Hydra makes a job's output folder before calling it,
    so a mistake found there would leave a folder behind. A command that only prints the config
    (--cfg) is composed, not checked, so that a config can be read whatever its values, and says so
    on stderr. Raises UserError, one line per mistake."""
    if "--version" in args:
        return
    from hydra._internal.utils import get_args_parser

    from ms.cli.compose import jobs
    from ms.loop.validation import validate

    parsed = get_args_parser().parse_args(args)
    if any(getattr(parsed, flag) for flag in HYDRA_ONLY):
        return
    composed = jobs(parsed.overrides, parsed.multirun, parsed.config_dir)
    if parsed.cfg is None:
        for _, cfg in composed:
            validate(cfg)
        fingerprints = check_data(cfg for _, cfg in composed)
        for _, cfg in composed:
            check_folder(cfg, parsed.multirun, fingerprints)
        check_servers(cfg.pool for _, cfg in composed)
        check_callbacks(cfg for _, cfg in composed)
    else:
        print(f"{PROG}: {UNCHECKED}", file=sys.stderr)


def check_callbacks(cfgs) -> None:
    """hydra/callbacks=mlflow (ms.cli.tracking) needs MLflow: looked for, not imported, before Hydra makes
    a folder, where Hydra would only warn, after the run, that the callback failed."""
    from importlib.util import find_spec

    for cfg in cfgs:
        for name, callback in (OmegaConf.select(cfg, "hydra.callbacks") or {}).items():
            if str(callback.get("_target_", "")).startswith("ms.cli.tracking.") and find_spec("mlflow") is None:
                raise UserError(
                    f"hydra/callbacks={name} needs MLflow, which is not installed: pip install -e '.[mlflow]'"
                )


def check_servers(pools) -> None:
    """Reach each PostgreSQL pool's server once, before Hydra makes a folder: a server that is down
    is one line now, not a run folder with nothing in it."""
    from ms.pool import PoolFileError, open_pool

    for dsn in dict.fromkeys(p.dsn for p in pools if p.get("dsn")):  # a server pool's (ms.pool.settings)
        try:
            with open_pool(OmegaConf.create({"backend": "postgres", "dsn": dsn}), Path(os.devnull)):
                pass
        except PoolFileError as error:
            raise UserError(str(error)) from None


def check_data(cfgs) -> dict[str, str]:
    """Read each job's data files as its run will (a data folder's; a hub dataset is read by the
    run), so that a bad line is reported before any run folder exists. Sweep cells that share their
    data and agents are read once. Returns each data key's fingerprint (ms.loop.cell)."""
    from ms.loop.cell import local_fingerprint

    fingerprints = {}
    for cfg in cfgs:
        key = data_key(cfg)
        if cfg.data.hf is None and key not in fingerprints:
            fingerprints[key] = local_fingerprint(cfg)
    return fingerprints


def data_key(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg.data) + OmegaConf.to_yaml(cfg.agents)


def check_folder(cfg: DictConfig, multirun: bool, fingerprints: dict[str, str]) -> None:
    """Refuse, before Hydra rewrites anything in it, a job whose folder holds a finished run of other
    settings or data: resuming would return that run's numbers as this one's (ms.loop.cell)."""
    from ms.loop.cell import check_same_cell

    folder = Path(cfg.hydra.sweep.dir) / cfg.hydra.sweep.subdir if multirun else Path(cfg.hydra.run.dir)
    metrics = completed(folder)
    if metrics is not None:
        check_same_cell(folder, metrics, cfg, fingerprints.get(data_key(cfg)))


def main() -> None:
    """`ms-run`: Hydra's command line, plus --debug, and plan mode (+plan=true, see ms.cli.plan).
    Ctrl-C exits with status 130 and one line, no traceback."""
    try:
        _main()
    except KeyboardInterrupt:  # outside a job, which says where it stopped: composing, planning, between runs
        print(f"{PROG}: interrupted; re-run the same command to resume", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)


def _main() -> None:
    register()
    sys.argv = take_pool_dsn(take_debug_flag(sys.argv))
    multirun = any(arg in MULTIRUN for arg in sys.argv[1:])
    from ms.cli.plan import plan_main, take_plan_flags

    try:
        args, plan, accept = take_plan_flags(sys.argv[1:])
        if plan:  # composed here, not by a Hydra job: a job would make its output folder
            sys.exit(plan_main([a for a in args if a not in MULTIRUN], multirun, accept))
        preflight(args)
    except UserError as error:
        print_user_error(PROG, error)
        sys.exit(USER_ERROR_EXIT)
    sys.argv = [sys.argv[0], *args]
    try:
        hydra_main()
    except SystemExit as done:
        if done.code == 1 and not _composed and not multirun:
            sys.exit(USER_ERROR_EXIT)
        raise
