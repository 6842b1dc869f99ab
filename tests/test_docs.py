"""The documentation: the site builds with `mkdocs build --strict` (no broken link, anchor or missing
page; its reference pages generated from the code); the configuration reference names every group and
option under conf/, every field of the schema and every registered part, a part registered for the
test included; README.md stays short; no commit hash, issue number or machine path in README.md,
docs/ or the code; and two built pages, opened from disk in Chromium, render their math with nothing
fetched from the network.

The docs extra (part of the test extra) brings MkDocs; set CI=true and its absence, or a missing
browser, fails the tests instead of skipping them."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from conftest import REPO
from test_registry import toy  # noqa: F401  (the fixture: a toy gate and metric from outside ms)

from ms.config.parts import GATES, METRICS
from ms.config.reference import markdown, registries
from ms.config.schema import Config
from ms.config.store import CONF_DIR

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
README_LINES = 200
# Where the documentation and the code live; results/*/README.md keep their commits as provenance.
WRITTEN = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md", "docs/**/*.md", "docs/**/*.py", "mkdocs.yml", "ms/**/*.py"]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|Users)/\w")
ISSUE = re.compile(r"\bissues?[ -]#?\d+", re.IGNORECASE)
# Other projects' issue trackers, which a comment may cite: they are not this project's issues.
OTHER_TRACKERS = ("bert_score issue #", "lm-evaluation-harness issues #")


def _missing(what: str) -> None:
    message = f"{what} missing (make test installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `mkdocs build --strict` builds it, into a temporary folder."""
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        _missing("MkDocs and its Material theme (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


# ---- the build ------------------------------------------------------------------------------------


def test_the_site_builds_strict_with_every_page_of_the_nav(site):
    import yaml

    def pages(nav) -> list[str]:
        found = []
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += pages(value) if isinstance(value, list) else [value]
        return found

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = pages(config["nav"])
    assert {
        "reference/configuration.md",
        "reference/commands.md",
        "architecture.md",
        "changelog.md",
        "results.md",
    } <= set(listed)
    for page in listed:
        assert (site / page.replace(".md", ".html")).is_file(), page
    written = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert written <= set(listed), f"pages not in the nav: {sorted(written - set(listed))}"


def test_the_site_fetches_nothing_it_serves_its_own_katex_and_no_web_font(site):
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+font: false$", config, re.MULTILINE)
    for name in ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js", "LICENSE"):
        assert (site / "assets" / "katex" / name).is_file(), name
    assert list((site / "assets" / "katex" / "fonts").glob("KaTeX_Main-Regular.woff2"))
    remote = re.compile(r"<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.IGNORECASE)
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not remote.search(text), (page, remote.search(text).group(0))
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page
    for sheet in site.rglob("*.css"):
        assert not re.search(r"@import|url\(\s*['\"]?(?:https?:)?//", sheet.read_text(encoding="utf-8")), sheet


def test_the_math_pages_carry_their_math_for_katex(site):
    for page, least in (("concepts/retrieval.html", 3), ("concepts/gates.html", 2), ("reading/claims.html", 3)):
        text = (site / page).read_text(encoding="utf-8")
        assert text.count('class="arithmatex"') >= least, page


# ---- the generated references ---------------------------------------------------------------------


def conf_listing(conf: Path) -> dict[str, set[str]]:
    """group -> its options, from the files under the config folder (what the reference must list)."""
    listing: dict[str, set[str]] = {}
    for folder, _, files in os.walk(conf):
        group = Path(folder).relative_to(conf).as_posix()
        for name in files:
            if name.endswith(".yaml") and group != ".":
                listing.setdefault(group, set()).add(name[: -len(".yaml")])
    return listing


def schema_keys(kind: type = Config, prefix: str = "") -> set[str]:
    """Every settable dotted key of the schema (agents' entries as agents.NAME.field)."""
    keys = set()
    hints = typing.get_type_hints(kind)
    for field in dataclasses.fields(kind):
        hint, key = hints[field.name], f"{prefix}{field.name}"
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = (
            hint
            if dataclasses.is_dataclass(hint)
            else (args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else None)
        )
        if typing.get_origin(hint) is dict:
            keys |= schema_keys(typing.get_args(hint)[1], f"{key}.NAME.")
        elif inner is not None:
            keys |= schema_keys(inner, f"{key}.")
        else:
            keys.add(key)
    return keys


def test_the_reference_lists_every_group_and_option_under_conf():
    page = markdown()
    listing = conf_listing(Path(CONF_DIR))
    assert {"access", "gate", "grader", "poison", "hydra/callbacks", "experiment"} <= set(listing)
    for group, names in listing.items():
        assert f"### `{group}`" in page, group
        for name in names:
            assert f"#### `{group}={name}`" in page, f"{group}={name}"
    for option in (
        "gate=all",
        "gate=random",
        "access=rule",
        "grader=qwen2.5-0.5b",
        "poison=grader_instruction",
        "poison=self_assessment",
        "hydra/callbacks=mlflow",
    ):
        assert f"`{option}`" in page, option
    # a file whose selector names another option is typed by that option's settings, and links to them
    assert "File: `conf/retriever/dense_frozen.yaml`. Its settings: [`retriever` under `retriever=dense`]" in page
    stm_ltm = page.split("{#settings-memory-stm-ltm}")[1].split("\n### ")[0]
    assert "Its settings besides those every option shares" in stm_ltm  # memory.stm_ltm, its own, nested


def option_keys() -> set[str]:
    """Every settable key of each group option's own settings (ms.config.options: gate=random's gate.rate,
    retriever=composite's retriever.composite.decay)."""
    from ms.config.options import owned

    return {key for group, _, kind in owned() for key in schema_keys(kind, f"{group}.")}


def test_the_reference_lists_every_setting_of_the_schema_with_its_choices():
    page = markdown()
    keys = schema_keys() | option_keys()
    assert {
        "k",
        "gate.rate",
        "gate.decide_on",
        "scorer.defence",
        "backbone.dtype",
        "accept_code_change",
        "agents.NAME.rubric",
        "retriever.composite.utility_weight",
        "data.hf.name",
    } <= keys
    for key in keys:
        assert f"| `{key}` |" in page, key
    row = next(line for line in page.splitlines() if line.startswith("| `scorer.defence` |"))
    assert "one of none, quote, strip, reject" in row
    row = next(line for line in page.splitlines() if line.startswith("| `backbone.dtype` |"))
    assert "one of auto, float32, float16, bfloat16" in row
    # each gate's own settings under its option, after the section every gate shares
    assert page.index("### `gate` {#settings-gate}") < page.index(
        "### `gate` under `gate=utility` {#settings-gate-utility}"
    )
    utility = page.split("{#settings-gate-utility}")[1].split("\n### ")[0]
    assert "| `gate.decide_on` | str | `mean` | one of mean, lower |" in utility and "gate.rate" not in utility


def test_the_reference_lists_every_registered_part():
    page = markdown()
    found = registries()
    assert {name for name, _, _ in found} >= {
        "GATES",
        "METRICS",
        "PROVIDERS",
        "ENGINES",
        "RETRIEVERS",
        "POLICIES",
        "POOL_BACKENDS",
        "ACCESS_RULES",
        "POISONS",
    }
    for _, registry, _ in found:
        for name in registry.names():
            assert f"| `{name}` | `{registry.target(name)}` |" in page, (registry.kind, name)


def test_a_part_registered_from_outside_ms_and_its_config_folder_join_the_reference(toy):  # noqa: F811
    """The toy gate and metric of tests/test_registry.py, registered in-process, with the config folder
    that holds gate/toy.yaml given as ms-run's --config-dir would be."""
    assert "toy" in GATES and "ref_words" in METRICS
    page = markdown([CONF_DIR, toy])
    assert "| `toy` | `toy_parts.gate:ToyGate` |" in page
    assert "| `ref_words` | `toy_parts.metric:RefWords` |" in page
    assert "#### `gate=toy`" in page and "A toy gate from outside ms" in page
    assert "### `gate` under `gate=toy`" in page and "| `gate.ratio` | float | `3.0` | &gt; 0 |" in page
    row = next(line for line in page.splitlines() if line.startswith("| `gate.name` |"))
    assert "one of rubric, utility, both, rubric\\_qdep, all, random, toy" in row  # Markdown escapes the _


def test_the_built_references_are_the_generated_ones(site):
    configuration = (site / "reference" / "configuration.html").read_text(encoding="utf-8")
    for text in ("gate=random", "scorer.defence", "poison=answer_plus_assessment", "ms.gates.all:AllGate"):
        assert text in configuration, text
    commands = (site / "reference" / "commands.html").read_text(encoding="utf-8")
    for command in (
        "ms-data gate-check",
        "ms-data gate-compare",
        "ms-data forget",
        "ms-data learn-access",
        "ms-report",
    ):
        assert command in commands, command


# ---- what the documentation says ------------------------------------------------------------------


def written_files() -> list[Path]:
    return sorted({p for pattern in WRITTEN for p in REPO.glob(pattern) if p.is_file()})


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, len(lines)


def test_no_commit_hash_issue_number_or_machine_path_in_the_docs_or_the_code():
    tokens: dict[str, set[str]] = {}
    for path in written_files():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO).as_posix()
        for token in set(re.findall(r"\b[0-9a-f]{7,40}\b", text)):
            tokens.setdefault(token, set()).add(where)
        shown = text
        for other in OTHER_TRACKERS:
            shown = shown.replace(other, "")
        assert not ISSUE.search(shown), (where, ISSUE.search(shown).group(0))
        assert not MACHINE_PATH.search(text), (where, MACHINE_PATH.search(text).group(0))
    if not tokens or not (REPO / ".git").exists():
        return
    asked = sorted(tokens)
    done = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=REPO,
        input="".join(f"{t}^{{commit}}\n" for t in asked),
        capture_output=True,
        text=True,
        check=True,
    )
    commits = [
        t for t, line in zip(asked, done.stdout.splitlines()) if not line.endswith("missing") and " commit " in line
    ]
    assert commits == [], {t: sorted(tokens[t]) for t in commits}


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# Pages the site generates at each build; the checkout holds a short stand-in of each (it says how to
# print the page), so a link into one is checked against the page as the build generates it.
GENERATED = {"docs/reference/configuration.md": markdown}


def unfenced(text: str) -> str:
    """Markdown without its fenced code, where a link is text to copy, not a link."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def anchors(text: str) -> set[str]:
    """The anchors a page's headings get: an explicit {#id}, else GitHub's (the site's toc agrees on these)."""
    found = set()
    for line in unfenced(text).splitlines():
        if re.match(r"^#{1,6} ", line):
            explicit = re.search(r"\{#([\w-]+)", line)
            words = re.sub(r"\s*\{[^}]*\}\s*$", "", line.lstrip("#"))
            found |= {explicit.group(1)} if explicit else {github_anchor(re.sub(r"[`*]", "", words))}
    return found


def linked_pages() -> list[str]:
    return ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"] + sorted(
        p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")
    )


@pytest.mark.parametrize("name", linked_pages())
def test_the_pages_link_to_files_and_sections_of_the_checkout(name):
    """README.md, ARCHITECTURE.md, CHANGELOG.md and every page under docs/, read on their own (on GitHub,
    in an editor), link to files of the checkout and to headings those files hold: a page of the site
    links to the repository file the site copies (docs/hooks/ms_docs.py), not to the copy. The built
    site's links are checked by the strict build."""
    text = unfenced((REPO / name).read_text(encoding="utf-8"))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = ((REPO / name).parent / path).resolve() if path else REPO / name
        assert file.exists(), (name, target)
        if anchor and file.suffix == ".md":
            where = file.relative_to(REPO).as_posix()
            page = GENERATED[where]() if where in GENERATED else file.read_text(encoding="utf-8")
            assert anchor in anchors(page), (name, target)


def test_the_checkout_holds_a_stand_in_of_each_generated_reference():
    """The references exist only in the built site; their stand-ins in the checkout say how to print them."""
    for page, command in (("configuration.md", "python -m ms.config.reference"), ("commands.md", "ms-data --help")):
        text = (REPO / "docs" / "reference" / page).read_text(encoding="utf-8")
        assert "generated" in text and command in text and len(text.splitlines()) < 15, page


# ---- in a browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    """Chromium headless through its own chromedriver (selenium is told both paths, so it downloads nothing)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        _missing("Chromium and chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium (the test extra)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,900",
        "--disable-background-networking",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})  # every request it makes
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.mark.parametrize("page", ["concepts/retrieval.html", "reading/claims.html"])
def test_a_built_page_renders_its_math_from_disk_with_nothing_fetched(site, browser, page):
    import time

    browser.get((site / page).resolve().as_uri())
    deadline = time.monotonic() + 20
    count = "return document.querySelectorAll('.arithmatex .katex').length"
    while browser.execute_script(count) == 0:
        assert time.monotonic() < deadline, "no math rendered"
        time.sleep(0.1)
    left = browser.execute_script(
        "return [...document.querySelectorAll('.arithmatex')].filter(e => !e.querySelector('.katex')).length"
    )
    assert left == 0, f"{left} formulas not rendered"
    assert browser.execute_script("return document.querySelectorAll('.katex-error').length") == 0
    events = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    fetched = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert any(url.endswith("katex.min.js") for url in fetched), fetched
    assert all(url.startswith(("file://", "data:")) for url in fetched), [
        u for u in fetched if not u.startswith(("file://", "data:"))
    ]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    fonts = browser.execute_script("return [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family)")
    assert any("KaTeX" in family for family in fonts), fonts
