"""The ablation (retriever x memory policy): its rows in order with the runs' numbers, a headed table
per cell, stm_ltm runs out of the tables, none where all runs share one combination. Shared helpers:
tests/test_report.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import (
    AGENTS,
    assert_estimate,
    make_run,
    metrics_of,
    predicted,
    read_csv,
)

from ms.common.stats import mean_ci
from ms.report import find_runs, load_paper_tables, select, write_report

# ---- ablation: retriever x memory policy -----------------------------------------------------

ABLATION_RUNS = [  # (folder, retriever, learned, memory), deliberately out of order
    ("composite", "composite", True, "plain"),
    ("dense-stm", "dense", True, "stm_ltm"),
    ("bm25-stm", "bm25", False, "stm_ltm"),
    ("dense", "dense", True, None),  # an older run: no memory field means plain
    ("composite-frozen-stm", "composite", False, "stm_ltm"),
    ("random", "random", False, "plain"),
    ("dense-frozen", "dense", False, "plain"),
    ("bm25", "bm25", False, "plain"),
]


@pytest.fixture(scope="module")
def ablation_sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ablation")
    for i, (folder, retriever, learned, memory) in enumerate(ABLATION_RUNS):
        make_run(
            root, folder, backbone="smollm2", retriever=retriever, learned=learned, memory=memory, base=0.1 + i / 20
        )
    # A second cell holding only some agents, and a third with one combination only.
    make_run(root, "single-dense", backbone="smollm2", pool="single", agents=["sonnet", "limerick"], base=0.2)
    make_run(
        root,
        "single-bm25",
        backbone="smollm2",
        pool="single",
        retriever="bm25",
        learned=False,
        agents=["sonnet", "limerick"],
        base=0.25,
    )
    make_run(root, "k2-dense", backbone="smollm2", k=2, base=0.4)
    write_report([root], root / "report")
    return root


def test_ablation_rows_in_order_with_the_runs_numbers(ablation_sweep):
    rows = read_csv(ablation_sweep / "report" / "ablation.csv")
    k3 = [(r["retriever"], r["memory"], r["run"]) for r in rows if (r["k"], r["pool"]) == ("3", "domain")]
    plain, stm = "plain memory", "short- and long-term memory"
    assert k3 == [
        ("random retriever", plain, "random"),
        ("BM25 retriever", plain, "bm25"),
        ("BM25 retriever", stm, "bm25-stm"),
        ("frozen dense retriever", plain, "dense-frozen"),
        ("learned dense retriever", plain, "dense"),
        ("learned dense retriever", stm, "dense-stm"),
        ("frozen composite retriever", stm, "composite-frozen-stm"),
        ("learned composite retriever", plain, "composite"),
    ]
    agents = [*load_paper_tables().agents, "overall"]
    assert list(rows[0])[6:] == [
        "replicates",
        *(c for a in agents for c in (a, f"{a} ci_lo", f"{a} ci_hi", f"{a} n")),
        "accepted",
    ]
    for row in rows:
        run = ablation_sweep / row["run"]
        for agent in metrics_of(ablation_sweep, row["run"])["fills"]["100"]["per_agent"]:
            assert_estimate(row, agent, mean_ci(predicted(run, agent=agent)), replicates=None)
        assert_estimate(row, "overall", mean_ci(predicted(run)), replicates=None)
        assert row["replicates"] == "1"
        assert int(row["accepted"]) == sum(metrics_of(ablation_sweep, row["run"])["stream"]["accepted"].values())
    # The k = 2 cell has one combination only: no table for it.
    assert not any(r["k"] == "2" for r in rows)


def test_ablation_markdown_has_a_headed_table_per_cell(ablation_sweep):
    text = (ablation_sweep / "report" / "ablation.md").read_text()
    assert "## smollm2, k = 3, domain pool" in text and "## smollm2, k = 3, single pool" in text
    assert text.index("domain pool") < text.index("single pool")
    single = text.split("## smollm2, k = 3, single pool")[1]
    header = next(line for line in single.splitlines() if line.startswith("| retriever"))
    assert header == "| retriever | memory | run | limerick | sonnet | overall | accepted |"  # only agents present
    assert "dense-stm consolidation: summaries 2, summarized 6, moved 3, deferred 1." in text
    dense = next(line for line in single.splitlines() if line.startswith("| learned dense retriever"))
    assert dense.count(" [") == 3  # limerick, sonnet and overall, each with its CI
    assert "smollm2, k = 2, domain pool" in text.split("Not tabled")[1]
    summary = (ablation_sweep / "report" / "summary.md").read_text()
    assert "(ablation.md)" in summary and "(ablation.csv)" in summary and "### smollm2, k = 3, domain pool" in summary


def test_stm_ltm_dense_runs_stay_out_of_the_tables(ablation_sweep, tmp_path):
    runs = find_runs([ablation_sweep])[0]
    chosen, why_not = select(runs)
    assert chosen[("smollm2", 3, "domain")].name == "dense"  # learned, plain (no memory field)
    assert why_not["dense-stm"].startswith("short- and long-term memory (the tables use plain memory only")
    rows = {r["agent"]: r for r in read_csv(ablation_sweep / "report" / "table1.csv")}
    assert all(
        float(rows[a]["3-shot smollm2 ours"]) == mean_ci(predicted(ablation_sweep / "dense", agent=a)).mean
        for a in AGENTS
    )
    others = (ablation_sweep / "report" / "runs.md").read_text().split("## Other runs")[1]
    assert "dense-stm" in others
    # A cell whose only dense run uses stm_ltm has no column of ours at all, and no Figure 4.
    make_run(tmp_path, "only-stm", backbone="smollm2", memory="stm_ltm")
    make_run(tmp_path, "other", backbone="gpt-3.5-turbo", memory="plain")
    write_report([tmp_path], tmp_path / "report")
    header = list(read_csv(tmp_path / "report" / "table1.csv")[0])
    assert "3-shot gpt-3.5-turbo ours" in header and not any("smollm2" in c for c in header)
    assert not (tmp_path / "report" / "figure4_smollm2.png").exists()


def test_no_ablation_when_all_runs_share_one_combination(tmp_path):
    make_run(tmp_path / "sweep", "a", backbone="smollm2", memory=None)
    make_run(tmp_path / "sweep", "b", backbone="gpt-3.5-turbo", memory="plain")  # the same: dense-learned, plain
    out = tmp_path / "report"
    out.mkdir()
    (out / "ablation.md").write_text("left from an earlier report")
    write_report([tmp_path / "sweep"], out)
    assert not (out / "ablation.md").exists() and not (out / "ablation.csv").exists()
    summary = (out / "summary.md").read_text()
    assert "(ablation.md)" not in summary and "## Ablation" not in summary
