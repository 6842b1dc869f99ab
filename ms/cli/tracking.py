"""Opt-in MLflow tracking: a Hydra callback, turned on with `hydra/callbacks=mlflow`
(conf/hydra/callbacks/mlflow.yaml). What it logs, where the store is and how the experiment is named:
docs/reading/mlflow.md.

A job whose folder already held a finished run (the loop skips it) logs nothing new where the
experiment already holds that run: a second MLflow run with the same numbers would read as a replicate.

Nothing else in ms imports this module (Hydra instantiates it by its name), and it imports MLflow
only inside its methods, so without the callback nothing of MLflow is loaded (an import-linter
contract keeps it so). A tracking failure never fails a run: Hydra turns a callback's error into a
warning.
"""

import json
import logging
import os
import re
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ms.config.files import FAILED_FILE, METRICS_FILE, RUN_ID_FILE
from ms.loop.cell import flat

log = logging.getLogger(__name__)

DEFAULT_STORE = Path("outputs") / "mlflow.db"  # under the current folder, as Hydra's outputs/ are
DEFAULT_ARTIFACTS = Path("outputs") / "mlartifacts"
SQLITE = "sqlite:///"
DEFAULT_EXPERIMENT = "ms"  # where no experiment config was chosen
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
# MLflow's limits on one value (mlflow.utils.validation): longer ones are cut, with this mark.
MAX_PARAM_LENGTH = 6000
MAX_TAG_LENGTH = 8000
CUT = "..."
# A value computed by a resolver (`${oc.env:VAR}` reads the environment) is logged as written, never
# as resolved: a variable may hold a secret (the config itself only ever names the variable).
RESOLVER_CALL = re.compile(r"\$\{\s*[\w.]+\s*:")


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - len(CUT)] + CUT


def _escaped(node: Any) -> Any:
    """A plain container with every string that calls a resolver escaped, so that it stays as written."""
    if isinstance(node, dict):
        return {key: _escaped(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_escaped(value) for value in node]
    if isinstance(node, str) and RESOLVER_CALL.search(node):
        return node.replace("${", "\\${")
    return node


def config_params(cfg: DictConfig) -> dict[str, str]:
    """The config as MLflow parameters: dotted keys; node interpolations resolved, resolver calls
    (the environment's values) as written; lists and null as JSON; a value past MLflow's limit cut."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    raw.pop("hydra", None)
    plain = OmegaConf.to_container(OmegaConf.create(_escaped(raw)), resolve=True)
    return {
        key: _cut(value if isinstance(value, str) else json.dumps(value), MAX_PARAM_LENGTH)
        for key, value in flat(plain).items()
    }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fill_metrics(metrics: Mapping[str, Any]) -> Iterator[tuple[str, float, int]]:
    """(key, value, step) for each number metrics.json holds per fill, the fill (a percentage of the
    stream) as the step: `overall/P`, `agent/riddle/P`, their CI bounds (`.../P_ci_low`, `_ci_high`)
    and counts (`.../n_P`; `.../n` where a run counted its questions once)."""
    for fill, block in sorted((metrics.get("fills") or {}).items(), key=lambda item: int(item[0])):
        scopes = [("overall", block.get("overall") or {})]
        scopes += [(f"agent/{agent}", cell) for agent, cell in sorted((block.get("per_agent") or {}).items())]
        for scope, cell in scopes:
            for key, value in cell.items():
                if key == "ci":  # a bound is null where too few questions were measured
                    for metric, bounds in (value or {}).items():
                        for side, bound in zip(("low", "high"), bounds or ()):
                            if _number(bound):
                                yield f"{scope}/{metric}_ci_{side}", bound, int(fill)
                elif key == "n" and isinstance(value, dict):
                    for metric, count in value.items():
                        yield f"{scope}/n_{metric}", count, int(fill)
                elif _number(value):
                    yield f"{scope}/{key}", value, int(fill)


def run_metrics(metrics: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """The run's own totals: its wall time and what the gate did with the stream."""
    if _number(metrics.get("wall_seconds")):
        yield "wall_seconds", metrics["wall_seconds"]
    stream = metrics.get("stream") or {}
    for key in ("accepted", "rejected"):
        if isinstance(stream.get(key), dict):
            yield f"stream/{key}", sum(stream[key].values())
    if _number(stream.get("unscored")):
        yield "stream/unscored", stream["unscored"]


def record_tags(metrics: Mapping[str, Any]) -> dict[str, str]:
    """The run record (metrics.json's `provenance`) as tags `provenance.KEY...`, and the commit also
    under MLflow's own tag, which its UI shows."""
    record = metrics.get("provenance") or {}
    tags = {
        f"provenance.{key}": _cut(value if isinstance(value, str) else json.dumps(value), MAX_TAG_LENGTH)
        for key, value in flat(record).items()
    }
    if record.get("commit"):
        tags["mlflow.source.git.commit"] = record["commit"]
    return tags


class MlflowCallback(Callback):
    """Logs each job of ms-run to MLflow (see the module's docstring)."""

    def __init__(
        self, tracking_uri: Optional[str] = None, experiment: Optional[str] = None, skip: Sequence[str] = ("retriever",)
    ) -> None:
        self.tracking_uri = tracking_uri or os.environ.get(TRACKING_URI_ENV)
        self.artifacts: Optional[str] = None
        if not self.tracking_uri:  # the default: a path of our own, not MLflow's default in the current folder
            self.tracking_uri = f"{SQLITE}{DEFAULT_STORE.resolve()}"
            self.artifacts = str(DEFAULT_ARTIFACTS.resolve())
        elif self.tracking_uri.startswith(SQLITE):  # a new experiment's artifacts beside its store, not in ./mlruns
            self.artifacts = str(Path(self.tracking_uri[len(SQLITE) :]).resolve().parent / DEFAULT_ARTIFACTS.name)
        self.experiment = experiment or os.environ.get(EXPERIMENT_ENV)
        self.skip = tuple(skip or ())
        self.parent_run_id: Optional[str] = None  # set in a multirun; a launcher's workers get a copy
        self.finished_before: set[str] = set()  # folders whose job found a finished run (on_job_start)
        self._client = None

    def __getstate__(self) -> dict:  # a launcher pickles the callback for its workers: not the client
        return {**self.__dict__, "_client": None}

    # ---- Hydra's events --------------------------------------------------------------------------

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        client, experiment_id = self._open(config)
        overrides = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []]
        sweep_dir = str(OmegaConf.select(config, "hydra.sweep.dir"))
        run = client.create_run(
            experiment_id,
            run_name=sweep_dir,
            tags={
                "ms.sweep_dir": str(Path(sweep_dir).resolve()),
                "ms.overrides": _cut(" ".join(overrides), MAX_TAG_LENGTH),
            },
        )
        self.parent_run_id = run.info.run_id
        log.info("MLflow: sweep run %s in %s", self.parent_run_id, self.tracking_uri)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Note a job whose folder already holds a finished run, which the loop will skip."""
        from ms.loop.run_folder import completed

        out = str(config.hydra.runtime.output_dir)
        if completed(Path(out)) is not None:
            self.finished_before.add(out)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus
        from mlflow.entities import Metric, Param, RunTag

        from ms.loop.run_folder import completed

        out = Path(config.hydra.runtime.output_dir)
        metrics = completed(out) or {}
        client, experiment_id = self._open(config)
        if str(out) in self.finished_before:
            self.finished_before.discard(str(out))
            logged = self.logged_run(client, experiment_id, out)
            if logged is not None:
                log.info(
                    "MLflow: %s held a finished run before this job, logged as run %s; nothing new logged", out, logged
                )
                return
        tags = {
            "ms.run_folder": str(out),
            **record_tags(metrics),
            "ms.overrides": _cut(" ".join(str(o) for o in config.hydra.overrides.task), MAX_TAG_LENGTH),
        }
        if (out / RUN_ID_FILE).exists():
            tags["ms.run_id"] = (out / RUN_ID_FILE).read_text(encoding="utf-8").strip()
        if (out / FAILED_FILE).exists():
            tags["ms.failed"] = _cut((out / FAILED_FILE).read_text(encoding="utf-8"), MAX_TAG_LENGTH)
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        run_id = client.create_run(experiment_id, run_name=out.name, tags=tags).info.run_id

        task_cfg = job_return.cfg if getattr(job_return, "cfg", None) is not None else config
        when = int((out / METRICS_FILE).stat().st_mtime * 1000) if metrics else 0
        numbers = [Metric(key, float(value), when, step) for key, value, step in fill_metrics(metrics)]
        numbers += [Metric(key, float(value), when, 0) for key, value in run_metrics(metrics)]
        client.log_batch(
            run_id,
            metrics=numbers,
            params=[Param(k, v) for k, v in config_params(task_cfg).items()],
            tags=[RunTag("ms.complete", json.dumps(bool(metrics)))],
        )
        for path in self.files(out):
            parent = path.parent.relative_to(out).as_posix()
            client.log_artifact(run_id, str(path), artifact_path=None if parent == "." else parent)
        finished = job_return.status == JobStatus.COMPLETED and bool(metrics)
        client.set_terminated(run_id, "FINISHED" if finished else "FAILED")
        log.info("MLflow: run %s in %s", run_id, self.tracking_uri)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The sweep's run finished; removed where no cell logged a run under it (every cell was finished
        and logged before), as it would be a second record of that sweep. Its children are looked up in
        the store: a launcher's workers log them from their own copies of this callback."""
        if self.parent_run_id:
            client, experiment_id = self._open(config)
            children = client.search_runs(
                [experiment_id], max_results=1, filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'"
            )
            if children:
                client.set_terminated(self.parent_run_id, "FINISHED")
            else:
                client.delete_run(self.parent_run_id)
                log.info(
                    "MLflow: no cell of this sweep logged a new run (each was finished and logged before); "
                    "its sweep run %s is removed",
                    self.parent_run_id,
                )

    # ---- helpers ---------------------------------------------------------------------------------

    def files(self, out: Path) -> list[Path]:
        """The run folder's files, less those under a skipped name (`skip`: names or patterns of the
        folder's own entries, e.g. retriever/, 88 MB that nothing in ms reads back)."""
        return sorted(
            p
            for p in out.rglob("*")
            if p.is_file() and not any(fnmatch(p.relative_to(out).parts[0], pattern) for pattern in self.skip)
        )

    @staticmethod
    def logged_run(client, experiment_id: str, out: Path) -> Optional[str]:
        """The id of the MLflow run, in this experiment, that already holds the finished run in `out`
        (tagged with its folder and run id, complete), or None."""
        try:
            run_id = (out / RUN_ID_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not re.fullmatch(r"[0-9a-f]+", run_id):  # ids are hex (ms.loop.run_folder.run_id_for)
            return None
        for run in client.search_runs([experiment_id], filter_string=f"tags.`ms.run_id` = '{run_id}'"):
            if run.data.tags.get("ms.run_folder") == str(out) and run.data.tags.get("ms.complete") == "true":
                return run.info.run_id
        return None

    def experiment_name(self, config: DictConfig) -> str:
        return self.experiment or OmegaConf.select(config, "hydra.runtime.choices.experiment") or DEFAULT_EXPERIMENT

    def _open(self, config: DictConfig):
        """The client and the experiment's id, the experiment made on first use (its artifacts beside
        the default store, where that is the store)."""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        if self._client is None:
            if self.tracking_uri.startswith(SQLITE):
                Path(self.tracking_uri[len(SQLITE) :]).parent.mkdir(parents=True, exist_ok=True)
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        name = self.experiment_name(config)
        found = self._client.get_experiment_by_name(name)
        if found is None:
            try:
                return self._client, self._client.create_experiment(name, artifact_location=self.artifacts)
            except MlflowException:  # another process made it meanwhile
                found = self._client.get_experiment_by_name(name)
                if found is None:
                    raise
        return self._client, found.experiment_id
