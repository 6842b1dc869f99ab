"""Sweeps as users start them: `python -m ms -m ...` on the real default model, `ms-report` on
the result, and resuming an interrupted sweep."""

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
    max_new_tokens: 16
"""


def sweep(tmp_path: Path, sweep_dir: Path, *params: str, **popen) -> subprocess.Popen:
    """A real multirun of a tiny experiment, which a search-path folder adds to conf/experiment/."""
    extra = tmp_path / "conf"
    (extra / "experiment").mkdir(parents=True, exist_ok=True)
    (extra / "experiment" / "tiny.yaml").write_text(TINY_EXPERIMENT)
    cmd = [sys.executable, "-m", "ms", "-m", f"--config-dir={extra}", "experiment=tiny",
           f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={sweep_dir}", *params]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **popen)


@pytest.mark.slow
def test_two_cell_sweep_and_report(tmp_path):
    sweep_dir = tmp_path / "multirun"
    proc = sweep(tmp_path, sweep_dir, "k=0,3")
    out, _ = proc.communicate(timeout=1200)
    assert proc.returncode == 0, out[-3000:]
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
    sweep_dir = tmp_path / "multirun"
    proc = sweep(tmp_path, sweep_dir, "k=1,2", start_new_session=True)
    first = sweep_dir / "k=1" / "metrics.json"
    second = sweep_dir / "k=2"
    deadline = time.time() + 1200
    # Kill the sweep once the first cell is complete and the second has started its stream.
    while time.time() < deadline and not (first.exists() and (second / "decisions.jsonl").exists()):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.exists() and not (second / "metrics.json").exists()
    finished_at = first.stat().st_mtime_ns

    again = sweep(tmp_path, sweep_dir, "k=1,2")
    out, _ = again.communicate(timeout=1200)
    assert again.returncode == 0, out[-3000:]
    assert first.stat().st_mtime_ns == finished_at  # the complete cell was skipped
    assert "already holds a complete run" in out
    metrics = json.loads((second / "metrics.json").read_text())
    assert metrics["complete"] is True
    decisions = (second / "decisions.jsonl").read_text().splitlines()
    assert len(decisions) == 2  # the redo started from an empty stream, not on top of the killed one
