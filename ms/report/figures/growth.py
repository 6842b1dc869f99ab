"""The pool-growth plot of every run with decisions: pool size per scope and each agent's running acceptance
rate along the stream; summary.md shows it with the stream's share of each top k (ms.report.sharing.stream_share)."""

import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ms.config.files import DECISIONS_FILE
from ms.report.common.run_labels import file_name, run_labels
from ms.report.common.runs import Run
from ms.report.common.writers import decisions_of
from ms.report.context import Report
from ms.report.figures.canvas import fitted, new_figure
from ms.report.sharing.stream_share import write_stream_share

log = logging.getLogger(__name__)


def pool_growth(decisions: Sequence[dict], title: str) -> Figure:
    """Pool size per scope and each agent's running acceptance rate along the stream."""
    sizes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rates: dict[str, list[tuple[int, float]]] = defaultdict(list)
    seen, taken = Counter(), Counter()
    for i, d in enumerate(decisions, 1):
        sizes[d["scope"]].append((i, d["pool_size"]))
        seen[d["agent"]] += 1
        taken[d["agent"]] += bool(d["accepted"])
        rates[d["agent"]].append((i, taken[d["agent"]] / seen[d["agent"]]))
    fig = new_figure(10, 7)
    top, bottom = fig.subplots(2, 1, sharex=True)
    # Markers keep a scope or agent with a single decision visible (a one-point line draws nothing).
    for scope, points in sorted(sizes.items()):
        top.step(*zip(*points), where="post", marker=".", label=scope)
    for agent, points in sorted(rates.items()):
        bottom.plot(*zip(*points), marker=".", label=agent)
    top.set_ylabel("pool size after the step")
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_ylabel("running acceptance rate")
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_xlabel("stream question")
    for ax in (top, bottom):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.has_data():  # to the right of the plot, off the lines
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.suptitle(fitted(title, fig))
    return fig


def write_growth(runs: Sequence[Run], out: Path) -> dict[str, str]:
    """A pool-growth plot per run with decisions (pool_growth_<run>.png); run name -> its file name."""
    growth, labels = {}, run_labels(runs)
    for run in runs:
        decisions = decisions_of(run.path)
        if not decisions:
            log.warning("no pool-growth plot for %s: %s missing or empty", run.name, run.path / DECISIONS_FILE)
            continue
        png = file_name(run.name, "pool_growth_", ".png")
        # named by its condition in words, as the site names it: a folder's name can be too long for a title
        pool_growth(decisions, f"Pool growth: {labels[run.name]}").savefig(out / png, dpi=120)
        growth[run.name] = png
    return growth


def growth_section(report: Report) -> str:
    """The pool-growth plot of every run with decisions, and under each the stream's share of its top k
    (stream_share.md); summary.md's section."""
    everyone = [*report.runs, *report.screens]  # stream-only runs grew a pool too
    growth, labels = write_growth(everyone, report.out), run_labels(everyone)
    shares = write_stream_share(report.runs, report.out)
    report.figures |= {f"Pool growth: {labels[name]}": report.out / png for name, png in growth.items()}
    shown = [
        f"### {name}\n\n![pool growth, {name}]({png})\n" + (f"\n{shares[name]}\n" if name in shares else "")
        for name, png in growth.items()
    ] or ["No run has a decisions.jsonl.\n"]
    return "".join(f"{part}\n" for part in ["\n## Pool growth along the stream\n", *shown])
