"""The documentation site: it builds with `mkdocs build --strict` (no broken link, anchor or missing
page; its reference pages generated from the code), fetches nothing from the network, and two built
pages, opened from disk in Chromium, render their math. What the references list:
test_docs_reference.py; what the written pages say and link to: test_docs_text.py.

The docs extra (part of the test extra) brings MkDocs; set CI=true and its absence, or a missing
browser, fails the tests instead of skipping them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


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


# ---- the generated references, as built -----------------------------------------------------------


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


# ---- in a browser, the session's Chromium (conftest.chromium) -------------------------------------


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
