"""Opt-in MLflow tracking (hydra/callbacks=mlflow, ms/cli/tracking.py): tiny real runs logged to a real
local SQLite store, read back with MLflow's own client and through its UI's REST API; a finished run
run again logs nothing new; nothing of MLflow loaded without it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, free_port
from omegaconf import OmegaConf

# The smallest run that still has two fills and a stream: one agent, two stream questions, one test
# question, scored by ref_logprob (one forward pass, nothing decoded at test time).
TINY = [
    "data.agents=[riddle]",
    "data.max_seed=4",
    "data.max_stream=1",
    "data.max_test=1",
    "fills=[50,100]",
    "micro_batch=4",
    "train.candidates=3",
    "train.labelled=2",
    "backbone.generation.max_new_tokens=16",
    "scorer.threshold=0",
    "eval.metrics=[ref_logprob]",
    f"data.dir={REPO / 'data'}",
]
# The same as an experiment file, so that a sweep's cell folders are named by the swept key alone;
# no memory train (k=0 has no stream to train on anyway).
TINY_EXPERIMENT = "# @package _global_\n" + OmegaConf.to_yaml(OmegaConf.from_dotlist(TINY + ["retriever.learn=false"]))
# A value the environment holds (a PostgreSQL pool's pool.dsn reads MS_POOL_DSN; this SQLite run reads none): it must reach
# no parameter, tag or artifact.
SECRET = "host=db password=sk-DO-NOT-LOG-4242"


def flat(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from flat(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, node


def logged_files(client, run_id, into: Path) -> dict[str, bytes]:
    folder = Path(client.download_artifacts(run_id, "", str(into)))
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def no_secret_in(run, files: dict[str, bytes]) -> None:
    assert not [k for k, v in {**run.data.params, **run.data.tags}.items() if "sk-DO-NOT-LOG" in v]
    assert not [name for name, data in files.items() if b"sk-DO-NOT-LOG" in data]


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory) -> Path:
    """The folder in which a tiny real run was logged to the default store (outputs/mlflow.db under the
    current folder), with a secret in the environment, then run again, which the loop skipped: what
    it logged and what `mlflow ui` lists of it are read by two tests. The run is tmp/run."""
    from conftest import ms_run_main

    tmp = tmp_path_factory.mktemp("logged")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(tmp)
        monkeypatch.setenv("MS_POOL_DSN", SECRET)
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
        monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
        quiet = ["hydra/job_logging=none", "hydra/hydra_logging=none"]
        argv = ["ms-run", *TINY, "hydra/callbacks=mlflow", f"hydra.run.dir={tmp / 'run'}", f"cache_dir={tmp / 'cache'}"]
        for _ in range(2):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = ms_run_main(monkeypatch, argv + quiet)
            assert code == 0, err.getvalue()[-3000:]
    return tmp


@pytest.mark.slow
def test_a_run_is_logged_with_its_config_metrics_per_fill_record_and_files(logged_run, tmp_path):
    from mlflow import MlflowClient

    out = logged_run / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert (out / "retriever").is_dir() and (logged_run / "outputs" / "mlflow.db").is_file()

    client = MlflowClient(f"sqlite:///{logged_run / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ms")  # no experiment config chosen
    [run] = client.search_runs([experiment.experiment_id])  # once, though it was run twice
    assert (run.info.run_name, run.info.status) == ("run", "FINISHED")
    assert "mlflow.parentRunId" not in run.data.tags

    # Parameters: every key of the saved config, resolved; pool.dsn as written, never its value.
    params = run.data.params
    saved = dict(flat(OmegaConf.to_container(OmegaConf.load(out / ".hydra" / "config.yaml"))))
    assert set(params) == set(saved)
    for key, value in saved.items():
        if "${" not in str(value):
            assert params[key] == (value if isinstance(value, str) else json.dumps(value)), key
    assert "pool.dsn" not in params  # read by the PostgreSQL pool alone (ms.pool.settings), never logged as a value
    assert params["data.agents"] == '["riddle"]' and params["fills"] == "[50, 100]" and params["k"] == "3"

    # Metrics: each fill's numbers from metrics.json, the fill as the step.
    assert set(metrics["fills"]) == {"50", "100"}
    for key, scope in (("overall/ref_logprob", "overall"), ("agent/riddle/ref_logprob", "riddle")):
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        cells = {
            int(f): (b["overall"] if scope == "overall" else b["per_agent"][scope]) for f, b in metrics["fills"].items()
        }
        assert history == [(fill, pytest.approx(cells[fill]["ref_logprob"])) for fill in (50, 100)]
    assert run.data.metrics["overall/n_ref_logprob"] == 1
    assert run.data.metrics["wall_seconds"] == pytest.approx(metrics["wall_seconds"])

    # Tags: the run record.
    record, tags = metrics["provenance"], run.data.tags
    assert tags["mlflow.source.git.commit"] == record["commit"] and record["commit"]
    [(gguf, sha)] = record["backbones"]["smollm2"]["sha256"].items()
    assert tags[f"provenance.backbones.smollm2.sha256.{gguf}"] == sha and len(sha) == 64
    assert tags["provenance.backbones.smollm2.engine"] == record["backbones"]["smollm2"]["engine"]
    assert tags["ms.run_id"] == (out / "run_id").read_text().strip() and tags["ms.complete"] == "true"

    # Artifacts: the run folder's files as they are, less retriever/ (88 MB nothing reads back).
    files = logged_files(client, run.info.run_id, tmp_path / "downloaded")
    here = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert set(files) == {name for name in here if not name.startswith("retriever/")}
    assert {"metrics.json", "predictions.jsonl", "decisions.jsonl", ".hydra/config.yaml"} <= set(files)
    assert files["metrics.json"] == (out / "metrics.json").read_bytes()
    no_secret_in(run, files)


@pytest.mark.slow
def test_a_multirun_is_a_parent_run_with_a_child_per_cell(tmp_path, monkeypatch, capsys):
    from mlflow import MlflowClient

    import ms.cli.run

    store = tmp_path / "elsewhere" / "tracking.db"  # MLFLOW_TRACKING_URI picks the store
    extra = tmp_path / "conf" / "experiment"
    extra.mkdir(parents=True)
    (extra / "tiny.yaml").write_text(TINY_EXPERIMENT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.setenv("MS_POOL_DSN", SECRET)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    sweep = tmp_path / "sweep"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "ms-run",
            "-m",
            f"--config-dir={tmp_path / 'conf'}",
            "experiment=tiny",
            "k=0,1",
            "hydra/callbacks=mlflow",
            f"hydra.sweep.dir={sweep}",
            f"cache_dir={tmp_path / 'cache'}",
            "hydra/job_logging=none",
            "hydra/hydra_logging=none",
        ],
    )
    monkeypatch.setattr(ms.cli.run, "_composed", False)
    ms.cli.run.main()
    assert store.is_file() and not (tmp_path / "outputs").exists()

    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("tiny")  # named after the experiment config
    runs = client.search_runs([experiment.experiment_id])
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = sorted(
        (r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id), key=lambda r: r.info.run_name
    )
    assert len(runs) == 3 and parent.info.status == "FINISHED"
    assert parent.data.tags["ms.sweep_dir"] == str(sweep)
    assert [c.info.run_name for c in children] == ["k=0", "k=1"]  # the cells' folder names
    for child, k in zip(children, ("0", "1")):
        cell = sweep / f"k={k}"
        metrics = json.loads((cell / "metrics.json").read_text())
        assert child.info.status == "FINISHED" and child.data.params["k"] == k
        assert child.data.tags["ms.run_folder"] == str(cell)
        assert child.data.metrics["overall/ref_logprob"] == pytest.approx(
            metrics["fills"]["100"]["overall"]["ref_logprob"]
        )
        files = logged_files(client, child.info.run_id, tmp_path / "downloaded" / k)
        assert files["metrics.json"] == (cell / "metrics.json").read_bytes()
        no_secret_in(child, files)


# ---- a finished run run again: skipped by the loop, so nothing new in MLflow ------------------------


def finish_once(ran: list):
    """A loop that, as ms.loop.pipeline.run does, leaves a folder holding a finished run as it is, and
    otherwise "runs" in it (no model): its run id and a complete metrics.json."""

    def loop(cfg, out: Path) -> dict:
        from ms.loop.run_folder import completed, run_id_for

        if completed(out) is None:
            run_id_for(out)
            (out / "metrics.json").write_text(
                json.dumps(
                    {
                        "complete": True,
                        "wall_seconds": 1.5,
                        "provenance": {"commit": "c0ffee"},
                        "fills": {"100": {"overall": {"P": 0.5, "n": 1}, "per_agent": {"riddle": {"P": 0.5, "n": 1}}}},
                    }
                )
            )
            ran.append(out)
        return {}

    return loop


@pytest.mark.parametrize("first_tracked", [True, False])
def test_a_finished_run_run_again_logs_nothing_new(ms_run, tmp_path, monkeypatch, first_tracked):
    """Run twice more with the callback, a finished run is one MLflow run: logged when it ran, or, where it
    ran untracked, once by the first tracked job that found it finished."""
    from mlflow import MlflowClient

    import ms.loop.pipeline

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    ran: list = []
    monkeypatch.setattr(ms.loop.pipeline, "run", finish_once(ran))
    for tracked in (first_tracked, True, True):
        code, err = ms_run(*TINY, *["hydra/callbacks=mlflow"] * tracked)
        assert code == 0, err
    out = tmp_path / "run"
    assert ran == [out]  # the loop ran once; the other jobs found the run finished

    client = MlflowClient(f"sqlite:///{tmp_path / 'store.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("ms").experiment_id])
    assert run.info.status == "FINISHED" and run.data.metrics["overall/P"] == 0.5
    assert run.data.tags["ms.run_folder"] == str(out) and run.data.tags["ms.complete"] == "true"
    assert run.data.tags["ms.run_id"] == (out / "run_id").read_text().strip()


def test_a_finished_sweep_run_again_leaves_one_parent_with_its_children(tmp_path, monkeypatch, capsys):
    from conftest import ms_run_in_process
    from mlflow import MlflowClient

    import ms.cli.run
    import ms.loop.pipeline

    extra = tmp_path / "conf" / "experiment"
    extra.mkdir(parents=True)
    (extra / "tiny.yaml").write_text(TINY_EXPERIMENT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    ran: list = []
    monkeypatch.setattr(ms.loop.pipeline, "run", finish_once(ran))
    argv = [
        "ms-run",
        "-m",
        f"--config-dir={tmp_path / 'conf'}",
        "experiment=tiny",
        "k=0,1",
        "hydra/callbacks=mlflow",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
    for _ in range(2):
        code, err = ms_run_in_process(monkeypatch, capsys, argv)
        assert code == 0, err
    assert len(ran) == 2  # each cell ran once

    client = MlflowClient(f"sqlite:///{tmp_path / 'store.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert sorted(r.data.tags.get("mlflow.parentRunId") for r in runs if r is not parent) == [parent.info.run_id] * 2
    assert len(runs) == 3 and parent.info.status == "FINISHED"


@pytest.mark.slow
def test_mlflow_ui_lists_a_logged_run_once_after_the_run_is_run_again(logged_run):
    """A tiny real run, logged, then run again (skipped by the loop); `mlflow ui` on its store answers
    over HTTP and its REST API lists the run, once. The UI needs the full package (the mlflow extra)."""
    store = f"sqlite:///{logged_run / 'outputs' / 'mlflow.db'}"
    out = logged_run / "run"

    port = free_port()
    ui = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mlflow"),
            "ui",
            "--backend-store-uri",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            # One server process answers these few requests: the default starts four, and on a busy
            # machine their supervisor kept killing and restarting them as unresponsive.
            "--workers",
            "1",
        ],
        # Nor its job runner and the seven queue consumers it starts, which listing runs never uses.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        cwd=logged_run,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )

    def post(endpoint: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/2.0/mlflow/{endpoint}",
            method="POST",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    try:
        deadline = time.monotonic() + 180  # it takes a while to start on a busy machine
        while True:
            try:
                experiments = post("experiments/search", {"max_results": 100})["experiments"]
                break
            except (urllib.error.URLError, ConnectionError):
                assert ui.poll() is None, f"mlflow ui exited with status {ui.returncode}: {ui.stdout.read()[-3000:]}"
                assert time.monotonic() < deadline, "mlflow ui did not answer within 180 s"
                time.sleep(1)
        [experiment] = [e["experiment_id"] for e in experiments if e["name"] == "ms"]
        [run] = post("runs/search", {"experiment_ids": [experiment]})["runs"]
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        assert tags["ms.run_folder"] == str(out) and tags["ms.complete"] == "true"
        assert run["info"]["status"] == "FINISHED" and "overall/ref_logprob" in {
            m["key"] for m in run["data"]["metrics"]
        }
        listed = f"http://127.0.0.1:{port}/api/2.0/mlflow/artifacts/list?run_id={run['info']['run_id']}"
        with urllib.request.urlopen(listed, timeout=10) as answer:  # its files, as the run's page lists them
            assert "metrics.json" in {f["path"] for f in json.loads(answer.read())["files"]}
    finally:
        os.killpg(ui.pid, signal.SIGTERM)  # its own process group: the server and its workers
        try:
            ui.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait()


# ms-run with the loop stubbed out (no model): which of MLflow's modules the process loaded.
PROBE = """import sys
import ms.loop.pipeline
ms.loop.pipeline.run = lambda cfg, out: None
from ms.cli.run import main
try:
    main()
finally:
    print("mlflow loaded:", any(m.split(".")[0] == "mlflow" for m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize("callbacks, loaded", [([], False), (["hydra/callbacks=mlflow"], True)])
def test_nothing_of_mlflow_is_loaded_unless_the_callback_is_on(tmp_path, callbacks, loaded):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'store.db'}"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            f"hydra.run.dir={tmp_path / 'run'}",
            f"data.dir={REPO / 'data'}",
            f"cache_dir={tmp_path / 'cache'}",
            *callbacks,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"mlflow loaded: {loaded}" in done.stderr
    assert (tmp_path / "store.db").exists() == loaded


def test_without_mlflow_installed_the_callback_is_one_line_before_any_folder(ms_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if it were not installed: find_spec finds nothing
    code, err = ms_run(*TINY, "hydra/callbacks=mlflow")
    assert (code, err) == (
        2,
        ["ms-run: error: hydra/callbacks=mlflow needs MLflow, which is not installed: pip install -e '.[mlflow]'"],
    )
    assert not (tmp_path / "run").exists()
