"""Figure 4 (score against memory fill, with 95% CI bands, one panel per domain) and its companion, each
gate's change since its first fill. Renderers take data and return a Figure, so tests can look inside."""

import logging
from pathlib import Path

from matplotlib.figure import Figure

from ms.agents import default_agents, domains
from ms.common.stats import MIN_CI_N, Estimate
from ms.metrics.base import metric_of_key
from ms.report.common.conditions import FIGURE4_K, FIGURE4_POOL
from ms.report.common.gates import by_gate, change_since_first_fill
from ms.report.common.runs import metric_label, slug
from ms.report.context import Report
from ms.report.figures.canvas import new_figure, save_figure

log = logging.getLogger(__name__)

OTHER = "other agents"  # the panel of agents the default agent set does not know
DODGE = 2.0  # fill percentage points between the error bars of one panel's agents at a single fill


def _panels(agents) -> dict[str, tuple[str, ...]]:
    """Panel title -> its agents: one panel per domain of the default agent set, titled as the
    domain's rubric is (a domain without a rubric file keeps its name), then any other agents."""
    from ms.gates.scorer import RubricNotFound, load_rubric

    panels = {}
    for domain, names in domains(default_agents()).items():
        try:
            panels[load_rubric(domain).title] = names
        except RubricNotFound:
            panels[domain] = names
    known = {a for names in panels.values() for a in names}
    other = tuple(a for a in agents if a not in known)
    return {**panels, OTHER: other} if other else panels


def _legend_below(ax) -> None:
    """Below the panel, off the data: a legend inside covers the curves it names."""
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)


def _curve(ax, points: list[tuple[int, Estimate]], label: str) -> None:
    """A line through the (fill, estimate) points' means, in a shaded band of their CIs where they have one."""
    (line,) = ax.plot([f for f, _ in points], [e.mean for _, e in points], marker="o", label=label)
    band = [(f, e.lo, e.hi) for f, e in points if e.lo is not None]
    if band:
        ax.fill_between(*zip(*band), color=line.get_color(), alpha=0.15, linewidth=0)


def figure4(curves: dict[str, dict[int, Estimate]], title: str, ylabel: str) -> Figure:
    """One panel per domain, one curve per agent: the mean against memory fill (%), in a shaded
    band of its 95% CI wherever the fill has one. An agent measured at one fill is a point with its
    CI as an error bar, the agents of a panel set a little apart so that no bar hides another."""
    panels = _panels(curves)
    fig = new_figure(13 * len(panels) / 3, 4.8)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    fills = sorted({f for points in curves.values() for f, e in points.items() if e.mean is not None})
    for ax, (heading, agents) in zip(axes, panels.items()):
        drawn = {a: sorted((f, e) for f, e in curves.get(a, {}).items() if e.mean is not None) for a in agents}
        drawn = {a: points for a, points in drawn.items() if points}
        for i, (agent, points) in enumerate(drawn.items()):
            if len(points) == 1:
                [(fill, e)] = points
                bar = None if e.lo is None else [[e.mean - e.lo], [e.hi - e.mean]]
                ax.errorbar(
                    [fill + (i - (len(drawn) - 1) / 2) * DODGE], [e.mean], yerr=bar, fmt="o", capsize=4, label=agent
                )
                continue
            _curve(ax, points, agent)
        ax.set_title(heading)
        ax.set_xlabel("memory fill (%)")
        ax.set_xticks(fills)
        if len(fills) == 1:  # one fill: a narrow axis around it, not a range of fills never run
            ax.set_xlim(fills[0] - 5 * DODGE, fills[0] + 5 * DODGE)
        ax.grid(alpha=0.3)
        if ax.has_data():
            _legend_below(ax)
    axes[0].set_ylabel(ylabel)
    fig.suptitle(title)
    return fig


def change_by_gate(curves: dict[str, dict[int, Estimate]], title: str, ylabel: str) -> Figure:
    """One line per gate: its change since its first fill against memory fill (%), in a band of its
    paired 95% CI; the line at 0 is no change."""
    fig = new_figure(7, 4.8)
    ax = fig.subplots()
    ax.axhline(0.0, color="grey", linewidth=0.8)
    for gate, points in curves.items():
        drawn = sorted((f, e) for f, e in points.items() if e.mean is not None)
        _curve(ax, drawn, f"gate={gate}, n = {max(e.n for _, e in drawn)}")  # n: test questions paired at each fill
    ax.set_xticks(sorted({f for points in curves.values() for f in points}))
    ax.set_xlabel("memory fill (%)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _legend_below(ax)
    fig.suptitle(title)
    return fig


def figure4_section(report: Report) -> str:
    """Figure 4 of each backbone's condition at its setting, and each gate's change since the first fill where
    the backbone grew under two or more gates (figure4_<backbone>, figure4_gates_<backbone>); summary.md's links."""
    metric, label, out = report.metric, metric_label(report.metric), report.out
    kind = metric_of_key(metric)
    records_its_model = kind is None or kind.record_key is not None  # BERTScore's: metrics.json `bertscore`
    drawn = {}  # what the figure shows -> its PNG
    for (backbone, k, pool), cond in sorted(report.chosen.items()):
        if (k, pool) != (FIGURE4_K, FIGURE4_POOL):
            continue
        if metric not in cond.first.measured:
            log.warning("no Figure 4 for %s: %s did not measure %s", backbone, cond.name, metric)
            continue
        scorer = f"\nBERTScore model {cond.scorer}" if records_its_model else ""
        title = (
            f"{label} vs memory fill: {backbone}, k = {k}, "
            f"Domain-pool (95% CI: band, or bar at a single fill; none at n < {MIN_CI_N}){scorer}"
        )
        drawn[backbone] = save_figure(figure4(cond.curves(metric), title, label), out, f"figure4_{slug(backbone)}")
    for backbone, gates in by_gate(report.conds, report.chosen).items():
        fig = change_by_gate(
            {gate: change_since_first_fill(c, metric) for gate, c in gates.items()},
            f"Change since the first fill, by gate: {backbone}, k = {FIGURE4_K}, Domain-pool\n"
            "(paired over the same test questions; band: 95% CI)",
            f"change in {label}",
        )
        name = f"{backbone}, change since the first fill by gate"
        drawn[name] = save_figure(fig, out, f"figure4_gates_{slug(backbone)}")
    report.figures |= {f"Figure 4, {name}": out / png for name, png in drawn.items()}
    shown = [f"![Figure 4, {name}]({png}) ([pdf]({Path(png).with_suffix('.pdf')}))\n" for name, png in drawn.items()]
    heading = f"\n## Figure 4: {label} against memory fill (k = {FIGURE4_K}, Domain-pool)\n"
    return "".join(f"{line}\n" for line in [heading, *(shown or ["No dense run at k = 3 with a Domain-pool.\n"])])
