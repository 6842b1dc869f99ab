"""Sweeps as users start them: `python -m ms -m ...` on the real default model, `ms-report` on
the result, and resuming an interrupted sweep. The basic launcher's two-cell sweep is run once for
the module (`basic_sweep`): the report test and the joblib launcher's comparison both read it."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

TINY_EXPERIMENT = """# @package _global_
data:
  agents: [riddle, pun]
  max_seed: 4
  max_stream: 1
  max_test: 1
fills: [100]
micro_batch: 4
train:
  candidates: 3
  labelled: 2
backbone:
  generation:
    max_new_tokens: 8
"""
# In the experiment file, so that the cells' folders stay named by the swept key alone.
BY_LOGPROB = TINY_EXPERIMENT + "eval:\n  metrics: [ref_logprob]\n"


def sweep(tmp_path: Path, sweep_dir: Path, *params: str, experiment=TINY_EXPERIMENT, **popen) -> subprocess.Popen:
    """A real multirun of a tiny experiment (`experiment`), which a search-path folder adds to
    conf/experiment/; its response cache is tmp_path/cache."""
    extra = tmp_path / "conf"
    (extra / "experiment").mkdir(parents=True, exist_ok=True)
    (extra / "experiment" / "tiny.yaml").write_text(experiment)
    cmd = [
        sys.executable,
        "-m",
        "ms",
        "-m",
        f"--config-dir={extra}",
        "experiment=tiny",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={sweep_dir}",
        *params,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
    )


@pytest.fixture(scope="module")
def basic_sweep(tmp_path_factory) -> Path:
    """The folder of one finished k=0,3 sweep on Hydra's basic launcher, which only reads of it follow;
    its response cache is the folder's parent's cache/."""
    root = tmp_path_factory.mktemp("basic")
    proc = sweep(root, root / "multirun", "k=0,3")
    out, _ = proc.communicate(timeout=1200)
    assert proc.returncode == 0, out[-3000:]
    return root / "multirun"


@pytest.mark.slow
def test_two_cell_sweep_and_report(tmp_path, basic_sweep):
    sweep_dir = basic_sweep
    cells = sorted(p.parent for p in sweep_dir.rglob("metrics.json"))
    assert [c.name for c in cells] == ["k=0", "k=3"]  # folders named from the overrides

    from ms.report import main as report

    assert report([str(sweep_dir), "--out", str(tmp_path / "report")]) == 0
    rows = list(csv.reader((tmp_path / "report" / "table1.csv").open()))
    header = rows[0]
    for cell in cells:
        metrics = json.loads((cell / "metrics.json").read_text())
        k = metrics["run"]["k"]
        column = header.index(f"{k}-shot smollm2 ours")
        for row in rows[1:]:
            agent = row[0]
            if agent in metrics["fills"]["100"]["per_agent"]:
                assert float(row[column]) == pytest.approx(metrics["fills"]["100"]["per_agent"][agent]["P"], abs=1e-6)
    figure = tmp_path / "report" / "figure4_smollm2.png"
    assert figure.exists() and figure.stat().st_size > 1000


@pytest.mark.slow
def test_resuming_an_interrupted_sweep_redoes_only_unfinished_cells(tmp_path):
    """k=0 (no stream, so the cheaper cell) first, then k=1. Scored by ref_logprob alone: what is resumed,
    not what is measured, is the point (the report test reads BERTScore's P)."""
    sweep_dir = tmp_path / "multirun"
    proc = sweep(tmp_path, sweep_dir, "k=0,1", experiment=BY_LOGPROB, start_new_session=True)
    first = sweep_dir / "k=0" / "metrics.json"
    second = sweep_dir / "k=1"
    deadline = time.time() + 1200
    # Kill the sweep once the first cell is complete and the second has started its stream.
    while time.time() < deadline and not (first.exists() and (second / "decisions.jsonl").exists()):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.exists() and not (second / "metrics.json").exists()
    finished_at = first.stat().st_mtime_ns

    again = sweep(tmp_path, sweep_dir, "k=0,1", experiment=BY_LOGPROB)
    out, _ = again.communicate(timeout=1200)
    assert again.returncode == 0, out[-3000:]
    assert first.stat().st_mtime_ns == finished_at  # the complete cell was skipped
    assert "already holds a complete run" in out
    metrics = json.loads((second / "metrics.json").read_text())
    assert metrics["complete"] is True
    decisions = (second / "decisions.jsonl").read_text().splitlines()
    assert len(decisions) == 2  # the redo started from an empty stream, not on top of the killed one


def cell_results(sweep_dir: Path) -> dict[str, dict]:
    """What a launcher must not change: each cell's admissions, per-agent results and losses."""
    out = {}
    for path in sorted(sweep_dir.rglob("metrics.json")):
        metrics = json.loads(path.read_text())
        stream = metrics["stream"]
        out[path.parent.name] = {
            "accepted": stream["accepted"],
            "rejected": stream["rejected"],
            "P": {a: r["P"] for a, r in metrics["fills"]["100"]["per_agent"].items()},
            "losses": stream["train_losses"],
        }
    return out


def kill_worker_of(cell: Path, parent: int) -> bool:
    """SIGKILL the launcher's worker process that has `cell`'s pool open; False if none has yet."""
    import psutil

    for child in psutil.Process(parent).children(recursive=True):
        try:
            if any(Path(f.path).parent == cell for f in child.open_files()):
                child.kill()
                return True
        except psutil.Error:
            continue
    return False


@pytest.mark.slow
def test_joblib_launcher_runs_cells_in_parallel_resumes_and_matches_the_basic_launcher(tmp_path, basic_sweep):
    # The basic sweep's response cache: its answers are replayed, so both launchers grade, train on
    # and evaluate the same answers.
    root = basic_sweep.parent
    parallel = tmp_path / "joblib"
    proc = sweep(root, parallel, "k=0,3", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", start_new_session=True)
    deadline = time.time() + 1200
    # Kill the worker running k=3 once its stream has begun, as a crashed or preempted job would.
    while not kill_worker_of(parallel / "k=3", proc.pid):
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read()[-3000:]
        time.sleep(0.2)
    proc.communicate(timeout=600)
    assert not (parallel / "k=3" / "metrics.json").exists()

    again = sweep(root, parallel, "k=0,3", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    out, _ = again.communicate(timeout=1200)
    assert again.returncode == 0, out[-3000:]

    got, want = cell_results(parallel), cell_results(basic_sweep)
    assert set(got) == set(want) == {"k=0", "k=3"}
    for cell in got:  # floats approximately: a worker process may sum in another thread order
        assert (got[cell]["accepted"], got[cell]["rejected"]) == (want[cell]["accepted"], want[cell]["rejected"])
        assert got[cell]["P"] == pytest.approx(want[cell]["P"], rel=1e-4)
        assert got[cell]["losses"] == pytest.approx(want[cell]["losses"], rel=1e-3)
