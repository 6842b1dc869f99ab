"""A redo that keeps its promise: a run whose PostgreSQL server stops mid-run prints the command that
resumes it in its own folder; that command removes the attempt's memories first, so the pool then
holds exactly one finished run's memories, each credited to it. And a start that fails leaves nothing."""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, ms_run_in_process

from ms.common.errors import USER_ERROR_EXIT

# Three micro-batches of two, so that the server can be stopped after the first has been admitted; a
# frozen retriever, as memory train adds nothing to the pool.
STREAM = [
    "data.agents=[riddle,pun]",
    "data.max_seed=3",
    "data.max_stream=3",
    "data.max_test=1",
    "fills=[100]",
    "micro_batch=2",
    "retriever=dense_frozen",
    "backbone.generation.max_new_tokens=8",
    "eval.metrics=[ref_logprob]",
    "scorer.threshold=0",
    "pool/backend=postgres",
]


def steps_in(decisions: Path) -> list[int]:
    return [json.loads(line)["step"] for line in decisions.read_text().splitlines()] if decisions.exists() else []


@pytest.mark.slow
def test_the_printed_command_resumes_the_run_and_the_pool_holds_one_runs_worth(
    postgres_cluster, postgres_dsn, tmp_path, monkeypatch, capsys
):
    """Both runs are `ms-run` in this process (the command line as typed, through Hydra); a thread
    stops the server once the first micro-batch is admitted."""
    from omegaconf import OmegaConf

    from ms.config.schema import POOL_DSN_ENV
    from ms.pool import open_pool

    monkeypatch.chdir(tmp_path)  # the run's folder, named by its settings: tmp_path/outputs/OVERRIDES
    (tmp_path / "data").symlink_to(REPO / "data")  # where data.dir=data is read from here
    monkeypatch.delenv(POOL_DSN_ENV, raising=False)  # ms-run moves pool.dsn there; restored after the test
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    quiet = ["hydra/job_logging=none", "hydra/hydra_logging=none"]  # pytest keeps its own logging

    def ms_run(args: list[str]) -> tuple[int, str]:
        return ms_run_in_process(monkeypatch, capsys, ["ms-run", *args, *(q for q in quiet if q not in args)])

    stopped: list = []

    def stop_after_step_1() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not stopped:
            for decisions in tmp_path.glob("outputs/*/decisions.jsonl"):
                if any(step >= 1 for step in steps_in(decisions)):
                    postgres_cluster.stop()
                    stopped.append(decisions.parent)
                    return
            time.sleep(0.2)

    watcher = threading.Thread(target=stop_after_step_1, daemon=True)
    watcher.start()
    try:
        code, err = ms_run([*STREAM, f"pool.dsn={postgres_dsn}", f"cache_dir={tmp_path / 'cache'}"])
        watcher.join(timeout=60)
        assert stopped, f"the run ended (status {code}) before its first micro-batch was admitted: {err[-3000:]}"
    finally:
        stopped.append("done")  # ends the watcher if the run failed early
        postgres_cluster.start()
    folder = stopped[0]
    assert code == USER_ERROR_EXIT
    # Beside the progress bars (tqdm writes to stderr too), one line says what failed and how to resume.
    [line] = [x for x in err.splitlines() if x.startswith("ms-run: ")]
    assert "failed (" in line and "to resume this run in its folder" in line, line
    command = shlex.split(line.split("admitted first: ", 1)[1])
    assert command[0] == "ms-run" and f'hydra.run.dir="{folder}"' in command
    assert not [a for a in command if a.startswith("pool.dsn")]  # the DSN stays in the environment
    assert json.loads((folder / "failed.json").read_text())["reason"].startswith("the pool's PostgreSQL server")

    monkeypatch.setenv(POOL_DSN_ENV, postgres_dsn)
    code, err = ms_run(command[1:])
    assert code == 0, err[-3000:]
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
    steps = steps_in(folder / "decisions.jsonl")
    assert steps == sorted(steps) and len(steps) == 6  # the redo's own decisions only


def test_a_missing_engine_is_one_line_before_any_model_loads_and_no_folder(ms_run, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    code, lines = ms_run("backbone.engine=llamacpp")
    assert code == USER_ERROR_EXIT and len(lines) == 1, lines
    assert "backbone.engine=llamacpp needs llama-cpp-python" in lines[0] and "-DGGML_NATIVE=OFF" in lines[0]
    assert not (tmp_path / "run").exists()
