"""README.md's runnable commands run as written. A code block that follows a `readme-test` marker
(an HTML comment on the line before its fence) holds commands that need no placeholder, API key,
model hub or ../shared and finish in under a minute; each of its lines runs verbatim in bash, in a
copy of the checkout, so nothing lands in the checkout itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

MARKER = "<!-- readme-test"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"[^\n]*-->\n```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What a run of ms leaves behind that the copy never needs, and what the commands may write: a
# report goes under outputs/report/ (ms-report's default), nothing else.
NOT_COPIED = (".git", ".venv", "outputs", "multirun", ".cache", "__pycache__", ".pytest_cache",
              ".import_linter_cache", "*.egg-info")
MAY_WRITE = ("outputs/report/",)


def marked_commands(text: str) -> list[str]:
    """Every line of every marked bash block, in README order."""
    return [line.strip() for block in BLOCK.findall(text) for line in block.splitlines() if line.strip()]


COMMANDS = marked_commands((REPO / "README.md").read_text(encoding="utf-8"))


def test_the_readme_marks_the_commands_a_newcomer_runs_first():
    programs = {" ".join(c.split()[:2]) for c in COMMANDS}
    assert {"ms-run --help", "ms-run --cfg", "ms-data validate", "ms-data stats", "ms-report results/figure4_offline/runs"
            } <= programs, COMMANDS
    assert any("+plan=true" in c for c in COMMANDS)
    assert marked_commands(f"{MARKER} -->\n```bash\na\n\nb  # c\n```\n```bash\nnot marked\n```\n") == ["a", "b  # c"]


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("readme") / "ms"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return copy


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c.split("#")[0].split()))
def test_a_marked_readme_command_runs_as_written(checkout_copy, command):
    before = files_under(checkout_copy)
    # The copy's own ms (PYTHONPATH) through the venv's entry points (PATH), offline as `make` runs it.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(checkout_copy),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", command], cwd=checkout_copy, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    written = sorted(p for p in files_under(checkout_copy) - before if not p.startswith(MAY_WRITE))
    assert written == [], (command, written)
