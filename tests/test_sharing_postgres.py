"""Runs that share one pool on PostgreSQL (experiment=sharing_postgres: one `ms-run` process per group
of agents): ms-report reads who wrote each memory, and in which run, from the server, and the sharing
matrix counts the retrievals of memories that another run admitted. Two runs here write the pool
through their own connections, as ms-run does (ms.loop.run_folder.open_run_pool), and retrieve with BM25
through them, so each finds the other's memories only through the server."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from ms.config.schema import POOL_DSN_ENV
from ms.loop.run_folder import open_run_pool
from ms.report.cli import main as report_main
from ms.report.common.writers import WRITERS_FILE, read_writers
from ms.report.sharing.matrices import FOLDER
from ms.retrieval.bm25 import BM25Retriever

REPO = Path(__file__).resolve().parent.parent
K = 2
# Each run: its agent, that agent's domain, what it writes, and its test questions. The questions ask
# about the other run's topics too, so BM25 finds memories of both runs.
RUNS = {
    "agents=sonnet": (
        "sonnet",
        "literary",
        ["a sonnet about the sea", "a sonnet about the moon"],
        ["a sonnet about the sea and a pun", "the moon and the cat"],
    ),
    "agents=pun": (
        "pun",
        "logic",
        ["a pun about a cat", "a pun about the moon"],
        ["a pun about the sea", "a pun about a cat and the moon"],
    ),
}


def write_run(folder: Path, agent: str, domain: str, texts: list[str], dsn: str):
    """A run folder as ms-run leaves one, its memories admitted to the shared pool; returns its open pool."""
    (folder / ".hydra").mkdir(parents=True)
    # As Hydra saves it: the DSN is only the reference to the environment variable.
    pool_config = {"mode": "single", "backend": "postgres", "dsn": "${oc.env:" + POOL_DSN_ENV + ",null}", "path": None}
    (folder / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump(
            {"backbone": {"name": "smollm2"}, "k": K, "pool": pool_config, "data": {"dir": "data", "agents": [agent]}}
        )
    )
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"data.agents=[{agent}]"]))
    pool = open_run_pool(OmegaConf.create({**pool_config, "dsn": dsn}), folder)
    pool.add(
        [
            {
                "scope": "single",
                "agent": agent,
                "domain": domain,
                "question": f"Write {t}.",
                "answer": f"Here is {t}.",
                "origin": "stream",
                "backbone": "smollm2",
            }
            for t in texts
        ],
        step=1,
    )
    return pool


def finish_run(folder: Path, agent: str, questions: list[str], pool) -> dict[str, list[int]]:
    """Retrieve k memories per test question through the run's own connection; write its results."""
    bm25 = BM25Retriever(pool)
    retrieved = {f"{agent}-{i}": [m.id for m in bm25.retrieve(q, "single", K)] for i, q in enumerate(questions)}
    rows = [
        {
            "agent": agent,
            "test_id": t,
            "k": K,
            "fill": 100,
            "question": q,
            "reference": "ref",
            "ref_logprob": -1.0,
            "retrieved": ids,
        }
        for (t, ids), q in zip(retrieved.items(), questions)
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "complete": True,
                "fills": {
                    "100": {
                        "overall": {"ref_logprob": -1.0, "n": 2},
                        "per_agent": {agent: {"ref_logprob": -1.0, "n": 2}},
                    }
                },
                "run": {
                    "backbone": "smollm2",
                    "k": K,
                    "pool": "single",
                    "retriever": "bm25",
                    "learned": False,
                    "agents": [agent],
                    "fills": [100],
                    "seed": 0,
                },
            }
        )
    )
    return retrieved


@pytest.fixture
def shared_sweep(tmp_path, postgres_dsn, monkeypatch) -> tuple[Path, dict[str, dict[str, list[int]]]]:
    """Two finished runs of one sweep that wrote one Single pool on the server; run -> question -> ids."""
    monkeypatch.setenv(POOL_DSN_ENV, postgres_dsn)
    root = tmp_path / "multirun" / "shared"
    pools = {
        name: write_run(root / name, agent, domain, texts, postgres_dsn)
        for name, (agent, domain, texts, _) in RUNS.items()
    }
    retrieved = {}
    for name, (agent, _, _, questions) in RUNS.items():  # after both runs wrote: each sees the other's memories
        retrieved[name] = finish_run(root / name, agent, questions, pools[name])
        pools[name].close()
    return root, retrieved


def matrix(out: Path, run: str) -> dict[tuple[str, str], dict[str, str]]:
    with (out / FOLDER / f"{run}.csv").open(newline="") as f:
        return {(r.pop("quantity"), r.pop("agent")): r for r in csv.DictReader(f)}


def test_the_report_reads_the_writers_and_their_runs_from_the_server(shared_sweep, tmp_path, postgres_dsn):
    root, retrieved = shared_sweep
    writers = read_writers(root / "agents=sonnet")
    run_ids = {name: (root / name / "run_id").read_text().strip() for name in RUNS}
    assert {(w.agent, w.run_id, w.run) for w in writers.values()} == {
        ("sonnet", run_ids["agents=sonnet"], "agents=sonnet"),
        ("pun", run_ids["agents=pun"], "agents=pun"),
    }

    out = tmp_path / "report"
    assert report_main([str(root), "--out", str(out), "--metric", "ref_logprob"]) == 0
    for name, (agent, *_) in RUNS.items():
        ids = [i for found in retrieved[name].values() for i in found]
        other = sum(writers[i].run != name for i in ids)
        assert 0 < other < len(ids)  # BM25 found memories of both runs: the test means something
        m = matrix(out, name)
        assert m["retrievals", agent]["run=another run"] == str(other)
        assert m["retrievals", agent]["run=this run"] == str(len(ids) - other)
        assert m["retrievals", agent]["all"] == str(len(ids))
    text = (out / FOLDER / "sharing.md").read_text()
    assert "another run" in text and "`agents=pun`" in text and "`agents=sonnet`" in text
    for path in out.rglob("*"):  # the server's connection string stays out of every output
        if path.is_file() and path.suffix in (".md", ".csv", ".tex"):
            assert postgres_dsn not in path.read_text() and "dbname=" not in path.read_text(), path


def test_an_unreachable_or_unnamed_server_is_one_line(shared_sweep, tmp_path, capsys, monkeypatch):
    from conftest import free_port

    root, _ = shared_sweep
    port = free_port()  # nothing listens there
    monkeypatch.setenv(POOL_DSN_ENV, f"host=127.0.0.1 port={port} user=ms dbname=gone")
    capsys.readouterr()
    assert report_main([str(root), "--out", str(tmp_path / "report"), "--metric", "ref_logprob"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ms-report: error: cannot read the pool of ") and f"port {port}, database gone (" in line

    monkeypatch.delenv(POOL_DSN_ENV)
    assert report_main([str(root), "--out", str(tmp_path / "report"), "--metric", "ref_logprob"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "kept its pool on PostgreSQL" in line and f"set {POOL_DSN_ENV}" in line


@pytest.mark.skipif(shutil.which("bash") is None, reason="publish.sh is a bash script")
def test_a_published_copy_redraws_the_cross_run_matrix_without_the_server(shared_sweep, tmp_path, monkeypatch):
    root, _ = shared_sweep
    live = tmp_path / "live"
    assert report_main([str(root), "--out", str(live), "--metric", "ref_logprob"]) == 0
    work = root.parent.parent  # publish.sh reads multirun/<sweep> under the current folder
    env = {**os.environ, "MS_REPORT": str(Path(sys.executable).with_name("ms-report")), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO / "experiments" / "publish.sh"), "shared", "--metric", "ref_logprob"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    published = work / "results" / "shared"
    monkeypatch.delenv(POOL_DSN_ENV)  # the copy's memories.csv and run_id are all it needs
    for name in RUNS:
        with (published / "runs" / name / WRITERS_FILE).open(newline="") as f:
            assert {r["run"] for r in csv.DictReader(f)} == set(RUNS)
        assert (published / "runs" / name / "run_id").exists()
    again = tmp_path / "again"
    assert report_main([str(published / "runs"), "--out", str(again), "--metric", "ref_logprob"]) == 0
    for name in RUNS:
        assert matrix(again, name) == matrix(live, name)
