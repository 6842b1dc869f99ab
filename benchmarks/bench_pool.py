"""The pool that benchmarks/retrieval.py measures on, per backend (--backend sqlite|postgres), and the
one measurement that needs a second process: how long a reader's snapshot takes to catch up after
another process's write.

PostgreSQL: each size gets a fresh database on the server --dsn (or MS_POOL_DSN) names, dropped
afterwards, so its user needs CREATEDB; with neither, retrieval.py starts a throwaway server on
127.0.0.1 for the whole benchmark (ms.pool.local_server, as an unprivileged user, default durability
settings: synchronous commits, fsync on) and removes it at the end.

    python benchmarks/bench_pool.py --writer BACKEND TARGET SCOPE BATCH   (the other process; internal)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from timing import REPO, percentile

BACKENDS = ("sqlite", "postgres")


def given_dsn(args) -> str | None:
    return args.dsn or os.environ.get("MS_POOL_DSN") or None


@contextmanager
def throwaway_server() -> Iterator[str]:
    """A local server for the benchmark's run; yields a DSN of its maintenance database."""
    from ms.pool.local_server import create, passfile

    cluster = create(Path(tempfile.mkdtemp(prefix="ms-bench-pg-", dir="/tmp")))
    try:
        cluster.start()
        yield cluster.dsn("postgres", passfile(cluster))
    finally:
        cluster.remove()


def server_settings(dsn: str) -> dict:
    """What makes a commit cost what it costs on this server, for the JSON record."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        return {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("server_version", "synchronous_commit", "fsync", "shared_buffers")
        }


@contextmanager
def bench_target(backend: str, dsn: str | None, folder: str, size: int) -> Iterator[str]:
    """Where one size's pool is: a new SQLite file, or a new database on the server (dropped after)."""
    if backend == "sqlite":
        yield str(Path(folder) / "pool.sqlite")
        return
    import psycopg

    name = f"ms_bench_{size}_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield psycopg.conninfo.make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def open_pool(backend: str, target: str):
    from ms.pool import Pool

    if backend == "postgres":
        from ms.pool.postgres_backend import PostgresDatabase

        return Pool(PostgresDatabase(target))
    return Pool(target)


def catch_up(backend: str, target: str, dense, scope: str, batch: int, repeats: int) -> dict:
    """Another process adds `batch` memories (one transaction) and says so; then this process's
    DenseRetriever.index(scope), as the next search runs it, is timed: the change token read, the
    new rows read, the snapshot extended and their (synthetic) vectors made. Also timed: the same
    call when nothing changed, which every search between writes pays (one change-token read)."""
    writer = subprocess.Popen(
        [sys.executable, __file__, "--writer", backend, target, scope, str(batch)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
    )
    caught, idle, before = [], [], len(dense.index(scope).snapshot)
    try:
        for _ in range(repeats):
            writer.stdin.write("add\n")
            writer.stdin.flush()
            if writer.stdout.readline().strip() != "added":  # committed: the next read must see it
                raise RuntimeError(f"the writer process failed (exit status {writer.poll()})")
            start = time.perf_counter()
            index = dense.index(scope)
            caught.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            dense.index(scope)
            idle.append((time.perf_counter() - start) * 1000)
        seen = len(index.snapshot) - before
    finally:
        writer.stdin.close()
        writer.wait(timeout=60)
    if seen != repeats * batch:  # a catch-up that missed rows would be timed doing less work
        raise RuntimeError(f"the snapshot took in {seen} of the {repeats * batch} memories the other process added")
    return {
        "catchup_batch": batch,
        "catchup_repeats": repeats,
        "catchup_p50_ms": round(percentile(caught, 50), 3),
        "catchup_p99_ms": round(percentile(caught, 99), 3),
        "unchanged_sync_p50_ms": round(percentile(idle, 50), 4),
        "unchanged_sync_p99_ms": round(percentile(idle, 99), 4),
    }


def writer_process(backend: str, target: str, scope: str, batch: int) -> None:
    """The other process: one transaction of `batch` new memories per line read, then `added`."""
    with open_pool(backend, target) as pool:
        for n, _ in enumerate(sys.stdin):
            pool.add(
                [
                    {
                        "scope": scope,
                        "agent": "writer",
                        "domain": "bench",
                        "question": f"catch-up {n}.{i}",
                        "answer": f"written by process {os.getpid()}",
                        "origin": "stream",
                    }
                    for i in range(batch)
                ],
                step=n,
            )
            print("added", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--writer"]:
    writer_process(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
