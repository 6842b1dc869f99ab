"""ms-report's poison figure (issue 38; ms.report.sharing.poison): drawn from synthetic run folders, a poisoned run
beside its clean run, with the numbers poison.md computes; written only where the report has poisoned runs."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from test_report import PNG_MAGIC, make_run

from ms.config.files import WRITERS_FILE
from ms.report.cli import write_report
from ms.report.common.runs import find_runs
from ms.report.sharing.poison import OTHERS, VICTIM, poison_figure, spread

VICTIM_AGENT = "riddle"
POISONED_IDS = (8, 9)  # the memories the poisoning writer wrote (memories.csv)
POISON = {"kind": "on_style", "victim": VICTIM_AGENT, "writer": "poison"}


def predict(base: float):
    """ref_logprob spread over the test questions (so the CIs have a width) and the memories retrieved:
    the victim's top 3 holds one poisoned memory, the others' none."""

    def values(agent: str, q: int, fill: int) -> dict:
        drop = base if agent == VICTIM_AGENT else base / 10
        retrieved = [POISONED_IDS[q % 2], 1, 2] if agent == VICTIM_AGENT else [1, 2, 3]
        return {"ref_logprob": -1.0 + q / 10 - drop * (1 + q / 5), "retrieved": retrieved}

    return values


def write_memories(run: Path) -> None:
    with (run / WRITERS_FILE).open("w", newline="") as f:
        table = csv.writer(f)
        table.writerow(["id", "agent", "domain", "origin", "backbone"])
        for i in range(10):
            writer = "poison" if i in POISONED_IDS else "pun"
            table.writerow([i, writer, "single", "stream", "smollm2"])


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("poison")
    make_run(root / "clean", "clean", backbone="smollm2", pool="single", predict=predict(0.0))
    poisoned = make_run(
        root / "poisoned",
        "on_style",
        backbone="smollm2",
        pool="single",
        predict=predict(0.2),
        fields={"poison": POISON},
    )
    write_memories(poisoned)
    return root


def test_the_figure_draws_the_shares_and_changes_poison_md_computes(sweep):
    runs, _ = find_runs([sweep])
    [found] = [spread(run, runs, "ref_logprob") for run in runs if run.record.poison]
    assert found.clean is not None and found.clean.path == sweep / "clean" / "clean"
    victim_share = found.retrievals[VICTIM][0] / found.retrievals[VICTIM][1]
    assert victim_share == pytest.approx(1 / 3) and found.retrievals[OTHERS][0] == 0
    share, change = poison_figure([found], "ref_logprob").axes
    assert [bar.get_width() for bar in share.patches] == pytest.approx([victim_share, 0.0])
    victim_bar, others_bar = change.containers  # one errorbar per side: its point, caps and CI bar
    for bar, side in ((victim_bar, VICTIM), (others_bar, OTHERS)):
        point, _, [span] = bar.lines
        assert list(point.get_xdata()) == pytest.approx([found.harm[side].mean])
        [[(lo, _), (hi, _)]] = span.get_segments()  # the CI bar spans poison.md's interval
        assert (lo, hi) == pytest.approx((found.harm[side].lo, found.harm[side].hi))
    assert found.harm[VICTIM].mean < found.harm[OTHERS].mean < 0  # the victim lost more than the rest


def test_the_figure_is_written_only_where_the_report_has_poisoned_runs(sweep, tmp_path):
    out = tmp_path / "report"
    write_report([sweep], out, "ref_logprob")
    assert (out / "poison.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "poison.pdf").read_bytes()[:5] == b"%PDF-"
    assert "](poison.png)" in (out / "poison.md").read_text()
    assert "[poison.png](poison.png)" in (out / "summary.md").read_text()
    # the clean run alone, into the same folder: no poison table or figure, and no old one kept
    write_report([sweep / "clean"], out, "ref_logprob")
    assert not any((out / f"poison{suffix}").exists() for suffix in (".md", ".csv", ".png", ".pdf"))
    assert "poison.png" not in (out / "summary.md").read_text()


def test_two_runs_of_one_kind_gate_and_rule_are_labelled_by_the_field_they_differ_in(sweep, tmp_path):
    """A second poisoned run that differs only in its seed: each figure row names its own seed, not its
    folder (a long folder name squeezed the axes to nothing)."""
    twin = make_run(
        tmp_path / "twin",
        "on_style_seed1",
        backbone="smollm2",
        pool="single",
        predict=predict(0.2),
        fields={"poison": POISON, "seed": 1},
    )
    write_memories(twin)
    runs, _ = find_runs([sweep, tmp_path / "twin"])
    found = [spread(run, runs, "ref_logprob") for run in runs if run.record.poison]
    labels = [tick.get_text() for tick in poison_figure(found, "ref_logprob").axes[0].get_yticklabels()]
    assert sorted(labels) == sorted(f"on_style, gate=rubric, open, seed={s.run.record.seed}" for s in found)
    assert len(set(labels)) == 2


def test_the_poisoners_memories_are_its_own_not_a_models_or_a_domains(sweep, tmp_path):
    """No model wrote the poisoner's pairs, and it is no agent of its victim's domain: its memories are
    labelled as its (even where an older memories.csv credited them to the run's backbone), in the sharing
    matrix and on the site."""
    from ms.report.common.writers import POISONER, read_writers
    from ms.report.html.rundata import run_data
    from ms.report.sharing.counts import ALL, sharing_matrix
    from ms.report.sharing.matrices import write_sharing

    runs, _ = find_runs([sweep])
    [run] = [r for r in runs if r.record.poison]
    writers = read_writers(run.path, "smollm2")
    assert {writers[i].backbone for i in POISONED_IDS} == {POISONER}
    assert {w.backbone for i, w in writers.items() if i not in POISONED_IDS} == {"smollm2"}
    s = sharing_matrix(run, writers, None, "ref_logprob", run.last_fill)
    poisoned = s.count(VICTIM_AGENT, "agent=poison")
    assert poisoned > 0
    assert s.count(VICTIM_AGENT, "source=poisoner") == s.count(VICTIM_AGENT, "backbone=poisoner") == poisoned
    assert s.count(ALL, "source=poisoner") == poisoned  # nobody else retrieved one, and none counts as a domain's
    write_sharing(runs, tmp_path, "ref_logprob")
    lines = (tmp_path / "sharing" / "sharing.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| agent"))
    assert "| poisoner |" in header and "| by poisoner |" in header and "| gain: poisoner |" in header
    memories = run_data(run, runs, "ref_logprob")["memories"]
    assert all(memories[i]["poisoner"] and memories[i]["agent"] == "poison" for i in POISONED_IDS)
    assert not any(m.get("poisoner") for i, m in memories.items() if i not in POISONED_IDS)


def test_a_runs_site_header_names_its_access_rule_and_its_poisoner(sweep):
    from ms.report.html.rundata import run_data

    runs, _ = find_runs([sweep])
    shown = {run.name: run_data(run, runs, "ref_logprob") for run in runs}
    poisoned = shown["poisoned__on_style"]
    assert poisoned["poison"] == "poison=on_style: writer `poison` answering the questions of riddle"
    assert poisoned["access"] == "access=open: every agent read every memory of its scope"
    assert shown["clean__clean"]["poison"] == "no poisoning writer"
    rule = {"rule": "rule", "file": "rules/mine.yaml", "grants": {"riddle": ["seed"]}}
    run = replace(runs[0], metrics={**runs[0].metrics, "run": {**runs[0].record.to_json(), "access": rule}})
    assert run_data(run, runs, "ref_logprob")["access"] == "access=rule from `rules/mine.yaml`"
