"""Converted models are made once per machine, not once per cache_dir: they live in one models
folder ($MS_MODELS_DIR, else the user's cache), and two processes that need one at the same moment
make it once between them (ms.llm.local.made_once)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from ms.llm.local import MODELS_ENV, made_once, models_dir

# Each process waits for the go file, then asks for the target; `make` logs a line and takes a
# second, long enough that the other process asks while it is being made.
NEED_IT = """
import sys, time
from pathlib import Path
from ms.llm.local import made_once

target, log, go = map(Path, sys.argv[1:])
def make(staging):
    with log.open("a") as f:
        f.write("made\\n")
    staging.mkdir()
    time.sleep(1.0)
    (staging / "config.json").write_text("{}")

while not go.exists():
    time.sleep(0.01)
print(sorted(p.name for p in made_once(target, make).iterdir()))
"""


def start(code: str, *args, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def test_two_processes_that_need_one_model_at_once_make_it_once(tmp_path):
    target, log, go = tmp_path / "models" / "m-1-2", tmp_path / "made.log", tmp_path / "go"
    procs = [start(NEED_IT, target, log, go) for _ in range(2)]
    time.sleep(1.5)  # both past their imports, waiting for the go file
    go.touch()
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == ["['config.json']"] * 2  # both read a whole copy
    assert log.read_text() == "made\n"  # made once between them
    assert sorted(p.name for p in target.parent.iterdir()) == [".m-1-2.lock", "m-1-2"]  # no staging left


def test_a_failed_make_leaves_no_copy_and_the_next_call_makes_it(tmp_path):
    def broken(staging: Path) -> None:
        staging.mkdir()
        (staging / "half").write_text("x")
        raise RuntimeError("killed mid-way")

    target = tmp_path / "m"
    with pytest.raises(RuntimeError):
        made_once(target, broken)
    assert not target.exists() and [p.name for p in tmp_path.iterdir()] == [".m.lock"]
    assert made_once(target, lambda staging: staging.write_text("whole")).read_text() == "whole"
    assert made_once(target, broken).read_text() == "whole"  # made: never made again


def test_the_models_folder_is_one_per_user_and_set_by_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(MODELS_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_dir() == tmp_path / "xdg" / "ms" / "models"
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "mine"))
    assert models_dir() == tmp_path / "mine"


BUILD = """
import sys
from ms.llm import build_lm
sys.path.insert(0, "tests")
from conftest import compose_config

lm = build_lm(compose_config().backbone, sys.argv[1], use_response_cache=False)
print(lm.generate(["Name a colour."], max_new_tokens=4)[0] != "")
"""


@pytest.mark.slow
def test_two_runs_with_their_own_cache_dirs_convert_the_packaged_model_once(tmp_path):
    """The real SmolLM2 GGUF, converted by two processes at once for two cache folders."""
    shared = tmp_path / "models"
    env = {MODELS_ENV: str(shared), "HF_HUB_OFFLINE": "1"}
    procs = [start(BUILD, tmp_path / f"cache{i}", env=env) for i in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    assert [out.strip() for out, _ in outputs] == ["True", "True"]
    copies = [p for p in shared.iterdir() if not p.name.startswith(".")]
    assert len(copies) == 1 and (copies[0] / "config.json").exists()  # one copy, and no staging left
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith(".")) == [f".{copies[0].name}.lock"]
    assert not any((tmp_path / f"cache{i}" / "models").exists() for i in range(2))


def test_a_reinstalled_file_maps_to_the_same_converted_copy(tmp_path):
    """A package reinstalled (a fresh clone's venv) writes the same weights with a new mtime: what
    ms converts from them must be found again, not made again beside the old copy."""
    from ms.llm.local import derived_name

    first, second, other = (tmp_path / d / "model.gguf" for d in ("venv1", "venv2", "venv3"))
    for path, data in ((first, b"weights"), (second, b"weights"), (other, b"other weights")):
        path.parent.mkdir()
        path.write_bytes(data)
    os.utime(second, (first.stat().st_mtime + 3600,) * 2)
    assert derived_name(first, ".q4_0.gguf") == derived_name(second, ".q4_0.gguf")
    assert derived_name(first).startswith("model-") and derived_name(first) != derived_name(other)
