"""Fault injection: a run killed or cut off mid-write, then redone (the faults a user meets as one line
of ms-run: test_faults_user_errors.py).

The interrupted run on a shared pool runs the pipeline's own redo step on a real pool file; the slow
test kills a real run; on both pool backends a writer is killed mid-batch, and the PostgreSQL server
stops under a running writer.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, compose_config
from test_faults_user_errors import BIN

from ms.common.errors import USER_ERROR_EXIT

# ---- shared pool: a redone run first removes what its killed attempt admitted -------------------


def stream_items(agent: str, tag: str, n: int) -> list[dict]:
    return [
        {
            "scope": "logic",
            "agent": agent,
            "domain": "logic",
            "question": f"{tag} question {i}",
            "answer": f"{tag} answer {i}",
            "origin": "stream",
            "score": 60,
        }
        for i in range(n)
    ]


SEEDS = [
    {
        "scope": "logic",
        "agent": "pun",
        "domain": "logic",
        "question": f"seed {i}",
        "answer": f"seed answer {i}",
        "origin": "seed",
    }
    for i in range(4)
]


def test_a_redo_on_a_shared_pool_leaves_exactly_one_runs_worth(tmp_path, caplog):
    from ms.loop.run_folder import RUN_ID_FILE, open_run_pool

    shared = tmp_path / "shared.sqlite"
    cfg = compose_config([f"pool.path={shared}"])
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir(), run_b.mkdir()

    killed = open_run_pool(cfg.pool, run_a)  # A seeds first, so it owns the seeds, then is killed mid-stream
    killed.add(SEEDS, step=0)
    killed.add(stream_items("pun", "A", 3), step=1)
    killed.close()
    with open_run_pool(cfg.pool, run_b) as b:  # B shares the pool and completes
        assert b.add(SEEDS, step=0) == [None] * 4
        b.add(stream_items("riddle", "B", 2), step=1)
    run_id = (run_a / RUN_ID_FILE).read_text().strip()

    with caplog.at_level(logging.INFO, logger="ms.loop.run_folder"):
        redo = open_run_pool(cfg.pool, run_a)
    assert redo.run_id == run_id
    assert any(f"redoing interrupted run {run_id}: removed the 3 memories" in r.message for r in caplog.records)
    redo.add(SEEDS, step=0)
    redo.add(stream_items("pun", "A", 3), step=1)
    by_run = {(run, origin): n for (run, origin), n in redo.tally(("run_id", "origin")).items()}
    b_id = (run_b / RUN_ID_FILE).read_text().strip()
    assert by_run == {(run_id, "seed"): 4, (run_id, "stream"): 3, (b_id, "stream"): 2}
    assert redo.runs() == {run_id: str(run_a), b_id: str(run_b)}
    redo.close()


# ---- the same, end to end: a real run killed mid-stream, then redone (slow) ----------------------

TINY = [
    "data.agents=[riddle,pun]",
    "data.max_seed=4",
    "data.max_stream=2",
    "data.max_test=1",
    "fills=[100]",
    "micro_batch=2",
    "train.candidates=2",
    "train.labelled=2",
    "backbone.generation.max_new_tokens=8",
    "scorer.threshold=0",
    "eval.metrics=[ref_logprob]",
]


def contents(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT scope, origin, question, answer FROM memories"))


def stream_added_at(path: Path) -> list[float]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT added_at FROM memories WHERE origin = 'stream'")]


@pytest.mark.slow
def test_a_killed_run_on_a_shared_pool_redone_matches_a_clean_run(tmp_path, ms_run, caplog):
    """Only the killed attempt is a process of its own (it takes the SIGKILL); the clean run and the
    redo run in this one, on the same response cache (ms_run's cache_dir), so all three see the
    same answers."""
    from ms.loop.pipeline import run

    cache = f"cache_dir={tmp_path / 'cache'}"
    run(compose_config([*TINY, cache, f"pool.path={tmp_path / 'clean.sqlite'}"]), tmp_path / "clean")

    shared = tmp_path / "shared.sqlite"
    killed_dir = tmp_path / "run"  # where ms_run runs the redo
    command = [str(BIN / "ms-run"), *TINY, cache, f"pool.path={shared}", f"hydra.run.dir={killed_dir}"]
    killed = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 1200
    while not (killed_dir / "decisions.jsonl").exists():  # its first stream batch is admitted
        assert killed.poll() is None and time.time() < deadline, killed.stdout.read()[-3000:]
        time.sleep(0.2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert not (killed_dir / "metrics.json").exists()
    assert stream_added_at(shared), "the killed attempt admitted nothing, so there is nothing to clean"

    redo_started = time.time()
    with caplog.at_level(logging.INFO, logger="ms.loop.run_folder"):
        code, err = ms_run(*TINY, f"pool.path={shared}")
    assert code == 0, err[-20:]
    assert "redoing interrupted run" in caplog.text
    assert contents(shared) == contents(tmp_path / "clean.sqlite")
    # The redo admitted every stream memory itself: had the killed attempt's stayed, re-admitting the
    # same pairs would have been a no-op and left them with their earlier times.
    assert min(stream_added_at(shared)) >= redo_started


# ---- the hard cases on both pool backends: a writer killed mid-batch, a server that goes away --------

WRITER = Path(__file__).with_name("pool_writer.py")
BATCHES, BATCH = 40, 500


def start_writer(where, run_dir: Path, batches: int = BATCHES) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), where.backend, where.target, str(run_dir), str(batches), str(BATCH)],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_commits(writer: subprocess.Popen, n: int) -> None:
    for _ in range(n):
        line = writer.stdout.readline()
        if not line.startswith("batch"):
            writer.wait(timeout=60)
            pytest.fail(f"the writer stopped before its batch committed: {writer.stderr.read()[-2000:]}")


def stream_counts(where) -> tuple[int, list[int]]:
    """How many memories, and how many of each batch: a batch is all there or not at all."""
    with where.open() as pool:
        memories = pool.memories("logic")
    per_batch: dict[int, int] = {}
    for m in memories:
        batch = int(m.question.split()[1])
        per_batch[batch] = per_batch.get(batch, 0) + 1
    return len(memories), sorted(per_batch.values())


def redo_leaves_one_runs_worth(where, run_dir: Path) -> None:
    redo = start_writer(where, run_dir)
    out, err = redo.communicate(timeout=300)
    assert redo.returncode == 0, err[-2000:]
    total, batches = stream_counts(where)
    assert (total, batches) == (BATCHES * BATCH, [BATCH] * BATCHES)
    with where.open() as pool:
        assert list(pool.tally(["run_id"]).values()) == [BATCHES * BATCH]  # all the redo's own


def test_a_writer_killed_mid_batch_then_redone_leaves_exactly_one_runs_worth(where, tmp_path):
    writer = start_writer(where, tmp_path / "run")
    wait_for_commits(writer, 2)
    time.sleep(0.05)  # into the next batch's transaction
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=60)
    total, batches = stream_counts(where)
    assert 0 < total < BATCHES * BATCH and set(batches) == {BATCH}  # whole batches only
    redo_leaves_one_runs_worth(where, tmp_path / "run")


def test_the_server_stopped_mid_run_is_one_line_naming_it_and_the_rerun_resumes(
    postgres_cluster, postgres_dsn, tmp_path
):
    from pool_backends import PASSWORD, Where

    where = Where("postgres", postgres_dsn)
    writer = start_writer(where, tmp_path / "run", batches=10**6)  # runs until the server stops
    wait_for_commits(writer, 2)
    postgres_cluster.stop()
    try:
        stopped = time.monotonic()
        _, err = writer.communicate(timeout=60)
        waited = time.monotonic() - stopped
    finally:
        postgres_cluster.start()
    assert writer.returncode == USER_ERROR_EXIT and waited < 15
    assert len(err.splitlines()) == 1, err
    [line] = err.splitlines()
    print(line)  # the message, for the record (pytest -s)
    database = postgres_dsn.split("dbname=")[1]
    assert line.startswith(
        f"pool-writer: error: the pool's PostgreSQL server at host 127.0.0.1, port "
        f"{postgres_cluster.port}, database {database} failed ("
    )
    assert PASSWORD not in err
    total, batches = stream_counts(where)
    assert total > 0 and set(batches) == {BATCH}  # nothing half-written
    redo_leaves_one_runs_worth(where, tmp_path / "run")
