"""Who helped whom: the sharing matrix counts every retrieval of a run under the agent and backbone
that wrote the memory (from a real pool file, or the memories.csv publish.sh exports) and credits
each with its question's gain against the same question at k = 0."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import yaml

from ms.common.errors import UserError
from ms.common.stats import Estimate
from ms.pool import Pool
from ms.report.cli import main as report_main
from ms.report.common.runs import find_runs
from ms.report.common.writers import WRITERS_FILE, export_writers, read_writers
from ms.report.sharing.baseline import find_baseline
from ms.report.sharing.counts import sharing_matrix
from ms.report.sharing.heatmap import _gain_cell, heatmap
from ms.report.sharing.matrices import FOLDER, write_sharing

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parent.parent
DOMAIN = {"sonnet": "literary", "limerick": "literary", "pun": "logic"}
QUESTIONS = ["sonnet-0", "sonnet-1", "limerick-0", "pun-0", "pun-1"]
# k = 0 values per question; a k = 3 question scores BASE + its GAIN.
BASE = {"sonnet-0": -3.0, "sonnet-1": -2.5, "limerick-0": -2.0, "pun-0": -1.5, "pun-1": -1.0}
GAIN = {"sonnet-0": 0.30, "sonnet-1": 0.10, "limerick-0": -0.20, "pun-0": 0.50, "pun-1": -0.40}


def make_pool(run: Path) -> dict[str, int]:
    """A real pool: seed pairs of each agent and one stream memory of sonnet; name -> memory id."""
    names = ["sonnet seed a", "sonnet seed b", "limerick seed", "pun seed a", "pun seed b", "sonnet stream"]
    with Pool(run / "pool.sqlite") as pool:
        ids = pool.add(
            [
                {
                    "scope": "single",
                    "agent": n.split()[0],
                    "domain": DOMAIN[n.split()[0]],
                    "question": n,
                    "answer": f"answer to {n}",
                    "origin": n.split()[1],
                }
                for n in names
            ],
            step=0,
        )
    return dict(zip(names, ids))


def retrievals(ids: dict[str, int]) -> dict[str, list[int]]:
    """What each question retrieved at the last fill."""
    named = {
        "sonnet-0": ["sonnet seed a", "sonnet stream", "limerick seed"],
        "sonnet-1": ["sonnet seed b", "sonnet seed a", "sonnet stream"],
        "limerick-0": ["limerick seed", "sonnet seed a", "pun seed a"],
        "pun-0": ["pun seed a", "limerick seed", "sonnet stream"],
        "pun-1": ["pun seed b", "pun seed a", "limerick seed"],
    }
    return {q: [ids[n] for n in names] for q, names in named.items()}


def make_run(
    folder: Path,
    *,
    k: int,
    values: dict[str, float],
    retrieved: Optional[dict[str, list[int]]] = None,
    backbone: str = "smollm2",
    fills: tuple[int, ...] = (100,),
    reference: str = "ref",
    config: Optional[dict] = None,
) -> Path:
    """A finished run folder as the pipeline leaves it; the first fill retrieves nothing but the first
    seed, so only the last fill's retrievals add up to the expected matrix."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"k={k}"]))
    (folder / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "backbone": {"name": backbone},
                "k": k,
                "pool": {"mode": "single", "path": None},
                "data": {"dir": "data"},
                **(config or {}),
            }
        )
    )
    rows = [
        {
            "agent": q.split("-")[0],
            "test_id": q,
            "k": k,
            "fill": fill,
            "question": f"question {q}",
            "reference": reference if q == "pun-1" else "ref",
            "ref_logprob": values[q],
            "retrieved": (retrieved or {}).get(q, []) if fill == fills[-1] else [1] * bool(retrieved),
        }
        for fill in fills
        for q in QUESTIONS
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    per_agent = {a: {"ref_logprob": 0.0, "n": 1} for a in DOMAIN}
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "complete": True,
                "fills": {str(f): {"overall": {"ref_logprob": 0.0, "n": 5}, "per_agent": per_agent} for f in fills},
                "run": {
                    "backbone": backbone,
                    "k": k,
                    "pool": "single",
                    "retriever": "dense",
                    "learned": True,
                    "agents": list(DOMAIN),
                    "fills": list(fills),
                    "seed": 0,
                },
            }
        )
    )
    return folder


@pytest.fixture
def sweep(tmp_path) -> tuple[Path, dict[str, int]]:
    root = tmp_path / "sweep"
    run = root / "k=3"
    run.mkdir(parents=True)
    ids = make_pool(run)
    make_run(run, k=3, values={q: BASE[q] + GAIN[q] for q in QUESTIONS}, retrieved=retrievals(ids), fills=(50, 100))
    make_run(root / "k=0", k=0, values=BASE)
    return root, ids


def read_matrix(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """(quantity, retrieving agent) -> column -> cell."""
    with path.open(newline="") as f:
        return {(r.pop("quantity"), r.pop("agent")): r for r in csv.DictReader(f)}


def draw(root: Path, out: Path) -> dict[tuple[str, str], dict[str, str]]:
    runs, _ = find_runs([root])
    assert write_sharing(runs, out, "ref_logprob")
    return read_matrix(out / FOLDER / "k=3.csv")


def test_the_matrix_sums_to_the_number_of_retrievals(sweep, tmp_path):
    root, ids = sweep
    m = draw(root, tmp_path / "report")
    expected = retrievals(ids)
    for agent in DOMAIN:
        n = sum(len(r) for q, r in expected.items() if q.startswith(agent))
        counts = {c: int(v) for c, v in m["retrievals", agent].items()}
        for block in ("agent=", "backbone=", "source="):
            assert sum(v for c, v in counts.items() if c.startswith(block)) == n, (agent, block)
        assert counts["all"] == n
        assert sum(float(v) for c, v in m["fraction", agent].items() if c.startswith("agent=")) == pytest.approx(1)
    total = sum(map(len, expected.values()))
    assert int(m["retrievals", "all"]["all"]) == total == 15
    assert sum(int(m["retrievals", a]["all"]) for a in DOMAIN) == total
    # Who wrote what pun retrieved: its own two seeds (3), limerick's seed (2), sonnet's stream memory (1).
    pun = m["retrievals", "pun"]
    assert (pun["agent=pun"], pun["agent=limerick"], pun["agent=sonnet"]) == ("3", "2", "1")
    assert (pun["backbone=seed"], pun["backbone=smollm2"]) == ("5", "1")
    assert (pun["source=own agent"], pun["source=same domain"], pun["source=other domain"]) == ("3", "0", "3")
    sonnet = m["retrievals", "sonnet"]
    assert (sonnet["source=own agent"], sonnet["source=same domain"]) == ("5", "1")  # limerick is literary too
    assert m["questions", "pun"]["agent=limerick"] == "2"


def test_a_cells_gain_is_the_mean_over_its_retrievals_against_k0(sweep, tmp_path):
    root, _ = sweep
    m = draw(root, tmp_path / "report")
    # pun-0 holds 1 pun memory, pun-1 holds 2: the pun cell weighs pun-1 twice.
    assert float(m["gain", "pun"]["agent=pun"]) == pytest.approx((GAIN["pun-0"] + 2 * GAIN["pun-1"]) / 3)
    assert float(m["gain", "pun"]["agent=limerick"]) == pytest.approx((GAIN["pun-0"] + GAIN["pun-1"]) / 2)
    assert float(m["gain", "pun"]["agent=sonnet"]) == pytest.approx(GAIN["pun-0"])
    assert m["gain_ci_lo", "pun"]["agent=sonnet"] == ""  # one question: no interval
    assert m["gain_ci_lo", "pun"]["agent=pun"] == ""  # two questions: too few (the span of two is no CI)
    lo, hi = float(m["gain_ci_lo", "all"]["all"]), float(m["gain_ci_hi", "all"]["all"])  # five questions
    assert min(GAIN.values()) <= lo < hi <= max(GAIN.values())
    assert float(m["gain", "all"]["all"]) == pytest.approx(sum(GAIN.values()) / len(GAIN))  # k memories each
    assert m["gain_n", "pun"]["agent=pun"] == "3"
    text = (tmp_path / "report" / FOLDER / "sharing.md").read_text()
    assert "against k = 0 in `k=0`" in text and "5 of 5 questions paired" in text
    assert "mean over the retrievals it counts" in text


def test_a_k0_run_pairs_only_the_same_questions_of_the_same_backbone(sweep, tmp_path):
    root, _ = sweep
    shutil.rmtree(root / "k=0")
    make_run(root / "k=0", k=0, values=BASE, reference="another reference")  # pun-1 is another question
    make_run(root / "other backbone k=0", k=0, values=BASE, backbone="gpt-4o")
    make_run(root / "other data k=0", k=0, values=BASE, config={"data": {"dir": "elsewhere"}})
    m = draw(root, tmp_path / "report")
    assert float(m["gain", "pun"]["agent=pun"]) == pytest.approx(GAIN["pun-0"])  # pun-1 left unpaired
    assert m["gain_n", "pun"]["agent=pun"] == "1" and m["retrievals", "pun"]["agent=pun"] == "3"
    assert (
        "4 of 5 questions paired; 1 with the same id but another question"
        in (tmp_path / "report" / FOLDER / "sharing.md").read_text()
    )

    shutil.rmtree(root / "k=0")
    m = draw(root, tmp_path / "again")
    assert m["gain", "pun"]["agent=pun"] == "" and m["retrievals", "pun"]["agent=pun"] == "3"
    assert "none: no k = 0 run" in (tmp_path / "again" / FOLDER / "sharing.md").read_text()


def test_a_published_copy_draws_the_same_matrix_and_the_run_is_not_touched(sweep, tmp_path):
    root, _ = sweep
    run = root / "k=3"
    before = sorted(p.name for p in run.iterdir())
    original = draw(root, tmp_path / "from pool")
    assert sorted(p.name for p in run.iterdir()) == before  # no -wal or -shm left beside the pool

    copy = tmp_path / "published"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("pool.sqlite*"))
    subprocess.run([sys.executable, "-m", "ms.report.export", str(run), str(copy / "k=3" / WRITERS_FILE)], check=True)
    assert draw(copy, tmp_path / "from csv") == original


def test_a_k0_run_of_all_agents_pairs_with_a_run_of_some(sweep, tmp_path):
    """data.agents picks agents, not questions: one process's run of experiment=sharing_postgres pairs with a
    k = 0 run of all nine. Any other data setting still keeps them apart."""
    root, _ = sweep
    (root / "k=3" / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "backbone": {"name": "smollm2"},
                "k": 3,
                "pool": {"mode": "single", "path": None},
                "data": {"dir": "data", "agents": ["sonnet", "limerick", "pun"]},
            }
        )
    )
    m = draw(root, tmp_path / "report")
    assert float(m["gain", "all"]["all"]) == pytest.approx(sum(GAIN.values()) / len(GAIN))
    (root / "k=3" / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump(
            {"backbone": {"name": "smollm2"}, "k": 3, "data": {"dir": "data", "agents": ["pun"], "max_test": 1}}
        )
    )
    assert draw(root, tmp_path / "again")["gain", "all"]["all"] == ""


def test_agents_on_two_backbones_get_a_family_block_with_the_cross_family_gain(sweep, tmp_path):
    """sonnet answers on gpt-4o, the others on smollm2: the stream memory sonnet wrote is the same
    backbone for sonnet's questions and the other backbone for pun's."""
    root, _ = sweep
    assert not any(c.startswith("family=") for c in draw(root, tmp_path / "one")["retrievals", "all"])
    agents = {"agents": {"sonnet": {"domain": "literary", "backbone": "gpt-4o"}}}
    for run in ("k=3", "k=0"):
        config = yaml.safe_load((root / run / ".hydra" / "config.yaml").read_text())
        (root / run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config | agents))
    m = draw(root, tmp_path / "two")
    every = m["retrievals", "all"]
    assert (every["family=same backbone"], every["family=other backbone"], every["family=seed"]) == ("2", "1", "12")
    assert (
        m["retrievals", "pun"]["family=other backbone"] == "1"
        and m["retrievals", "sonnet"]["family=other backbone"] == "0"
    )
    assert float(m["gain", "all"]["family=other backbone"]) == pytest.approx(GAIN["pun-0"])  # paired with k = 0
    text = (tmp_path / "two" / FOLDER / "sharing.md").read_text()
    assert "| sonnet (gpt-4o) |" in text and "| pun (smollm2) |" in text and "gain: other backbone" in text


def test_writers_backbones(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    ids = make_pool(run)
    make_run(run, k=3, values=BASE, config={"agents": {"sonnet": {"domain": "literary", "backbone": "gpt-4o"}}})
    writers = read_writers(run)
    assert writers[ids["sonnet seed a"]].backbone == "seed"
    assert writers[ids["sonnet stream"]].backbone == "gpt-4o"  # its agent's own backbone in the run's config
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"backbone": {"name": "smollm2"}}))
    assert read_writers(run)[ids["sonnet stream"]].backbone == "smollm2"

    # A pool that records each memory's backbone is believed over the config.
    with sqlite3.connect(run / "pool.sqlite") as conn:
        if "backbone" not in {r[1] for r in conn.execute("PRAGMA table_info(memories)")}:
            conn.execute("ALTER TABLE memories ADD COLUMN backbone TEXT")
        conn.execute("UPDATE memories SET backbone = 'open-mistral-7b' WHERE id = ?", (ids["sonnet stream"],))
    assert read_writers(run)[ids["sonnet stream"]].backbone == "open-mistral-7b"
    assert export_writers(run, tmp_path / WRITERS_FILE) == len(ids)
    with (tmp_path / WRITERS_FILE).open() as f:
        rows = {int(r["id"]): r for r in csv.DictReader(f)}
    assert rows[ids["sonnet stream"]] | {"id": 0} == {
        "id": 0,
        "agent": "sonnet",
        "domain": "literary",
        "origin": "stream",
        "backbone": "open-mistral-7b",
        "run_id": "",
        "run": "",
    }  # make_pool records no run


def test_a_bad_writers_table_is_a_user_error_naming_the_file_and_column(sweep, tmp_path, capsys):
    root, _ = sweep
    run = root / "k=3"
    (run / "pool.sqlite").unlink()
    (run / WRITERS_FILE).write_text("id,agent,origin\n1,sonnet,seed\n")
    with pytest.raises(UserError, match=r"memories.csv lacks the column\(s\) domain, backbone"):
        read_writers(run)
    assert report_main([str(root), "--out", str(tmp_path / "report"), "--metric", "ref_logprob"]) == 2
    assert "memories.csv lacks the column(s) domain, backbone" in capsys.readouterr().err

    (run / WRITERS_FILE).unlink()
    (run / "pool.sqlite").write_text("not a database")
    with pytest.raises(UserError, match=r"cannot read the pool .*pool.sqlite"):
        read_writers(run)


def test_heatmap_and_runs_without_retrievals(sweep, tmp_path):
    root, _ = sweep
    runs, _ = find_runs([root])
    run = next(r for r in runs if r.name == "k=3")
    s = sharing_matrix(run, read_writers(run.path), None, "ref_logprob", 100)
    fig = heatmap(s, "title")
    share, gain = (ax.get_images()[0].get_array() for ax in fig.axes[:2])
    agent_and_backbone_columns = 3 + 2
    assert share.shape == gain.shape == (3, agent_and_backbone_columns)
    assert share.sum() == pytest.approx(2 * 3)  # each row's two blocks each sum to 1
    assert gain.mask.all()  # no baseline: nothing to colour
    out = tmp_path / "report"
    write_sharing(runs, out, "ref_logprob")
    assert (out / FOLDER / "k=3.png").read_bytes().startswith(PNG_MAGIC)
    assert not (out / FOLDER / "k=0.csv").exists()  # k = 0 retrieves nothing
    assert write_sharing([r for r in runs if r.name == "k=0"], tmp_path / "none", "ref_logprob") == ""
    assert not (tmp_path / "none" / FOLDER).exists()


def test_each_gain_cell_of_the_heatmap_shows_its_mean_and_its_95_ci(sweep):
    root, _ = sweep
    runs, _ = find_runs([root])
    run = next(r for r in runs if r.name == "k=3")
    s = sharing_matrix(run, read_writers(run.path), find_baseline(run, runs, "ref_logprob", 100), "ref_logprob", 100)
    right = heatmap(s, "title").axes[1]
    texts = {t.get_text() for t in right.texts}
    whole = s.estimate("pun", "agent=pun")  # three retrievals over two questions: no interval
    assert f"{whole.mean:+.2f}\n(n=3, no CI)" in texts
    assert "[95% CI]" in right.get_title()
    cells = [t for t in texts if t]
    assert cells and all(len(t.split("\n")) == 2 for t in cells)
    # a cell over three questions or more carries its interval (this fixture's cells have at most two)
    assert _gain_cell(Estimate(0.1, 0.05, 0.15, 12)) == "+0.10\n[+0.05, +0.15]"


@pytest.mark.skipif(shutil.which("bash") is None, reason="publish.sh is a bash script")
def test_publish_exports_the_writers_and_redraws_the_matrix_from_the_copy(sweep, tmp_path):
    root, _ = sweep
    work = tmp_path / "work"
    shutil.copytree(root, work / "multirun" / "demo")
    report = Path(sys.executable).with_name("ms-report")
    env = {**os.environ, "MS_REPORT": str(report), "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(REPO / "experiments" / "publish.sh"), "demo", "--metric", "ref_logprob"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
    )
    published = work / "results" / "demo"
    assert (published / "runs" / "k=3" / WRITERS_FILE).exists()
    assert not list((published / "runs").rglob("pool.sqlite"))
    assert read_matrix(published / FOLDER / "k=3.csv") == draw(root, tmp_path / "from multirun")
