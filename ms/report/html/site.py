"""Write the site: index.html and its scripts and style (static/, written here, no framework), the
figures, data/site.js (the front page) and one data/run-<n>.js per run, loaded when a page needs it.

Browsers refuse fetch() and XHR from file://, so every data file is a script that hands its JSON to
`MS.put`; the pages build their elements from text nodes only, so no text from the data (a model's
answer among them) is ever parsed as HTML."""

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any, Optional

from ms.report.common.runs import slug
from ms.report.context import Report
from ms.report.html.front import front_data
from ms.report.html.rundata import run_data

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
ASSETS = ("core.js", "front.js", "run.js", "memory.js", "claim.js", "style.css")
# What the site writes into its folder; a rewrite removes these first, and nothing else.
OWN = ("index.html", "assets", "data", "figures")


def _plain(value: Any) -> Any:
    """JSON-ready: NaN and infinities (which JSON cannot carry) become null, keys become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def script(key: str, data: Any) -> str:
    """A data file: `MS.put("<key>", <JSON>);`. JSON is a JavaScript expression, U+2028/2029 included."""
    return f"MS.put({json.dumps(key)}, {json.dumps(_plain(data), ensure_ascii=False, separators=(',', ':'))});\n"


def _clear(site: Path) -> None:
    for name in OWN:
        path = site / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def write_site(site: Path, report: Report) -> Path:
    """The site for the report's runs in folder `site`; returns its index.html."""
    _clear(site)
    (site / "assets").mkdir(parents=True)
    (site / "data").mkdir()
    shutil.copyfile(STATIC / "index.html", site / "index.html")
    for name in ASSETS:
        shutil.copyfile(STATIC / name, site / "assets" / name)
    figures = {}
    for title, png in report.figures.items():
        (site / "figures").mkdir(exist_ok=True)
        name = slug(png.name)
        shutil.copyfile(png, site / "figures" / name)
        figures[title] = name
    front = front_data(report, figures)
    sharing: dict[str, dict] = {}
    for i, run in enumerate(report.runs):
        data = run_data(run, report.runs, report.metric, report.sharing_fill, front["runs"][i]["label"])
        matrix: Optional[dict] = data.get("sharing")
        if matrix is not None:  # the front page draws the matrix; the run's file keeps its cells' retrievals
            sharing[str(i)] = {k: v for k, v in matrix.items() if k != "cells"}
        (site / "data" / f"run-{i}.js").write_text(script(f"run-{i}", data), encoding="utf-8")
    front["sharing"] = sharing
    (site / "data" / "site.js").write_text(script("site", front), encoding="utf-8")
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    log.info("site written to %s (%.1f MB)", site, size / 1e6)
    return site / "index.html"
