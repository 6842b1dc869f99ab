"""The report's figure renderers: one curve and CI band per agent and scope, a one-fill figure as a
point with its CI bar, legends off the data. Shared helpers: tests/test_report.py."""

from __future__ import annotations

import pytest
from test_report import (
    AGENTS,
    DOMAINS,
)

from ms.common.stats import Estimate
from ms.report import figure4, pool_growth


def test_figure_renderers_draw_one_curve_and_band_per_agent_and_scope():
    curves = {
        a: {20: Estimate(0.1 * i, 0.1 * i - 0.02, 0.1 * i + 0.02, 10), 100: Estimate(0.2 * i, None, None, 1)}
        for i, a in enumerate(AGENTS)
    }
    fig = figure4(curves, "t", "BERTScore P")
    assert [len(ax.lines) for ax in fig.axes] == [len(agents) for agents in DOMAINS.values()]
    assert [len(ax.collections) for ax in fig.axes] == [len(agents) for agents in DOMAINS.values()]  # CI bands
    band = fig.axes[0].collections[0].get_paths()[0].vertices
    sonnet = list(AGENTS).index(DOMAINS["literary"][0])
    assert band[:, 1].min() == pytest.approx(0.1 * sonnet - 0.02)  # drawn only where a fill has a CI
    no_ci = figure4({a: {20: Estimate(0.5, None, None, 1)} for a in AGENTS}, "t", "P")
    assert all(not ax.collections for ax in no_ci.axes) and all(ax.lines for ax in no_ci.axes)
    decisions = [
        {"agent": a, "scope": s, "pool_size": n, "accepted": ok}
        for a, s, n, ok in [
            ("limerick", "literary", 6, True),
            ("puzzle", "logic", 5, False),
            ("limerick", "literary", 6, False),
        ]
    ]
    top, bottom = pool_growth(decisions, "t").axes
    assert len(top.lines) == 2 and len(bottom.lines) == 2
    limerick = next(line for line in bottom.lines if line.get_label() == "limerick")
    assert list(limerick.get_ydata()) == [1.0, 0.5]


def test_a_one_fill_figure_is_a_point_with_its_ci_bar_and_legends_sit_off_the_data():
    curves = {a: {100: Estimate(0.1 * i, 0.1 * i - 0.02, 0.1 * i + 0.03, 10)} for i, a in enumerate(AGENTS)}
    fig = figure4(curves, "t", "P")
    fig.canvas.draw()
    index = {a: i for i, a in enumerate(AGENTS)}
    for ax, agents in zip(fig.axes, DOMAINS.values()):
        assert [c.get_label() for c in ax.containers] == list(agents)  # one error bar per agent
        for bar, agent in zip(ax.containers, agents):
            ((x, mean),) = bar.lines[0].get_xydata()
            [(_, lo), (_, hi)] = bar.lines[2][0].get_segments()[0]
            assert (mean, lo, hi) == pytest.approx(
                (0.1 * index[agent], 0.1 * index[agent] - 0.02, 0.1 * index[agent] + 0.03)
            )
            assert 95 < x < 105
        assert list(ax.get_xticks()) == [100] and ax.get_xlim()[1] - ax.get_xlim()[0] <= 20
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0  # below the panel
    decisions = [
        {"agent": a, "scope": AGENTS[a].domain, "pool_size": 5 + i, "accepted": True} for i, a in enumerate(AGENTS)
    ]
    growth = pool_growth(decisions, "t")
    growth.canvas.draw()
    for ax in growth.axes:
        assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1  # right of the plot
