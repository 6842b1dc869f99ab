"""What every report figure is drawn on: a figure on Agg outside pyplot, its title fitted to its width,
and its PNG and PDF."""

import textwrap
from pathlib import Path

from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties


def fitted(title: str, fig: Figure) -> str:
    """The title broken into lines the figure's width holds: a suptitle is centred and never wrapped by
    matplotlib, so a long one (a run's condition in words) would be clipped at both edges."""
    size = FontProperties(size=rcParams["figure.titlesize"]).get_size_in_points()
    # a character of the default sans-serif is about 0.6 of the font size wide, on average
    width = max(20, int(fig.get_figwidth() * 72 * 0.95 / (0.6 * size)))
    return "\n".join(wrapped for line in title.splitlines() for wrapped in textwrap.wrap(line, width) or [""])


def new_figure(width: float, height: float) -> Figure:
    """A figure on Agg with constrained layout, outside pyplot, for every report figure."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state or any GUI backend
    return fig


def save_figure(fig: Figure, out: Path, stem: str) -> str:
    """The figure as out/stem.png and .pdf; the PNG's name, as the pages link it. The PDF is written
    without its creation date, so the same runs give the same bytes (the PNG carries none)."""
    fig.savefig(out / f"{stem}.png", dpi=150)
    fig.savefig(out / f"{stem}.pdf", dpi=150, metadata={"CreationDate": None})
    return f"{stem}.png"
