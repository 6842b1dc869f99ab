"""The report of a finished run after `ms-data forget --agent pun --with-seeds` (a tiny real run: the loop
with the scripted FakeLM for a backbone and a real SQLite pool, then the real ms-data forget): pun's
memories left the pool, but the run retrieved them, and its own files (memories.csv, decisions.jsonl,
its data) still say who wrote them and what they said. The site and sharing.md describe them alike,
marked as removed, with each question's prompt rebuilt, and nothing claims the folder lacks a file it has."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import compose_config
from fakes import FakeLM
from omegaconf import OmegaConf
from test_site import by, errors, open_page

from ms.cli.data import main as ms_data
from ms.config.files import POOL_FILENAME, WRITERS_FILE
from ms.pool import Pool
from ms.report.cli import main as report_main
from ms.report.sharing.counts import UNKNOWN
from ms.report.sharing.matrices import FOLDER

TINY = [
    "data.agents=[limerick,pun,sonnet]",
    "data.max_seed=3",
    "data.max_stream=2",
    "data.max_test=3",
    "fills=[50,100]",
    "retriever=random",
    "gate=all",
    "eval.metrics=[ref_logprob]",
    "pool.mode=single",
    "retriever.save=false",
    "use_cache=false",
    "k=3",
]
FORGOTTEN = "pun"


def site_data(site: Path, key: str) -> dict:
    """The JSON a site data file hands to MS.put."""
    text = (site / "data" / f"{key}.js").read_text(encoding="utf-8")
    prefix = f'MS.put("{key}", '
    assert text.startswith(prefix) and text.endswith(");\n")
    return json.loads(text[len(prefix) : -3])


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory):
    """A finished k = 3 run as ms-run leaves it (memories.csv exported at its end), pun then forgotten
    with its seeds, and ms-report --html on it. Returns the run folder, the report, the site and every
    prompt the backbone read: the stream's chats and the test questions' contexts ref_logprob scored."""
    import ms.loop.compose_run
    from ms.cli.run import export_memories
    from ms.loop.pipeline import run

    lm = FakeLM(
        default="An answer.", scores=lambda context, text: (-0.5 * len(text.split()), max(1, len(text.split())))
    )
    root = tmp_path_factory.mktemp("forgotten") / "sweep"
    folder = root / "k=3"
    patch = pytest.MonkeyPatch()
    patch.setattr(ms.loop.compose_run, "build_backbones", lambda catalog, names: {catalog.default.name: lm})
    try:
        cfg = compose_config([*TINY, f"cache_dir={root.parent / 'cache'}"])
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        (folder / ".hydra" / "overrides.yaml").write_text("- k=3\n")
        run(cfg, folder)
    finally:
        patch.undo()
    export_memories(folder)  # what ms-run does when a run finishes
    assert ms_data(["forget", str(folder), "--agent", FORGOTTEN, "--with-seeds"]) == 0
    with Pool(folder / POOL_FILENAME) as pool:
        assert FORGOTTEN not in pool.count_by("agent")
    out = root.parent / "report"
    assert report_main([str(root), "--out", str(out), "--html", str(out / "site")]) == 0
    return (
        folder,
        out,
        out / "site",
        [*("\n".join(m["content"] for m in c) for c in lm.chats), *(context for context, _ in lm.scored)],
    )


def pun_ids(folder: Path) -> set[int]:
    with (folder / WRITERS_FILE).open(newline="") as f:
        return {int(r["id"]) for r in csv.DictReader(f) if r["agent"] == FORGOTTEN}


@pytest.mark.slow
def test_forgotten_memories_keep_their_writer_and_text_marked_as_removed(forgotten):
    folder, _, site, prompts = forgotten
    data = site_data(site, "run-0")
    gone = pun_ids(folder)
    retrieved = {i for rows in data["rows"].values() for row in rows for i in row["r"]}
    assert gone & retrieved, "the run must have retrieved some of pun's memories for this test to mean anything"
    origins = set()
    for i in gone:
        record = data["memories"][str(i)]
        assert record["agent"] == FORGOTTEN and "question" in record and "answer" in record, record
        assert "ms-data forget" in record["forgotten"] and f"--agent {FORGOTTEN}" in record["forgotten"]
        origins.add(record["origin"])
    assert origins == {"seed", "stream"}  # seeds rebuilt from the data, stream pairs from decisions.jsonl
    assert not any("forgotten" in r for i, r in data["memories"].items() if int(i) not in gone)
    assert data["memory_missing"] == [] and "no longer in it" in data["memory_source"]
    # Every prompt can be rebuilt: each retrieved memory has its text, the one the backbone was shown.
    shown = "\n".join(prompts)
    for i in retrieved:
        record = data["memories"][str(i)]
        assert record["question"] in shown and record["answer"] in shown, i


@pytest.mark.slow
def test_the_site_and_sharing_md_count_them_under_their_writer_alike(forgotten):
    folder, out, site, _ = forgotten
    matrix = site_data(site, "run-0")["sharing"]
    assert "missing" not in matrix
    assert f"agent={FORGOTTEN}" in matrix["columns"] and not any(UNKNOWN in c for c in matrix["columns"])
    [note] = matrix["notes"]
    assert "removed from the pool by `ms-data forget" in note
    with (out / FOLDER / "k=3.csv").open(newline="") as f:
        counts = {r["agent"]: r for r in csv.DictReader(f) if r["quantity"] == "retrievals"}
    assert int(counts["all"][f"agent={FORGOTTEN}"]) == matrix["counts"]["all"][f"agent={FORGOTTEN}"] > 0
    assert list(counts["all"]) == ["quantity", "agent", *matrix["columns"]]  # the same columns, none "not in pool"
    assert note in (out / FOLDER / "sharing.md").read_text()
    everything = "\n".join(p.read_text(encoding="utf-8") for p in [*out.rglob("*.md"), *site.rglob("*.js")])
    for false in ("no pool file or memories.csv", "(not in pool)", "neither a pool file nor memories.csv"):
        assert false not in everything


@pytest.mark.slow
def test_a_question_page_names_the_writer_and_shows_the_prompt(forgotten, browser):
    """In a real browser (as tests/test_site.py's): a question that retrieved a forgotten memory shows its
    writer, that it was removed, and the prompt the backbone got."""
    folder, _, site, prompts = forgotten
    data = site_data(site, "run-0")
    gone = pun_ids(folder)
    fill, t = next((f, row["t"]) for f, rows in data["rows"].items() for row in rows if gone & set(row["r"]))
    open_page(browser, site, f"run/0/q/{fill}/{t}", "question")
    cards = [c for c in by(browser, "div.question div.memory") if int(c.get_attribute("data-memory")) in gone]
    assert cards and all(
        f"writer: {FORGOTTEN}" in c.text and "no longer: removed from the pool" in c.text for c in cards
    )
    shown = [m.text for m in by(browser, "pre.prompt")]  # the system and the user message
    assert len(shown) == 2 and any(all(m in p for m in shown) for p in prompts)
    assert errors(browser) == []


@pytest.mark.slow
def test_without_memories_csv_the_stream_memories_come_from_decisions_and_the_rest_is_said(forgotten, tmp_path):
    """A run that kept no memories.csv: its removed stream memories are still described from decisions.jsonl
    (the removal's record marks them); its removed seeds, which no file of the run attributes, are counted
    under their own column and named in a note, never guessed."""
    import shutil

    from ms.report.common.runs import find_runs
    from ms.report.common.writers import read_writers
    from ms.report.html.memories import run_memories
    from ms.report.sharing.counts import ALL, sharing_matrix
    from ms.report.sharing.text import sharing_notes

    folder, *_ = forgotten
    gone = pun_ids(folder)
    copy = tmp_path / "sweep" / "k=3"
    shutil.copytree(folder, copy)
    (copy / WRITERS_FILE).unlink()
    [run] = find_runs([copy.parent])[0]
    writers = read_writers(run.path, run.record.backbone)
    stream = {i for i, w in writers.items() if w.forgotten}
    assert stream and stream < gone and {writers[i].agent for i in stream} == {FORGOTTEN}
    assert {writers[i].origin for i in stream} == {"stream"}
    records = run_memories(run).records
    assert all("question" in records[i] and "ms-data forget" in records[i]["forgotten"] for i in stream)
    s = sharing_matrix(run, writers, None, "ref_logprob", run.last_fill)
    retrieved_seeds = {i for row in run.predictions[run.last_fill].values() for i in row["retrieved"]} & (gone - stream)
    assert retrieved_seeds and s.unknown == retrieved_seeds
    assert s.count(ALL, f"agent={UNKNOWN}") >= len(retrieved_seeds)
    assert any("whose writer no file of the run records" in n for n in sharing_notes(s))
