"""The browsable report (ms-report --html): a tiny real run (the loop with the scripted FakeLM for a
backbone, a real SQLite pool and the packaged MiniLM for BERTScore), its site opened from file:// in
Debian's Chromium through selenium: a run's header naming its access rule and poisoner, filter by
agent, search, open a question (its prompt as the backbone got it), follow a sharing-matrix cell to
its retrievals, a claim side by side, no console errors, and an answer that carries <script> shown
as text, never run. Without the run's pool file, the texts are rebuilt from its data and
decisions.jsonl, and agree with the pool's.

Set CI=true and a missing browser fails the browser tests instead of skipping them."""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import compose_config
from fakes import FakeLM
from omegaconf import OmegaConf

from ms.config.files import POOL_FILENAME, WRITERS_FILE
from ms.report.cli import main as report_main
from ms.report.common.runs import find_runs
from ms.report.common.writers import export_writers
from ms.report.html.memories import run_memories
from ms.report.html.prompts import template_parts
from ms.report.html.site import script

PLANT = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
TINY = [
    "data.agents=[limerick,pun,sonnet]",
    "data.max_seed=3",
    "data.max_stream=2",
    "data.max_test=3",
    "fills=[50,100]",
    "retriever=random",
    "gate=all",
    "eval.metrics=[bertscore,ref_logprob]",
    "pool.mode=single",
    "retriever.save=false",
    "use_cache=false",
]


# ---- without a browser ----------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["{question}->{answer}", "Q: {question}\nA: {answer} {{literal}}", "{answer}"])
def test_template_parts_join_as_python_formats(template):
    parts = template_parts(template, {"question", "answer"})
    values = {"question": "a {q}", "answer": "b }"}
    assert "".join(p if isinstance(p, str) else values[p["field"]] for p in parts) == template.format(**values)


def test_template_fields_the_page_cannot_render_are_refused():
    for bad in ("{question!r}", "{answer:>10}", "{other}"):
        with pytest.raises(ValueError, match="not one the site renders"):
            template_parts(bad, {"question", "answer"})


def test_data_files_are_scripts_whose_json_survives_any_text():
    text = '</script><!-- \u2028 \u2029 "quoted" 诗'
    line = script("run-0", {"a": text, "nan": float("nan")})
    assert line.startswith('MS.put("run-0", ') and line.endswith(");\n")
    assert json.loads(line[len('MS.put("run-0", ') : -3]) == {"a": text, "nan": None}


# ---- a tiny real run ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A k = 0 and a k = 3 run of three agents; limerick's answers (test and stream) carry PLANT.
    Returns the sweep folder and every chat the backbone was sent."""
    import ms.loop.compose_run
    from ms.loop.pipeline import run

    lm = FakeLM(
        {"limerick": "There once was a cat " + PLANT},
        default="An answer.",
        scores=lambda context, text: (-0.5 * len(text.split()), max(1, len(text.split()))),
    )
    root = tmp_path_factory.mktemp("site") / "sweep"
    patch = pytest.MonkeyPatch()
    patch.setattr(ms.loop.compose_run, "build_backbones", lambda catalog, names: {catalog.default.name: lm})
    try:
        for k in (0, 3):
            cfg = compose_config([*TINY, f"k={k}", f"cache_dir={root.parent / 'cache'}"])
            folder = root / f"k={k}"
            (folder / ".hydra").mkdir(parents=True)  # what Hydra writes beside a run
            (folder / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
            (folder / ".hydra" / "overrides.yaml").write_text(f"- k={k}\n")
            run(cfg, folder)
    finally:
        patch.undo()
    return root, [copy.deepcopy(c) for c in lm.chats]


@pytest.mark.slow
def test_texts_rebuilt_without_the_pool_file_agree_with_it(tiny, tmp_path):
    root, _ = tiny
    [with_pool] = [r for r in find_runs([root])[0] if r.cell[1] == 3]
    from_pool = run_memories(with_pool)
    assert "pool file" in from_pool.source and not from_pool.missing
    for keep_csv in (True, False):  # a published copy (memories.csv), and one with decisions.jsonl alone
        copy_dir = tmp_path / f"copy-{keep_csv}" / "k=3"
        shutil.copytree(with_pool.path, copy_dir)
        if keep_csv:
            export_writers(copy_dir, copy_dir / WRITERS_FILE)
        (copy_dir / POOL_FILENAME).unlink()
        [published] = find_runs([copy_dir.parent])[0]
        rebuilt = run_memories(published)
        assert rebuilt.source.startswith("seed texts rebuilt") and not rebuilt.missing
        assert set(rebuilt.records) == set(from_pool.records)
        for i, record in from_pool.records.items():
            mine = rebuilt.records[i]
            assert (mine["question"], mine["answer"], mine["agent"], mine["origin"], mine["backbone"]) == (
                record["question"],
                record["answer"],
                record["agent"],
                record["origin"],
                record["backbone"],
            ), i
        assert {i: (w.agent, w.domain, w.origin, w.backbone) for i, w in rebuilt.writers.items()} == {
            i: (w.agent, w.domain, w.origin, w.backbone) for i, w in from_pool.writers.items()
        }


@pytest.mark.slow
def test_a_missing_data_folder_is_said_not_guessed(tiny, tmp_path):
    root, _ = tiny
    folder = tmp_path / "k=3"
    shutil.copytree(root / "k=3", folder)
    (folder / POOL_FILENAME).unlink()
    config = OmegaConf.load(folder / ".hydra" / "config.yaml")
    config.data.dir = str(tmp_path / "gone")
    (folder / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(config))
    [published] = find_runs([tmp_path])[0]
    memories = run_memories(published)
    assert any("is not on this machine" in m for m in memories.missing)
    assert all("question" in r for r in memories.records.values() if r["origin"] == "stream")
    assert not any("question" in r for r in memories.records.values() if r["origin"] == "seed")


# ---- the site in a real browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tiny, tmp_path_factory):
    root, chats = tiny
    out = tmp_path_factory.mktemp("report")
    assert report_main([str(root), "--out", str(out / "report"), "--html", str(out / "site")]) == 0
    return out / "site", chats


def open_page(driver, site: Path, route: str, page: str) -> None:
    """Load the route from file:// and wait until the page named `page` is drawn."""
    driver.get(f"{site.resolve().as_uri()}/index.html#/{route}")
    wait_for(driver, page)


def wait_for(driver, page: str) -> None:
    deadline = time.monotonic() + 20
    while driver.execute_script("return document.body.getAttribute('data-page')") != page:
        assert time.monotonic() < deadline, (page, driver.find_element("id", "main").text[:500])
        time.sleep(0.05)


def errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def by(driver, css: str) -> list:
    return driver.find_elements("css selector", css)


@pytest.mark.slow
def test_the_site_opens_from_file_and_a_question_shows_what_its_backbone_got(site, browser, tmp_path):
    folder, chats = site
    assert not any(p.suffix in (".json", ".jsonl") for p in folder.rglob("*"))  # data only as scripts
    open_page(browser, folder, "", "front")
    assert [e.text for e in by(browser, "table.claims td:first-child")] == ["(a)", "(a)"]  # k=3 vs k=0, two metrics
    assert len(by(browser, "a.run-link")) == 2 and by(browser, "table.sharing a.cell-link")
    # under the claims and the runs, how many of their runs were recorded dirty or carry no record
    assert [p.text.split(", of which")[0] for p in by(browser, "p.note.records")] == ["runs: 2", "runs: 2"]
    assert "k = 3 · Single pool · random retriever · plain memory · all gate" in browser.find_element("id", "runs").text
    browser.save_screenshot(str(tmp_path / "front.png"))
    assert (tmp_path / "front.png").stat().st_size > 10_000

    # a run is named by its condition in words; its folder is the link's title and a line of its page
    links = {a.get_attribute("title"): a.text for a in by(browser, "a.run-link")}
    assert (
        set(links) == {"k=0", "k=3"}
        and links["k=3"].startswith("smollm2 · k = 3 · Single pool")
        and "k=3" not in links["k=3"]
    )
    browser.find_element("css selector", "a.run-link[title='k=3']").click()
    wait_for(browser, "questions")
    assert browser.find_element("tag name", "h1").text == links["k=3"]
    assert browser.find_element("css selector", "p.note.folder").text == "Folder: k=3"
    # the run's header names the access rule it read under and its poisoner, here neither
    assert browser.find_element("css selector", "p.note.rule").text == (
        "Access: access=open: every agent read every memory of its scope. Poisoner: no poisoning writer."
    )
    assert len(by(browser, "table.questions tbody tr")) == 9
    browser.find_element("css selector", "select#agent option[value=pun]").click()
    agents = {row.get_attribute("data-agent") for row in by(browser, "table.questions tbody tr")}
    assert agents == {"pun"} and len(by(browser, "table.questions tbody tr")) == 3
    first = by(browser, "a.question-link")[0]
    test_id = first.text
    browser.find_element("id", "search").send_keys(test_id)
    assert [a.text for a in by(browser, "a.question-link")] == [test_id]
    by(browser, "a.question-link")[0].click()
    wait_for(browser, "question")
    shown = [m.text for m in by(browser, "pre.prompt")]
    assert len(by(browser, "div.question div.memory")) == 3
    sent = [[m["content"] for m in c] for c in chats]
    assert shown in sent  # the system and user message, exactly as the backbone got them
    assert errors(browser) == []


@pytest.mark.slow
def test_a_planted_script_in_an_answer_is_shown_not_run(site, browser):
    folder, _ = site
    open_page(browser, folder, "run/1?agent=limerick", "questions")
    by(browser, "a.question-link")[0].click()
    wait_for(browser, "question")
    answer = browser.find_element("css selector", "pre.answer").text
    assert PLANT in answer  # the text, as text
    assert browser.title == "ms report" and not by(browser, "main img[src=x]") and not by(browser, "main script")
    open_page(browser, folder, "run/1/decisions", "decisions")
    assert browser.title == "ms report" and not by(browser, "main img")
    assert errors(browser) == []


@pytest.mark.slow
def test_a_sharing_cell_links_to_the_retrievals_behind_it(site, browser):
    folder, _ = site
    open_page(browser, folder, "", "front")
    cell = next(a for a in by(browser, "table.sharing a.cell-link") if "agent%3D" in a.get_attribute("href"))
    count, writer = int(cell.text), cell.get_attribute("href").split("agent%3D")[1].split("/")[0]
    cell.click()
    wait_for(browser, "cell")
    highlighted = by(browser, "div.retrieval div.memory.highlight")
    assert len(highlighted) == count
    assert all(f"writer: {writer}" in m.find_element("css selector", ".facts").text for m in highlighted)
    highlighted[0].find_element("css selector", "a.memory-link").click()
    wait_for(browser, "memory")
    assert by(browser, "table.retrievals tbody tr")  # the memory's page lists who retrieved it
    assert errors(browser) == []


@pytest.mark.slow
def test_a_claim_shows_two_runs_side_by_side(site, browser):
    folder, _ = site
    open_page(browser, folder, "claim/0", "claim")
    # each side said in words, its run folders in the link's title
    named = browser.find_element("css selector", "p.sides-named").text
    a, b = named.split("; b: ")
    assert a.startswith("a: ") and "· k = 3 · Single pool · random retriever" in a and "· k = 0 ·" in b
    assert a.endswith("at 100% fill") and "k=3" not in named  # words, not the run folders' names
    pairs = by(browser, "a.pair-link")
    assert len(pairs) == 9
    test_id = pairs[0].text
    pairs[0].click()
    wait_for(browser, "pair")
    sides = by(browser, "div.sides > div.side")
    assert [s.find_element("css selector", "h2").text.split(":")[0] for s in sides] == ["a", "b"]
    assert all(test_id in s.text for s in sides)
    assert len(sides[0].find_elements("css selector", "div.memory")) == 3  # k = 3
    assert not sides[1].find_elements("css selector", "div.memory")  # k = 0
    assert errors(browser) == []
