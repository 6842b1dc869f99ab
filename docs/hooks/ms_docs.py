"""The site's generated pages (a MkDocs hook, named in mkdocs.yml), made at every build so that they
cannot drift from what they describe:

- reference/configuration.md: every config group, option, setting and registered part
  (ms.config.reference);
- reference/commands.md: the help of ms-data's commands and of ms-report, as argparse prints it;
- architecture.md, changelog.md, results.md: ARCHITECTURE.md, CHANGELOG.md and results/README.md from
  the repository, their links made to work inside the site;
- figures/: the result figures and screenshots the pages show, copied from results/.

The pages are read in the checkout too (on GitHub, in an editor), where none of these exists. So a page
links to the repository file a generated page is made from (`../ARCHITECTURE.md`,
`../results/size_trend/size_trend.png`), which this hook turns into a link to the site's copy; and the
two references are committed as short pages that say how to print them, which this hook replaces with
the generated ones.

In the generated pages, a pointer into the README of old ("README, \"Access rules\"", as comments in
the code still write it) becomes a link to the page that holds that section now; a pointer to a
section no page holds fails the build. Nothing here reaches the network."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import posixpath
import re
import sys
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

log = logging.getLogger("mkdocs.hooks.ms_docs")

# site path -> repository file, shown by the pages
FIGURES = {
    "figures/size_trend.png": "results/size_trend/size_trend.png",
    "figures/figure4_gates_smollm2.png": "results/figure4_controls_offline/figure4_gates_smollm2.png",
    "figures/site_pair.png": "results/site_screenshots/pair.png",
    "figures/site_cell.png": "results/site_screenshots/cell.png",
}
# site page -> repository file, taken in whole
MIRRORED = {
    "architecture.md": "ARCHITECTURE.md",
    "changelog.md": "CHANGELOG.md",
    "results.md": "results/README.md",
}
# the committed stand-ins of the generated references (docs/reference/*.md), replaced at each build
REFERENCES = ("reference/configuration.md", "reference/commands.md")
# repository file -> the site's copy of it, for the links of the written pages
SITE_COPY = {source: page for page, source in {**MIRRORED, **FIGURES}.items()}
HELP_WIDTH = "100"

_generated: set[str] = set()
_headings: dict[str, tuple[str, str]] = {}  # a heading's text -> (page, anchor)


# ---- the pages -------------------------------------------------------------------------------------


def configuration_page() -> str:
    from ms.config.reference import markdown

    return markdown()


def _help(parser: argparse.ArgumentParser) -> str:
    with _width():
        return parser.format_help().rstrip()


@contextlib.contextmanager
def _width():
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _report_help() -> str:
    from ms.report.cli import main

    out = io.StringIO()
    with _width(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    return out.getvalue().rstrip()


def commands_page() -> str:
    from ms.cli.data import build_parser

    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    lines = [
        "# Command reference",
        "",
        "Generated at each build from the commands' own argument parsers, so it says what the installed",
        "code accepts. `ms-run` is a Hydra application: its groups and settings are in the",
        "[configuration reference](configuration.md), and `ms-run --help` prints them with their composed",
        "values. Every command reports a user error in one line and exits with status 2; `--debug` shows",
        "the traceback.",
        "",
        "## ms-data",
        "",
        "```text",
        _help(parser),
        "```",
        "",
    ]
    for name, sub in commands.choices.items():
        lines += [f"### ms-data {name}", "", "```text", _help(sub), "```", ""]
    lines += ["## ms-report", "", "```text", _report_help(), "```", ""]
    return "\n".join(lines)


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def mirrored(text: str, page: str, known: set[str]) -> str:
    """A repository Markdown file made to work as the site's `page`: links to docs/X stay links (to X),
    links to other repository files become their paths in code, web links stay."""

    def one(match: re.Match) -> str:
        bang, words, target = match.groups()
        if re.match(r"^[a-z]+://", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        if path.startswith("docs/") and path[len("docs/") :] in known:
            relative = posixpath.relpath(path[len("docs/") :], posixpath.dirname(page) or ".")
            return f"{bang}[{words}]({relative}{'#' + anchor if anchor else ''})"
        return f"{words} (`{path}`)" if words and words.strip("`") != path else f"`{path}`"

    return _LINK.sub(one, text)


# ---- pointers into the README of old ---------------------------------------------------------------


def _heading_text(line: str) -> str:
    words = re.sub(r"\s*\{[^}]*\}\s*$", "", line.lstrip("#").strip())
    return re.sub(r"[`*]", "", words).strip()


def _read_headings(files: Files) -> None:
    _headings.clear()
    for file in files.documentation_pages():
        source = Path(file.abs_src_path).read_text(encoding="utf-8") if file.abs_src_path else file.content_string
        fenced = False
        for line in source.splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"^#{1,6} ", line):
                words = _heading_text(line)
                explicit = re.search(r"\{#([\w-]+)", line)
                _headings.setdefault(words, (file.src_uri, explicit.group(1) if explicit else slugify(words, "-")))


_POINTER = re.compile(r"""(?:the\s+)?README(?:'s)?(?:\s*[,:])?\s*(\()?"([^"]+)"(?(1)\))""")


def pointers(markdown: str, page: str) -> str:
    """README, "Title" (and the README's "Title", README ("Title"), a title broken over two lines too)
    -> a link to the page holding Title. Fenced code is left as written."""
    chunks = re.split(r"(^```.*?^```[^\n]*$)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(
        chunk if chunk.startswith("```") else _POINTER.sub(lambda m: _link(m, page), chunk) for chunk in chunks
    )


def _link(match: re.Match, page: str) -> str:
    title = " ".join(match.group(2).replace("\\", "").split())
    if title not in _headings:
        log.warning(f'{page}: it points to the README\'s "{title}", and no page of the site has that section')
        return match.group(0)
    target, anchor = _headings[title]
    relative = posixpath.relpath(target, posixpath.dirname(page) or ".")
    return f"[{title}]({relative}#{anchor})"


# ---- links to repository files the site copies ----------------------------------------------------


def to_copies(markdown: str, page: str) -> str:
    """A written page's links to repository files the site copies (ARCHITECTURE.md, results/README.md, a
    result figure) -> links to the copies, anchors kept. Fenced code is left as written."""

    def one(match: re.Match) -> str:
        bang, words, target = match.groups()
        path, _, anchor = target.partition("#")
        if not path or re.match(r"^[a-z]+:", path):
            return match.group(0)
        source = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page), path))
        if source not in SITE_COPY:
            return match.group(0)
        relative = posixpath.relpath(SITE_COPY[source], posixpath.dirname(page) or ".")
        return f"{bang}[{words}]({relative}{'#' + anchor if anchor else ''})"

    chunks = re.split(r"(^```.*?^```[^\n]*$)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(chunk if chunk.startswith("```") else _LINK.sub(one, chunk) for chunk in chunks)


# ---- the hooks ---------------------------------------------------------------------------------------


def on_files(files: Files, config) -> Files:
    _generated.clear()
    known = {f.src_uri for f in files.documentation_pages()} | set(MIRRORED) | set(REFERENCES)
    pages = {
        "reference/configuration.md": configuration_page(),
        "reference/commands.md": commands_page(),
    }
    for page, source in MIRRORED.items():
        pages[page] = mirrored((REPO / source).read_text(encoding="utf-8"), page, known)
    for page, content in pages.items():
        stand_in = files.get_file_from_path(page)
        if stand_in is not None:  # a committed reference page, there for the checkout
            files.remove(stand_in)
        files.append(File.generated(config, page, content=content))
        _generated.add(page)
    for page, source in FIGURES.items():
        files.append(File.generated(config, page, abs_src_path=str(REPO / source)))
    _read_headings(files)
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri in _generated:
        return pointers(markdown, page.file.src_uri)
    return to_copies(markdown, page.file.src_uri)
