"""A redo that keeps its promise: a run whose PostgreSQL server stops mid-run prints the command that
resumes it in its own folder; that command removes the attempt's memories first, so the pool then
holds exactly one finished run's memories, each credited to it. And a start that fails leaves nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from ms.common.errors import USER_ERROR_EXIT

from conftest import REPO

# Four micro-batches of two, so that the server can be stopped after the first has been admitted.
STREAM = ["data.agents=[riddle,pun]", "data.max_seed=3", "data.max_stream=4", "data.max_test=1", "fills=[100]",
          "micro_batch=2", "train.candidates=2", "train.labelled=2", "backbone.generation.max_new_tokens=8",
          "eval.metrics=[ref_logprob]", "scorer.threshold=0", "pool.backend=postgres"]


def ms_run(args: list[str], **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ms", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", **env})


def wait_for_step(decisions, step: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if decisions.exists() and any(json.loads(line)["step"] >= step for line in decisions.read_text().splitlines()):
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before step {step}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"no step {step} in {timeout} s")


@pytest.mark.slow
def test_the_printed_command_resumes_the_run_and_the_pool_holds_one_runs_worth(postgres_cluster, postgres_dsn,
                                                                              tmp_path):
    from pathlib import Path

    from omegaconf import OmegaConf

    from ms.pool import open_pool

    args = [*STREAM, f"pool.dsn={postgres_dsn}", f"cache_dir={tmp_path / 'cache'}"]  # a timestamped folder
    proc = ms_run(args)
    # The folder is named in the first log line; decisions.jsonl grows one step at a time.
    folder = None
    for line in proc.stdout:
        if "output folder: " in line:
            folder = line.split("output folder: ")[1].strip()
            break
    assert folder is not None
    folder = Path(folder)
    wait_for_step(folder / "decisions.jsonl", 1, proc)
    postgres_cluster.stop()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        postgres_cluster.start()
    assert proc.returncode == USER_ERROR_EXIT
    # Beside the progress bars (tqdm writes to stderr too), one line says what failed and how to resume.
    [line] = [x for x in err.splitlines() if x.startswith("ms-run: ")]
    assert "failed (" in line and "to resume this run in its folder" in line, line
    command = shlex.split(line.split("admitted first: ", 1)[1])
    assert command[0] == "ms-run" and f"hydra.run.dir='{folder}'" in command
    assert not [a for a in command if a.startswith("pool.dsn")]  # the DSN stays in the environment
    assert json.loads((folder / "failed.json").read_text())["reason"].startswith("the pool's PostgreSQL server")

    resumed = ms_run(command[1:], MS_POOL_DSN=postgres_dsn)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    assert not (folder / "failed.json").exists()
    metrics = json.loads((folder / "metrics.json").read_text())
    run_id = (folder / "run_id").read_text().strip()
    with open_pool(OmegaConf.create({"backend": "postgres", "dsn": postgres_dsn}), folder / "unused") as pool:
        by_run = pool.tally(["run_id", "origin"])
    stream = {run: n for (run, origin), n in by_run.items() if origin == "stream"}
    assert stream == {run_id: sum(metrics["stream"]["accepted"].values())}  # one run's worth, credited to it
    # Who wrote each memory is exported beside the results, so a report never needs the server.
    exported = (folder / "memories.csv").read_text().splitlines()
    assert len(exported) - 1 == sum(by_run.values())
    steps = [json.loads(line)["step"] for line in (folder / "decisions.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and len(steps) == 8  # the redo's own decisions only


def test_a_missing_engine_is_one_line_before_any_model_loads_and_no_folder(ms_run, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    code, lines = ms_run("backbone.engine=llamacpp")
    assert code == USER_ERROR_EXIT and len(lines) == 1, lines
    assert "backbone.engine=llamacpp needs llama-cpp-python" in lines[0] and "-DGGML_NATIVE=OFF" in lines[0]
    assert not (tmp_path / "run").exists()
