"""The installable plugin of docs/extending.md, as a person would make and use it: its files written from
the page into a temporary folder, the package installed by pip into a folder of its own (--target), and
the page's commands run as written, each in a process of its own with that folder on PYTHONPATH: Hydra
looks for its plugins, ms's among them, once per process, so an in-process call would see nothing new."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PAGE = REPO / "docs" / "extending.md"
BIN = Path(sys.executable).parent
PIP = f"{shlex.quote(sys.executable)} -m pip install --no-deps --no-build-isolation --target"


def page_files(text: str) -> dict[str, str]:
    """Each code block whose first line is a comment naming a file of the plugin (`# toy-parts/...`): the
    file's path, and the block as its text."""
    files = {}
    for block in re.findall(r"^```\w+\n(.*?)^```", text, re.S | re.M):
        named = re.match(r"# (toy-parts/[\w./-]+)", block)
        if named:
            files[named.group(1)] = block
    return files


def page_commands(text: str) -> list[list[str]]:
    """The lines of each bash block after a comment `<!-- plugin-test: ... -->`, block by block."""
    blocks = re.findall(r"^<!-- plugin-test:[^\n]*-->\n```bash\n(.*?)^```", text, re.S | re.M)
    return [block.splitlines() for block in blocks]


def run(line: str, where: Path, target: Path) -> subprocess.CompletedProcess:
    """One line of the page in bash, in `where`, with .venv's commands first on PATH and the plugin's folder
    on PYTHONPATH."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(target),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(["bash", "-c", line], cwd=where, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, list[str]]:
    """(the folder pip installed the page's plugin into, the page's commands to run in the checkout)."""
    text = PAGE.read_text(encoding="utf-8")
    work, target = tmp_path_factory.mktemp("work"), tmp_path_factory.mktemp("site")
    files = page_files(text)
    assert {"toy-parts/pyproject.toml", "toy-parts/toy_parts/gate.py", "toy-parts/toy_parts/conf/gate/toy.yaml"} <= set(
        files
    )
    for path, body in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(body, encoding="utf-8")
    [[install], commands] = page_commands(text)
    assert install == "pip install ./toy-parts", install
    done = run(install.replace("pip install", f"{PIP} {shlex.quote(str(target))}", 1), work, target)
    assert done.returncode == 0, done.stderr[-3000:]
    return target, commands


def page_command(installed, starts: str) -> tuple[str, subprocess.CompletedProcess]:
    target, commands = installed
    [line] = [c for c in commands if c.startswith(starts)]
    done = run(line, REPO, target)
    assert done.returncode == 0, (line, done.stderr[-3000:])
    return line, done


def test_pip_installs_the_page_s_plugin_with_its_config_file_and_entry_points(installed):
    target, _ = installed
    assert (target / "toy_parts" / "conf" / "gate" / "toy.yaml").is_file()
    [dist] = target.glob("toy_parts-0.1.0.dist-info")
    points = (dist / "entry_points.txt").read_text()
    for group in ("ms.gate", "ms.gate_settings", "ms.conf"):
        assert f"[{group}]" in points, group


def test_plan_mode_composes_and_plans_the_installed_gate_with_no_config_dir(installed):
    line, done = page_command(installed, "ms-run experiment=quick gate=toy")
    assert "+plan=true" in line and "--config-dir" not in line
    assert "0.33 of stream pairs admitted, as the toy gate assumes" in done.stdout, done.stdout[-2000:]


def test_help_lists_the_installed_gate_and_its_setting(installed):
    _, done = page_command(installed, "ms-run gate=toy --help")
    [options] = re.findall(r"^gate: (.+)$", done.stdout, re.M)
    assert "toy" in options.split(", ") and "rubric" in options.split(", "), options
    assert re.search(r"^gate:\n  name: toy\n  ratio: 3\.0$", done.stdout, re.M), done.stdout[-3000:]


def test_the_reference_lists_the_installed_option_and_its_settings(installed):
    _, done = page_command(installed, "python -m ms.config.reference")
    assert "#### `gate=toy`" in done.stdout and "### `gate` under `gate=toy`" in done.stdout, done.stdout


@pytest.mark.slow
def test_a_tiny_run_of_the_installed_gate_and_its_report(installed, tmp_path):
    """The installed toy gate in a real run (one agent, a few questions, the packaged SmolLM2), then the
    report on its folder, each a process of its own as the commands above."""
    import json

    target, _ = installed
    settings = "gate=toy data.agents=[riddle] data.max_seed=4 data.max_stream=2 data.max_test=1 fills=[100]"
    settings += " backbone.generation.max_new_tokens=8"  # the toy gate gives every answer the same reason
    settings += f" retriever=bm25 eval.metrics=[ref_logprob] data.dir={REPO / 'data'} cache_dir={tmp_path / 'cache'}"
    done = run(f"ms-run {settings}", tmp_path, target)
    assert done.returncode == 0, done.stderr[-3000:]
    [folder] = (tmp_path / "outputs").iterdir()
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["run"]["gate"] == "toy" and metrics["complete"] is True
    assert metrics["run"]["scorer_read"] is None, "the toy gate grades nothing, so no grader read is recorded"
    decisions = [json.loads(line) for line in (folder / "decisions.jsonl").open()]
    assert decisions and all(d["reason"] == "toy: at most 3 words per question word" for d in decisions)
    done = run(f"ms-report {shlex.quote(str(folder))}", tmp_path, target)
    assert done.returncode == 0, done.stderr[-3000:]
