"""The runnable commands of README.md and of the documentation site's pages (docs/) run as written. A
code block that follows a `readme-test` marker (an HTML comment on the line before its fence, which
neither GitHub nor the site shows) holds commands that need no placeholder, API key, model hub or
../shared and finish in under a minute; each of its lines runs verbatim in bash, in a copy of the
checkout, so nothing lands in the checkout itself. A command marked on several pages runs once."""

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
NOT_COPIED = (
    ".git",
    ".venv",
    "outputs",
    "multirun",
    ".cache",
    "__pycache__",
    ".pytest_cache",
    ".import_linter_cache",
    "*.egg-info",
)
MAY_WRITE = ("outputs/report/",)


def marked_commands(text: str) -> list[str]:
    """Every line of every marked bash block, in README order."""
    return [line.strip() for block in BLOCK.findall(text) for line in block.splitlines() if line.strip()]


README = marked_commands((REPO / "README.md").read_text(encoding="utf-8"))
PAGES = sorted((REPO / "docs").rglob("*.md"))


def unique(commands: list[str]) -> list[str]:
    """The commands in order, each once: two lines that differ only in their comment are one command."""
    seen: set[str] = set()
    kept = []
    for command in commands:
        key = " ".join(command.split("#")[0].split())
        if key not in seen:
            seen.add(key)
            kept.append(command)
    return kept


COMMANDS = unique(README + [c for page in PAGES for c in marked_commands(page.read_text(encoding="utf-8"))])


def test_the_readme_marks_the_commands_a_newcomer_runs_first():
    programs = {" ".join(c.split()[:2]) for c in README}
    assert {
        "ms-run --help",
        "ms-run --cfg",
        "ms-data validate",
        "ms-data stats",
        "ms-report results/figure4_offline/runs",
    } <= programs, README
    assert any("+plan=true" in c for c in README) and any("--html" in c for c in README)
    assert marked_commands(f"{MARKER} -->\n```bash\na\n\nb  # c\n```\n```bash\nnot marked\n```\n") == ["a", "b  # c"]


def test_the_documentation_marks_commands_of_its_own():
    """Each page that shows runnable commands has them tested too, beside the README's."""
    marked = {page.relative_to(REPO).as_posix() for page in PAGES if marked_commands(page.read_text(encoding="utf-8"))}
    assert {
        "docs/getting-started.md",
        "docs/concepts/agents.md",
        "docs/running/plan.md",
        "docs/reading/report.md",
    } <= marked, marked
    assert len(COMMANDS) > len(README)


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("readme") / "ms"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return copy


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c.split("#")[0].split()))
def test_a_marked_readme_command_runs_as_written(checkout_copy, command):
    before = files_under(checkout_copy)
    # The copy's own ms (PYTHONPATH) through the venv's entry points (PATH), offline as `make` runs it.
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(checkout_copy),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        ["bash", "-c", command], cwd=checkout_copy, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    written = sorted(p for p in files_under(checkout_copy) - before if not p.startswith(MAY_WRITE))
    assert written == [], (command, written)
