"""The sharing heatmap: each agent's share of retrievals by writer (count in the cell) beside the mean
gain of those retrievals with its 95% CI, one figure per run."""

import numpy as np
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure

from ms.common.stats import Estimate
from ms.report.common.runs import metric_label
from ms.report.figures.canvas import fitted, new_figure
from ms.report.sharing.counts import ALL, Sharing, row_label


def heatmap(s: Sharing, title: str) -> Figure:
    """Left: each agent's share of retrievals by writer agent and backbone (count in the cell); right:
    the mean gain of those retrievals with its 95% CI. Lines part domains and the backbone block."""
    rows = s.rows[:-1]
    columns = [c for c in s.columns if c.split("=")[0] in ("agent", "backbone", "run", "family")]
    share = np.array([[s.count(r, c) / max(s.count(r, ALL), 1) for c in columns] for r in rows])
    gains = np.array([[s.estimate(r, c).mean if s.count(r, c) else None for c in columns] for r in rows], dtype=float)
    fig = new_figure(max(8.0, 0.7 * len(columns) * 2 + 3), 0.5 * len(rows) + 3)
    left, right = fig.subplots(1, 2, sharey=True)
    shown = left.imshow(share, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    fig.colorbar(shown, ax=left, shrink=0.8, label="share of the agent's retrievals")
    finite = np.abs(gains[np.isfinite(gains)])
    halfrange = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    drawn = right.imshow(np.ma.masked_invalid(gains), cmap="RdBu", aspect="auto", norm=CenteredNorm(0, halfrange))
    fig.colorbar(drawn, ax=right, shrink=0.8, label=f"mean gain vs k = 0 ({metric_label(s.metric)})")
    agent_columns = sum(c.startswith("agent=") for c in columns)
    for ax in (left, right):
        for i, r in enumerate(rows):
            for j, c in enumerate(columns):
                n = s.count(r, c)
                if ax is left and s.withheld(r, c):  # the rule withheld this writer (its seeds aside)
                    ax.text(j, i + 0.3, "withheld", ha="center", va="center", fontsize=5, color="firebrick")
                if n:
                    g = gains[i, j]
                    text = str(n) if ax is left else (_gain_cell(s.estimate(r, c)) if np.isfinite(g) else "")
                    dark = share[i, j] > 0.6 if ax is left else abs(g) > 0.6 * halfrange  # white on dark cells
                    ax.text(
                        j,
                        i,
                        text,
                        ha="center",
                        va="center",
                        fontsize=7 if ax is left else 5.5,
                        color="white" if dark else "black",
                    )
        for i in range(1, len(rows)):  # domain boundaries; the agent columns start with the rows' agents
            if s.domains[rows[i]] != s.domains[rows[i - 1]]:
                ax.axhline(i - 0.5, color="grey", lw=0.8)
                ax.axvline(i - 0.5, color="grey", lw=0.8)
        ax.axvline(agent_columns - 0.5, color="black", lw=1.5)
        for block in ("run=", "family="):  # the blocks of this run / another run, same / other backbone
            if any(c.startswith(block) for c in columns):
                ax.axvline(columns.index(next(c for c in columns if c.startswith(block))) - 0.5, color="black", lw=1.5)
        ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(rows)), [row_label(s, r) for r in rows], fontsize=8)
        ax.set_xlabel("writer")
    left.set_ylabel("retrieving agent")
    left.set_title("who wrote the retrieved memories (count; colour: share)", fontsize=9)
    right.set_title(
        "mean gain of those retrievals [95% CI] (their question at k > 0 minus k = 0)"
        if s.baseline
        else "no k = 0 run to pair with",
        fontsize=9,
    )
    fig.suptitle(fitted(title, fig))
    return fig


def _gain_cell(e: Estimate) -> str:
    """The mean, and its CI on a second line (too few questions for one: said so)."""
    interval = f"[{e.lo:+.2f}, {e.hi:+.2f}]" if e.lo is not None and e.hi is not None else f"(n={e.n}, no CI)"
    return f"{e.mean:+.2f}\n{interval}"
