"""ms-report as its users meet it: where it writes without --out, which metric it draws, what it does
with nothing to draw, small n, seed replicates and runs from before predictions.jsonl, a report cut
short, runs under a hand-written access rule, run folders behind links. Shared helpers: tests/test_report.py."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from statistics import fmean

from test_report import (
    AGENTS,
    PNG_MAGIC,
    Predict,
    assert_estimate,
    make_run,
    metrics_of,
    predicted,
    read_csv,
    spread,
)

from ms.common.stats import mean_ci
from ms.report import find_runs, main, select, write_report


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
    import ms.report.tables.tables
    from ms.common.errors import UserError

    make_run(tmp_path / "sweep", "k=3", backbone="smollm2")

    def broken(*args, **kwargs):
        raise UserError("a damaged file, found after the first tables were written")

    monkeypatch.setattr(ms.report.tables.tables, "table2", broken)
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
