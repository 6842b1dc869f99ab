"""The report of a small run, as a newcomer's first one is: three of the nine agents, in a folder named
by its settings (which may run to hundreds of characters). Its tables list only the agents that ran, the
site names each run by its condition in words, and the pool-growth figure's title fits the figure."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from test_report import make_run

from ms.report import pool_growth, write_report
from ms.report.common.run_labels import NAME_MAX, file_name, run_labels
from ms.report.common.runs import find_runs
from ms.report.figures.canvas import fitted

SMALL = ["pun", "limerick", "sonnet"]  # not in the paper's order (limerick, sonnet, pun), on purpose
LONG = "experiment=quick," + ",".join(f"data.hf.option_{i}=value_{i}" for i in range(9))  # ~250 bytes, no space


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def site_data(site: Path, name: str) -> dict:
    text = (site / "data" / f"{name}.js").read_text(encoding="utf-8")
    return json.loads(text[text.index(", ") + 2 : text.rindex(");")])


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A k = 0 and a k = 3 run of three agents, the k = 3 one in a long folder; its report and site."""
    sweep = tmp_path_factory.mktemp("small")
    make_run(sweep, "k=0", backbone="smollm2", k=0, agents=SMALL)
    make_run(sweep, LONG, backbone="smollm2", k=3, agents=SMALL, base=0.4)
    out, site = sweep.parent / f"{sweep.name}-report", sweep.parent / f"{sweep.name}-site"
    write_report([sweep], out, html=site)
    return sweep, out, site


def test_the_tables_list_only_the_agents_that_ran(small):
    _, out, _ = small
    rows = [r["agent"] for r in read_csv(out / "table1.csv")]
    assert rows == ["limerick", "sonnet", "pun", "overall"]  # the paper's order, then overall
    header = list(read_csv(out / "table2.csv")[0])
    agents = [c for c in header if c not in ("pool", "backbone", "source") and " " not in c]
    assert agents == ["limerick", "sonnet", "pun", "overall"]
    note = "Only the 3 agents our runs measured are shown; the paper's overall is over all 9 of its agents."
    assert note in (out / "table1.md").read_text(encoding="utf-8")


def test_the_site_names_a_run_by_its_condition_not_its_folder(small):
    _, _, site = small
    front = site_data(site, "site")
    [long] = [r for r in front["runs"] if r["name"] == LONG]
    assert long["label"] == long["words"] and "k = 3" in long["label"] and "data.hf" not in long["label"]
    assert site_data(site, f"run-{front['runs'].index(long)}")["label"] == long["label"]
    # the Runs table, a run's page and a sharing matrix show the label; the folder is the link's title
    front_js = (Path(__file__).parents[1] / "ms/report/html/static/front.js").read_text(encoding="utf-8")
    assert 'MS.link(r.label, MS.route("run", i), {class: "run-link", title: r.name})' in front_js
    assert "MS.link(r.name" not in front_js and "MS.link(run.name" not in front_js
    run_js = (Path(__file__).parents[1] / "ms/report/html/static/run.js").read_text(encoding="utf-8")
    assert 'h("h1", {}, run.label)' in run_js
    growth = [f["title"] for f in front["figures"] if f["title"].startswith("Pool growth")]
    assert growth and not any("data.hf" in title for title in growth)


def test_runs_of_one_condition_are_told_apart_by_seed(tmp_path):
    make_run(tmp_path, "seed=1", backbone="smollm2", agents=SMALL, seed=1)
    make_run(tmp_path, "seed=2", backbone="smollm2", agents=SMALL, seed=2)
    runs, _ = find_runs([tmp_path])
    labels = run_labels(runs)
    assert labels["seed=1"].endswith(", seed 1") and labels["seed=2"].endswith(", seed 2")
    assert labels["seed=1"].startswith(runs[0].words())


def test_the_pool_growth_title_fits_its_figure(small):
    sweep, _, _ = small
    decisions = [json.loads(line) for line in (sweep / LONG / "decisions.jsonl").read_text().splitlines()]
    title = f"Pool growth: {LONG}\n" + "smollm2 · k = 3 · Domain pool · learned dense retriever · " * 3
    fig = pool_growth(decisions, title)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    box, frame = fig._suptitle.get_window_extent(renderer), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (box, frame)  # not clipped at either edge
    assert fitted("short", fig) == "short"  # a title that fits is left as it is


def test_files_named_after_a_long_run_folder_fit_a_file_name(small):
    _, out, _ = small
    assert len(LONG.encode()) > 255 - len("pool_growth_.png")  # the old name would not fit
    [growth] = [p.name for p in out.glob("pool_growth_experiment=quick*.png")]
    assert len(growth.encode()) <= NAME_MAX and growth.startswith(f"pool_growth_{LONG[:100]}")
    assert all(len(p.name.encode()) <= NAME_MAX for p in out.rglob("*"))
    poem = "诗" * 90  # 270 bytes: cut on a character, never inside one
    name = file_name(poem, "pool_growth_", ".png")
    assert len(name.encode()) <= NAME_MAX and name.encode().decode() == name
    assert file_name(poem + "x", "pool_growth_", ".png") != name  # the hash tells cut names apart
    assert file_name("k=3", "pool_growth_", ".png") == "pool_growth_k=3.png"
