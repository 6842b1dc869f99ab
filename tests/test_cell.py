"""A resumed cell must be the same cell (ms.loop.cell): a folder holding a finished run answers a request
only if the run was made with the same settings on the same examples; otherwise the request is
refused in one line before anything in the folder changes."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from conftest import REPO, compose_config

from ms.common.errors import UserError
from ms.loop.cell import check_same_cell, data_fingerprint, differences, identity, record

TINY = [
    "data.agents=[limerick,riddle]",
    "data.max_seed=2",
    "data.max_stream=2",
    "data.max_test=1",
    "fills=[100]",
    "micro_batch=4",
    "train.candidates=2",
    "train.labelled=2",
    "backbone.generation.max_new_tokens=8",
    "eval.metrics=[ref_logprob]",
    "scorer.threshold=0",
]


def splits_of(cfg):
    from ms.agents import agents_from
    from ms.data import load_splits

    return load_splits(cfg.data, agents_from(cfg.agents))


def change_every_answer(path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "answer": r["answer"] + " (changed)"}) + "\n" for r in rows))


def test_identity_leaves_out_what_cannot_change_a_number_and_keeps_what_can():
    base = identity(compose_config(["cache_dir=/tmp/a", "data.dir=data"]))
    moved = identity(compose_config(["cache_dir=/tmp/b", "retriever.save=false", "data.dir=elsewhere"]))
    assert differences(base, moved, every_key=True) == []
    other = identity(compose_config(["seed=1", "gate=utility", "data.agents=[riddle]"]))
    assert {"seed", "gate.name", "data.agents"} <= set(differences(base, other, every_key=True))


def test_the_data_fingerprint_follows_the_examples_not_the_path(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(REPO / "data", copy)
    here = data_fingerprint(splits_of(compose_config(TINY)))
    assert data_fingerprint(splits_of(compose_config(TINY + [f"data.dir={copy}"]))) == here
    change_every_answer(copy / "riddle.jsonl")
    assert data_fingerprint(splits_of(compose_config(TINY + [f"data.dir={copy}"]))) != here


def test_a_finished_run_recorded_before_the_cell_record_is_compared_by_its_saved_config(tmp_path):
    old = compose_config(TINY)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(identity_tree(old)))
    check_same_cell(tmp_path, {"complete": True}, old, "any")  # same settings: no fingerprint to compare
    with pytest.raises(UserError, match=r"other settings \(data.dir\)"):
        check_same_cell(
            tmp_path, {"complete": True}, compose_config(TINY + ["data.dir=.cache/paper_data_clean"]), "any"
        )


def identity_tree(cfg):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def test_a_recorded_cell_refuses_other_data_behind_the_same_settings(tmp_path):
    cfg = compose_config(TINY)
    metrics = {"complete": True, "cell": record(cfg, "aaa")}
    check_same_cell(tmp_path, metrics, cfg, "aaa")
    with pytest.raises(UserError, match=r"other settings \(data \(the examples read\)\)"):
        check_same_cell(tmp_path, metrics, cfg, "bbb")
    with pytest.raises(UserError, match=r"data.agents"):
        check_same_cell(tmp_path, metrics, compose_config(TINY[1:] + ["data.agents=[riddle,pun]"]), "aaa")


def folder_state(folder):
    """Every file's bytes; a pool by its rows (SQLite may fold its write-ahead log into the file at any time)."""
    from ms.pool import Pool

    files = {
        p.relative_to(folder): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith("pool.sqlite")
    }
    pools = {}
    for path in sorted(folder.rglob("pool.sqlite")):
        with Pool(path) as pool:
            pools[path.relative_to(folder)] = [(m.id, m.answer) for s in pool.scopes() for m in pool.memories(s)]
    return files, pools


@pytest.mark.slow
def test_a_sweep_and_a_run_refuse_a_finished_folder_of_other_data_and_change_nothing(tmp_path, ms_run, caplog):
    """The issue's reproduction: a sweep finished on one data set, then the same command on another
    data folder's content, and on other agents; and the same for a single run's folder. Every
    command is `ms-run` as typed, in this process (ms_run: Hydra's basic launcher runs a sweep's
    cells here too)."""
    import logging

    data = tmp_path / "data"
    shutil.copytree(REPO / "data", data)
    sweep = tmp_path / "sweep"
    # The agent whose examples change below, on a frozen retriever: no memory train, so none of its settings.
    frozen = [o for o in TINY[1:] if not o.startswith("train.")] + ["retriever=dense_frozen"]
    riddles = ["data.agents=[riddle]", *frozen]
    common = [*riddles, f"data.dir={data}", f"hydra.sweep.dir={sweep}"]  # ms_run adds cache_dir

    code, err = ms_run("-m", *common, "k=1")
    assert code == 0, err[-20:]
    [cell] = [p for p in sweep.iterdir() if p.is_dir()]
    assert "data.dir=data-" in cell.name  # the data folder is named in the cell's folder
    metrics = json.loads((cell / "metrics.json").read_text())
    assert metrics["cell"]["data_sha256"] == data_fingerprint(splits_of(compose_config(riddles + [f"data.dir={data}"])))

    with caplog.at_level(logging.INFO, logger="ms.loop.pipeline"):
        code, _ = ms_run("-m", *common, "k=1")  # the same cell: skipped
    assert code == 0 and "already holds a complete run of these settings and data" in caplog.text
    before = folder_state(sweep)

    change_every_answer(data / "riddle.jsonl")
    code, lines = ms_run("-m", *common, "k=1")
    assert code == 2 and len(lines) == 1, lines[-20:]
    assert str(cell) in lines[0] and "data (the examples read)" in lines[0]
    assert folder_state(sweep) == before

    single = tmp_path / "run"
    code, _ = ms_run(*riddles, f"data.dir={data}", "k=1")  # the fixture's hydra.run.dir is tmp_path/run
    assert code == 0 and (single / "memories.csv").exists()  # who wrote each memory, exported at the end
    before = folder_state(single)
    code, err = ms_run(*frozen, "data.agents=[riddle,pun]", f"data.dir={data}", "k=1")
    assert code == 2 and len(err) == 1 and "data.agents" in err[0] and str(single) in err[0]
    assert folder_state(single) == before


# ---- runs recorded before the retrievers and memory policies owned their settings ----------------------

# Every retriever's and every policy's keys, as each run's section held them before (at their defaults).
OLD_RETRIEVER = {
    "encoder": None,
    "learn": True,
    "at_test": None,
    "refresh": "budget",
    "refresh_every": 8,
    "refresh_budget": 1000,
    "index": "exact",
    "ann_min_size": 50000,
    "ann_ef": 128,
    "seed": 0,
    "composite": {
        "importance_weight": 1.0,
        "recency_weight": 1.0,
        "similarity_weight": 1.0,
        "utility_weight": 0.0,
        "utility_scale": 0.05,
        "candidates": 20,
        "decay": 0.995,
        "age_unit": "steps",
        "default_importance": 0.5,
        "debug": False,
    },
    "save": True,
}
OLD_MEMORY = {
    "question": "query",
    "stm_ltm": {
        "capacity": 5,
        "interval": 3,
        "threshold": 0.5,
        "importance_override": 0.8,
        "group_similarity": 0.6,
        "default_importance": 0.5,
        "importance_tokens": 8,
        "summary_tokens": 256,
        "keep_above": None,
    },
    "retire_below": None,
    "retire_after": 6,
}
OLD_SECTIONS = [("bm25", "plain"), ("random", "stm_ltm"), ("dense", "plain"), ("composite", "stm_ltm")]


def old_tree(cfg, retriever: str, policy: str) -> dict:
    """`cfg` as Hydra saved it before the move: every retriever's and policy's keys in both sections."""
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=True)
    return {**tree, "retriever": {"name": retriever, **OLD_RETRIEVER}, "memory": {"policy": policy, **OLD_MEMORY}}


def read_back(folder, metrics: dict, cfg) -> None:
    """The run in `folder` resumes as `cfg`'s cell, and the report and plan_from read its settings as
    `cfg`'s: none of another option's keys."""
    from ms.plan.measured import source_settings
    from ms.report.common.runs import Run

    check_same_cell(folder, metrics, cfg, metrics.get("cell", {}).get("data_sha256"))
    wanted = identity(cfg, data_dir="cell" not in metrics)  # a saved config is compared on its data's path too
    # The report holds only runs whose metrics.json has a run record (find_runs); what it holds is beside the point.
    assert Run("old", folder, {"run": {}, **metrics}, [], 0.0).settings == wanted
    found = source_settings(folder, metrics)
    assert {k: v for k, v in found.items() if k in wanted} == {k: v for k, v in wanted.items() if k in found}
    assert not {k for k in found if k.startswith(("retriever.", "memory."))} - set(wanted)


@pytest.mark.parametrize("retriever, policy", OLD_SECTIONS)
def test_an_old_cell_record_holding_every_retrievers_and_policys_keys_resumes(tmp_path, retriever, policy):
    from ms.loop.cell import NOT_IDENTITY, flat, with_added

    cfg = compose_config([f"retriever={retriever}", f"memory={policy}"])
    tree = old_tree(cfg, retriever, policy)
    old = {
        k: v
        for k, v in flat({"retriever": tree["retriever"], "memory": tree["memory"]}).items()
        if not any(k == skip or k.startswith(skip + ".") for skip in NOT_IDENTITY)
    }
    config = {**{k: v for k, v in identity(cfg).items() if not k.startswith(("retriever.", "memory."))}, **old}
    assert "retriever.encoder" in config and "memory.stm_ltm.capacity" in config
    assert with_added(config) == identity(cfg)
    read_back(tmp_path, {"complete": True, "cell": {"data_sha256": "aaa", "config": config}}, cfg)


@pytest.mark.parametrize("retriever, policy", OLD_SECTIONS)
def test_an_old_saved_config_holding_every_retrievers_and_policys_keys_still_resumes(tmp_path, retriever, policy):
    cfg = compose_config([f"retriever={retriever}", f"memory={policy}"])
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(old_tree(cfg, retriever, policy)))
    read_back(tmp_path, {"complete": True}, cfg)
    other = compose_config([f"retriever={retriever}", f"memory={policy}", "seed=3"])
    with pytest.raises(UserError, match=r"other settings \(seed\)"):
        check_same_cell(tmp_path, {"complete": True}, other, None)
