"""Figure 4 (score against memory fill, with 95% CI bands) and the pool-growth plot. Renderers take
data and return a Figure, so tests can look inside."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ms.agents import default_agents, domains
from ms.stats import Estimate

OTHER = "other agents"  # the panel of agents the default agent set does not know


def _panels(agents) -> dict[str, tuple[str, ...]]:
    """Panel title -> its agents: one panel per domain of the default agent set, titled as the
    domain's rubric is (a domain without a rubric file keeps its name), then any other agents."""
    from ms.scorer import RubricNotFound, load_rubric

    panels = {}
    for domain, names in domains(default_agents()).items():
        try:
            panels[load_rubric(domain).title] = names
        except RubricNotFound:
            panels[domain] = names
    known = {a for names in panels.values() for a in names}
    other = tuple(a for a in agents if a not in known)
    return {**panels, OTHER: other} if other else panels


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state or any GUI backend
    return fig


def figure4(curves: dict[str, dict[int, Estimate]], title: str, ylabel: str) -> Figure:
    """One panel per domain, one curve per agent: the mean against memory fill (%), in a shaded
    band of its 95% CI wherever the fill has one."""
    panels = _panels(curves)
    fig = _figure(13 * len(panels) / 3, 4)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, (heading, agents) in zip(axes, panels.items()):
        for agent in agents:
            points = sorted((fill, e) for fill, e in curves.get(agent, {}).items() if e.mean is not None)
            if not points:
                continue
            (line,) = ax.plot([f for f, _ in points], [e.mean for _, e in points], marker="o", label=agent)
            band = [(f, e.lo, e.hi) for f, e in points if e.lo is not None]
            if band:
                ax.fill_between(*zip(*band), color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(heading)
        ax.set_xlabel("memory fill (%)")
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize="small")
    axes[0].set_ylabel(ylabel)
    fig.suptitle(title)
    return fig


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
    fig = _figure(10, 7)
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
        if ax.has_data():
            ax.legend(fontsize="small", ncol=3)
    fig.suptitle(title)
    return fig
