"""Resuming. The same command finds its run's folder again, named by its settings, and skips a finished
run. Every resume command ms-run prints can be pasted as printed: a real shell splits it into words, and
Hydra's own override parser reads back the folder it names, unchanged. A folder Hydra named after the
overrides holds '=', ',' and brackets, which the override grammar would otherwise read as syntax."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, ms_run_in_process
from omegaconf import OmegaConf

from ms.common.errors import USER_ERROR_EXIT, UserError

# A folder named by the clock and the overrides, as conf/config.yaml names one, and names a shell or
# Hydra's grammar would read otherwise: a space, quotes, backslashes, a dollar sign, an interpolation.
CLOCK = "/home/me/outputs/2026-01-01/18-05-09_data.agents=[sonnet,limerick],fills=[50,100],k=3"
FOLDERS = [CLOCK, '/tmp/a b/it\'s "here"', "/tmp/back\\slash\\", "/tmp/$HOME/`ls`;|&", "/tmp/${now:%H}/\\${x}"]
# A run's task overrides as Hydra was given them (each one valid in its grammar), a quoted one among them.
TASK = ["data.agents=[sonnet,limerick]", "fills=[50,100]", "k=3", "tag='say \"yes\", then stop'"]


def pasted(command: str) -> list[str]:
    """The words a shell hands `ms-run` when `command` is pasted as printed (ms-run being a function
    here that prints its arguments)."""
    done = subprocess.run(
        ["bash", "-c", "ms-run() { printf '%s\\0' \"$@\"; }\n" + command], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def read_back(words: list[str]) -> dict[str, str]:
    """Each override's key and the value a config would hold (Hydra's parser, then OmegaConf, which
    keeps an escaped interpolation as written); every word must parse."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create().parse_overrides(words)
    return {o.key_or_group: OmegaConf.create({"value": o.value()}).value for o in overrides}


def hint_words(hint: str) -> list[str]:
    """The folder setting a Ctrl-C hint asks to add to the same command, pasted after `ms-run`."""
    [setting] = re.findall(r"re-run the same command with (.+) to resume \(", hint)
    return pasted(f"ms-run {setting}")


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_failure_message_s_resume_command_gives_back_its_folder_and_overrides(folder):
    from ms.loop.run_folder import resume_command

    command = resume_command("ms-run", Path(folder), TASK, ["hydra.run.dir=old", "hydra/job_logging=none"])
    back = read_back(pasted(command))
    assert back.pop("hydra.run.dir") == folder
    assert back == {**read_back(TASK), "hydra/job_logging": "none"}


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_ctrl_c_hint_gives_back_its_folder(folder):
    from hydra.types import RunMode

    from ms.cli.run import resume_hint

    run = OmegaConf.create({"mode": RunMode.RUN, "run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"}})
    assert read_back(hint_words(resume_hint(run, Path(folder)))) == {"hydra.run.dir": folder}


def test_a_sweep_s_ctrl_c_hint_gives_back_its_folder():
    from hydra.core.utils import setup_globals
    from hydra.types import RunMode

    from ms.cli.run import resume_hint

    setup_globals()  # Hydra's resolvers: now
    sweep = OmegaConf.create(
        {"mode": RunMode.MULTIRUN, "sweep": {"dir": "multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}_data.agents=[a,b] x"}}
    )
    folder = sweep.sweep.dir
    assert read_back(hint_words(resume_hint(sweep, Path(folder) / "k=1"))) == {"hydra.sweep.dir": folder}


# ---- as ms-run prints them, in a folder named by the clock and the overrides ---------------------

ARGS = [
    "data.agents=[riddle,pun]",
    "data.max_seed=3",
    "data.max_stream=2",
    "data.max_test=1",
    "fills=[50,100]",
    "hydra/job_logging=none",
    "hydra/hydra_logging=none",
]


# A folder named by the clock, as a person may still ask for one (ms-run names a run's folder by its settings).
CLOCK_DIR = "hydra.run.dir=outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}_${hydra.job.override_dirname}"


@pytest.fixture
def clock_folder_run(tmp_path, monkeypatch, capsys):
    """ms-run ARGS in this process, from tmp_path, in a folder named by the clock, with its loop replaced by
    `loop`: (exit status, stderr's lines that start with "ms-run: ", the folder Hydra made under outputs/)."""
    import ms.loop.pipeline

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")

    def call(loop) -> tuple[int, list[str], Path]:
        monkeypatch.setattr(ms.loop.pipeline, "run", loop)
        try:
            code, err = ms_run_in_process(
                monkeypatch,
                capsys,
                ["ms-run", *ARGS, f"data.dir={REPO / 'data'}", f"cache_dir={tmp_path / 'cache'}", CLOCK_DIR],
            )
        except KeyboardInterrupt:  # else it would stop the whole test session
            pytest.fail("Ctrl-C left ms-run as a traceback")
        [folder] = (tmp_path / "outputs").glob("*/*")
        return code, [line for line in err.splitlines() if line.startswith("ms-run: ")], folder

    return call


def test_ctrl_c_in_a_clock_named_folder_prints_a_folder_that_pastes_back(clock_folder_run):
    def interrupted(cfg, out):
        raise KeyboardInterrupt

    code, [line], folder = clock_folder_run(interrupted)
    assert code == 130 and "data.agents=[riddle,pun]" in folder.name, (folder, line)
    assert read_back(hint_words(line)) == {"hydra.run.dir": str(folder)}


def test_a_run_that_failed_in_a_clock_named_folder_prints_a_command_that_pastes_back(clock_folder_run):
    def failed_after_it_began(cfg, out):
        (out / "run_id").write_text("0" * 32 + "\n")
        raise UserError("the pool's server stopped")

    code, [line], folder = clock_folder_run(failed_after_it_began)
    assert code == USER_ERROR_EXIT and "to resume this run in its folder" in line, line
    words = pasted(line.split("admitted first: ", 1)[1])  # the words after ms-run
    back = read_back(words)
    assert back.pop("hydra.run.dir") == str(folder)
    assert back == read_back([*ARGS, f"data.dir={REPO / 'data'}", f"cache_dir={folder.parents[2] / 'cache'}"])


# ---- the same command again: a run's folder is named by its settings ---------------------------


@pytest.mark.parametrize(
    "args, folder",
    [
        ([], "outputs/default"),
        (["experiment=quick"], "outputs/quick"),  # an experiment's own folder, as a sweep's is multirun/NAME
        (["experiment=quick", "k=1"], "outputs/quick,k=1"),
        (["k=1", "pool=single"], "outputs/k=1,pool=single"),
        (["backbone.model=HuggingFaceTB/SmolLM2-360M"], "outputs/backbone.model=HuggingFaceTB%2FSmolLM2-360M"),
    ],
)
def test_a_run_s_folder_is_named_by_its_settings_in_one_folder(args, folder):
    from ms.cli.compose import jobs

    [(_, cfg)] = jobs(args, multirun=False)
    assert cfg.hydra.run.dir == folder


def test_a_long_folder_name_is_cut_and_ends_in_a_hash_of_the_settings():
    from ms.cli.compose import jobs

    settings = [f"data.agents=[{','.join(['riddle'] * 40)}]", "k=1"]
    [(_, cfg)], [(_, again)] = jobs(settings, multirun=False), jobs(settings, multirun=False)
    [(_, other)] = jobs([*settings[:1], "k=2"], multirun=False)
    name = cfg.hydra.run.dir.removeprefix("outputs/")
    assert len(name) == 255 and name.startswith("data.agents=[riddle,riddle,") and "/" not in name
    assert again.hydra.run.dir == cfg.hydra.run.dir != other.hydra.run.dir


def test_a_sweep_cell_s_folder_is_one_folder_whatever_its_values():
    from ms.cli.compose import jobs

    cells = jobs(["experiment=quick", "backbone.model=org/a,b"], multirun=True)
    assert [cfg.hydra.sweep.subdir for _, cfg in cells] == ["backbone.model=org%2Fa", "backbone.model=b"]


def test_the_same_command_twice_finds_its_folder_and_skips_the_finished_run(tmp_path, monkeypatch, capsys, caplog):
    """A tiny real run on a scripted backbone (tests/fakes.py), through ms-run as typed: the same command
    again finds the first one's folder by its settings, calls no model, leaves its results as they were,
    and does not say that it wrote to the folder."""
    import logging

    from fakes import FakeLM
    from test_schedule import FAST

    import ms.loop.compose_run

    words = lambda text: max(1, len(text.split()))  # noqa: E731
    lm = FakeLM(default="Score: 80", scores=lambda context, text: (-0.5 * words(text), words(text)))
    monkeypatch.setattr(ms.loop.compose_run, "build_backbones", lambda catalog, names: {catalog.default.name: lm})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    caplog.set_level(logging.INFO, logger="ms")
    command = ["ms-run", *FAST, f"data.dir={REPO / 'data'}", f"cache_dir={tmp_path / 'cache'}", *ARGS[-2:]]

    code, err = ms_run_in_process(monkeypatch, capsys, command)
    assert code == 0, err[-3000:]
    [folder] = (tmp_path / "outputs").iterdir()
    assert folder.name.startswith("backbone.generation.max_new_tokens=8,data.agents=[limerick,riddle],")
    assert "done; this run wrote to" in caplog.text
    metrics, calls = (folder / "metrics.json").read_bytes(), len(lm.chats) + len(lm.scored)
    assert calls > 0

    caplog.clear()
    code, err = ms_run_in_process(monkeypatch, capsys, command)
    assert code == 0, err[-3000:]
    assert list((tmp_path / "outputs").iterdir()) == [folder]
    assert (folder / "metrics.json").read_bytes() == metrics and len(lm.chats) + len(lm.scored) == calls
    assert "already holds a complete run of these settings and data; skipping it" in caplog.text
    assert "done; this run wrote to" not in caplog.text
