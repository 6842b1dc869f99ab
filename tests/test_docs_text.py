"""What the documentation says: README.md stays short; no commit hash, issue number or machine path in
README.md, docs/ or the code; the pages, read on their own, link to files and sections of the checkout;
and the checkout holds a stand-in of each reference the site generates."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from ms.config.reference import markdown

README_LINES = 200
# Where the documentation and the code live; results/*/README.md keep their commits as provenance.
WRITTEN = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md", "docs/**/*.md", "docs/**/*.py", "mkdocs.yml", "ms/**/*.py"]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|Users)/\w")
ISSUE = re.compile(r"\bissues?[ -]#?\d+", re.IGNORECASE)
# Other projects' issue trackers, which a comment may cite: they are not this project's issues.
OTHER_TRACKERS = ("bert_score issue #", "lm-evaluation-harness issues #")


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
