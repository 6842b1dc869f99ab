"""Fault injection, as a new user meets faults (API replies' faults: test_api_faults.py; a run killed
mid-write and redone: test_faults_interrupted.py).

Bad settings, damaged files, a missing API key, bad data and an unreachable or badly given PostgreSQL
server run `ms-run` as typed and must exit with status 2 in one line that names the key or file, before
any model loads; a bug keeps its traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from ms.common.errors import USER_ERROR_EXIT, report_user_errors
from ms.llm import BackendError, ResponseCache
from ms.llm.cache import CacheFileError
from ms.pool import Pool, PoolFileError

BIN = Path(sys.executable).parent
GARBAGE = b"this file was overwritten by something else entirely; it is no database\n" * 4


# ---- bad settings: exit 2, one line per violation naming the key, before any model loads ----------


def test_the_tables_bad_settings_exit_2_before_anything_opens_naming_each_key(tmp_path):
    """As typed, in a fresh process: all of them at once, each on its own line; neither the shared
    pool they name nor the cache (where the model is converted on first load) is ever created.
    How long this takes is measured in the closing note of issue 12, not asserted here."""
    shared = tmp_path / "shared" / "pool.sqlite"
    cache = tmp_path / "cache"
    done = subprocess.run(
        [
            str(BIN / "ms-run"),
            "k=-1",
            "micro_batch=0",
            "fills=[120]",
            "scorer.threshold=150",
            f"pool.path={shared}",
            f"cache_dir={cache}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == USER_ERROR_EXIT, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert sorted(lines) == sorted(
        f"ms-run: error: invalid setting {says}"
        for says in (
            "k=-1: must be at least 0",
            "micro_batch=0: must be at least 1",
            "fills=[120]: 120 must be at most 100",
            "scorer.threshold=150.0: must be at most 100",
        )
    )
    assert not shared.exists() and not cache.exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["k=-1"], "invalid setting k=-1: must be at least 0"),
        (["micro_batch=0"], "invalid setting micro_batch=0: must be at least 1"),
        (["fills=[20,120]"], "invalid setting fills=[20,120]: 120 must be at most 100"),
        (["fills=[60,40]"], "invalid setting fills=[60,40]: must be strictly increasing"),
        (["scorer.threshold=150"], "invalid setting scorer.threshold=150.0: must be at most 100"),
        (
            ["train.candidates=4", "train.labelled=6"],
            "invalid setting train.labelled=6: must be at most train.candidates",
        ),
        (["stream_k=-1"], "invalid setting stream_k=-1: must be at least 0"),
        (
            ["backbone=openai-compatible", "backbone.max_retries=-1"],  # an API backbone's (ms.llm.settings)
            "invalid setting backbone.max_retries=-1: must be at least 0",
        ),
        (["memory=stm_ltm", "memory.stm_ltm.threshold=1.5"], "invalid setting memory.stm_ltm.threshold=1.5: must be"),
        (["data.agents=[pun,limerik]"], "invalid setting data.agents: unknown agent(s) limerik"),
    ],
)
def test_a_bad_setting_exits_2_in_one_line_naming_the_key(ms_run, args, says):
    code, lines = ms_run(*args)
    assert code == USER_ERROR_EXIT
    assert len(lines) == 1 and lines[0].startswith(f"ms-run: error: {says}"), lines


def test_a_misspelt_key_exits_2(ms_run):
    code, lines = ms_run("retriever.nam=bm25")
    assert code == USER_ERROR_EXIT and any("retriever.nam" in line for line in lines)


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no file can be created in. Root ignores permission bits, so for root it is a
    read-only tmpfs; where that cannot be mounted, the test is skipped."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"running as root and cannot mount a read-only folder: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_pool_path_in_a_read_only_folder_names_the_path_and_the_key(ms_run, read_only_folder):
    pool = read_only_folder / "pool.sqlite"
    code, lines = ms_run(f"pool.path={pool}")
    assert code == USER_ERROR_EXIT
    assert lines == [
        f"ms-run: error: invalid setting pool.path={pool}: the folder {read_only_folder} is not "
        f"writable; point pool.path at a writable folder"
    ]
    # Opened directly (not through ms-run), the pool says the same about its path.
    with pytest.raises(PoolFileError, match=f"cannot open the pool {pool}"):
        Pool(pool)


# ---- damaged files: named with their path, and what deleting them means --------------------------


def test_a_damaged_pool_is_named_with_what_it_means(ms_run, tmp_path):
    shared = tmp_path / "pool.sqlite"
    shared.write_bytes(GARBAGE)
    code, lines = ms_run(f"pool.path={shared}")
    assert code == USER_ERROR_EXIT
    [line] = lines
    assert f"the pool {shared} is damaged" in line and "cannot be resumed or redone" in line
    assert shared.read_bytes() == GARBAGE  # left as it was, for whoever restores it


def test_a_damaged_response_cache_is_named_and_safe_to_delete(ms_run, tmp_path):
    cache = tmp_path / "cache" / "responses.sqlite"
    cache.parent.mkdir()
    cache.write_bytes(GARBAGE)
    code, lines = ms_run()
    assert code == USER_ERROR_EXIT
    [line] = lines
    assert f"the response cache {cache} is damaged" in line and "Deleting it is safe" in line
    with pytest.raises(CacheFileError, match="Deleting it is safe"):  # and when opened directly
        ResponseCache(cache)


def test_damage_past_the_header_is_named_when_the_pool_opens(tmp_path):
    path = tmp_path / "pool.sqlite"
    with Pool(path) as pool:
        pool.add(
            [{"scope": "logic", "agent": "pun", "domain": "logic", "question": "q", "answer": "a", "origin": "seed"}],
            step=0,
        )
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # keep SQLite's 100-byte header, wreck the schema page
    path.write_bytes(bytes(data))
    with pytest.raises(PoolFileError, match=f"the pool {path} is damaged"):
        Pool(path)


# ---- errors: user errors in one line, bugs with their traceback ---------------------------------


def test_a_missing_api_key_is_one_line_writes_nothing_and_debug_shows_its_traceback(ms_run, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    code, lines = ms_run("backbone=gpt-4o")
    assert code == USER_ERROR_EXIT
    assert lines == [
        "ms-run: error: openai backbone needs an API key: set the environment variable "
        "OPENAI_API_KEY (or point backbone.api_key_env at the variable that holds it)"
    ]
    assert list(tmp_path.iterdir()) == []  # no run folder, so no pool.sqlite or run_id in it, and no cache
    code, lines = ms_run("agents.pun.backbone=gpt-4o")  # a role's own backbone needs its key as much
    assert code == USER_ERROR_EXIT and lines == [
        f"ms-run: error: invalid setting agents.pun.backbone=gpt-4o: {lines[0].split('gpt-4o: ', 1)[1]}"
    ]
    assert "OPENAI_API_KEY" in lines[0] and list(tmp_path.iterdir()) == []

    code, lines = ms_run("k=-1", "--debug")
    assert code == USER_ERROR_EXIT and lines[0].startswith("Traceback") and "k=-1" in lines[-1]
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    code, lines = ms_run("k=-1")
    assert code == USER_ERROR_EXIT and lines[0].startswith("Traceback")


def test_bad_data_names_file_and_line_and_exits_2(tmp_path, capsys, monkeypatch):
    from ms.cli.data import main as ms_data

    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")

    good = '{"id": "pun-1", "agent": "pun", "domain": "logic", "question": "q", "answer": "a"}'
    (tmp_path / "pun.jsonl").write_text(good + '\n{"id": oops}\n')
    assert ms_data(["validate", "--data-dir", str(tmp_path)]) == USER_ERROR_EXIT
    assert capsys.readouterr().err.startswith(f"ms-data: error: {tmp_path / 'pun.jsonl'}:2: malformed JSON")


def test_a_bug_keeps_its_traceback_while_a_user_error_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    with pytest.raises(ZeroDivisionError):
        report_user_errors("ms-test", lambda: 1 / 0)

    def bad_key():
        raise BackendError("openai request to http://127.0.0.1:9 failed: refused")

    assert report_user_errors("ms-test", bad_key) == USER_ERROR_EXIT
    assert capsys.readouterr().err == "ms-test: error: openai request to http://127.0.0.1:9 failed: refused\n"


# ---- the pool's PostgreSQL server: unreachable at the start, or given with a password --------------


def test_a_refused_connection_at_start_is_one_line_within_15_s_and_no_run_file_holds_the_dsn(
    ms_run, tmp_path, monkeypatch
):
    from conftest import free_port

    from ms.config.schema import POOL_DSN_ENV

    monkeypatch.delenv(POOL_DSN_ENV, raising=False)  # ms-run sets it; restored after the test
    port = free_port()  # nothing listens there
    dsn = f"host=127.0.0.1 port={port} dbname=nowhere user=ms connect_timeout=30"
    started = time.monotonic()
    code, lines = ms_run("pool/backend=postgres", f"pool.dsn={dsn}")
    assert code == USER_ERROR_EXIT and time.monotonic() - started < 15
    assert lines == [
        f"ms-run: error: the pool's PostgreSQL server at host 127.0.0.1, port {port}, database nowhere "
        f'failed (connection failed: connection to server at "127.0.0.1", port {port} failed: Connection '
        f"refused Is the server running on that host and accepting TCP/IP connections?): start it or "
        f"correct pool.dsn"
    ]
    assert not (tmp_path / "run").exists()  # found before Hydra made the run's folder


def test_a_dsn_holding_a_password_is_refused_in_one_line_that_does_not_show_it(ms_run, tmp_path, monkeypatch):
    from ms.config.schema import POOL_DSN_ENV

    monkeypatch.delenv(POOL_DSN_ENV, raising=False)
    code, lines = ms_run("pool/backend=postgres", "pool.dsn=postgresql://ms:hunter2@127.0.0.1:5/db")
    assert code == USER_ERROR_EXIT
    assert lines == [
        "ms-run: error: invalid setting pool.dsn: it holds a password, which would be written into the "
        "run's files; give the password in the environment (PGPASSWORD) or in libpq's password file "
        "(~/.pgpass) instead"
    ]
    assert not [p for p in (tmp_path / "run").rglob("*") if p.is_file() and "hunter2" in p.read_text()]
    monkeypatch.delenv(POOL_DSN_ENV)  # where the first call put it
    code, lines = ms_run("pool/backend=postgres")
    assert code == USER_ERROR_EXIT and lines[0].startswith(
        "ms-run: error: invalid setting pool.dsn=None: pool/backend=postgres needs a connection string"
    )
