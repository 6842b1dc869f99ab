"""Tables as Markdown, CSV and LaTeX. Our cells carry a 95% CI: Markdown and LaTeX print
'0.41 [0.38, 0.44]' (n in a note, or in the cell where it varies); CSV gives every number its own
column (value, ci_lo, ci_hi, n, replicates) at full precision."""

import csv
import io
import itertools
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence, Union

from ms.common.stats import interval_text
from ms.report.common.conditions import Score

OURS, PAPER, DIFF = "ours", "paper", "ours - paper"
CI_COLUMNS = ("ci_lo", "ci_hi", "n")
Value = Union[Score, float, None]  # ours (with its CI), a published number (none), or missing


@dataclass
class Table:
    title: str
    index: list[str]  # names of the row-label columns
    columns: list[tuple[str, ...]]  # header levels, outermost first
    rows: list[tuple[tuple[str, ...], list[Value]]]  # (row labels, one value per column)
    notes: list[str] = field(default_factory=list)
    show_n: bool = False  # n differs between cells of ours, so each cell says its own


def _number(x: float, signed: bool, digits: int) -> str:
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def value_text(value: Value, missing: str = "–", signed: bool = False, show_n: bool = False, digits: int = 2) -> str:
    """'0.41', or for ours '0.41 [0.38, 0.44]' or '0.41 (n<3, too small)' (plus ' n=20' with
    show_n). Two decimals, as the paper prints."""
    if isinstance(value, Score):
        est = value.est
        if est.mean is None:
            return missing
        text = _number(est.mean, signed, digits) + interval_text(est.lo, est.hi, est.n, digits, signed)
        return text + (f" n={est.n}" if show_n else "")
    return missing if value is None else _number(value, signed, digits)


def table_cells(table: Table, missing: str = "–", show_n: Optional[bool] = None) -> list[list[str]]:
    """Each row's labels and its values in text; `show_n` None: as the table says."""
    show_n = table.show_n if show_n is None else show_n
    return [
        [
            *labels,
            *(value_text(v, missing, DIFF in labels or DIFF in col, show_n) for v, col in zip(values, table.columns)),
        ]
        for labels, values in table.rows
    ]


def n_note(agent_cells: Sequence[Score], overall_cells: Sequence[Score]) -> tuple[str, bool]:
    """A note stating n, and whether each cell must print its own (n differs between agent cells,
    or between overall cells)."""
    agent_n = {s.est.n for s in agent_cells if s.est.mean is not None}
    overall_n = {s.est.n for s in overall_cells if s.est.mean is not None}
    if len(agent_n) > 1 or len(overall_n) > 1:
        return "n differs between cells: each cell gives its own.", True
    if not agent_n and not overall_n:
        return "n: no cell of ours has this metric.", False
    parts = [f"{next(iter(agent_n))} test questions in each agent cell"] * bool(agent_n)
    parts += [f"{next(iter(overall_n))} in each overall cell"] * bool(overall_n)
    return f"n: {', '.join(parts)}.", False


def markdown_grid(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
    """A Markdown table; columns from `numeric_from` on are right-aligned."""

    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    align = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    return "\n".join([line(header), "|" + "|".join(align) + "|", *map(line, rows)])


def to_markdown(table: Table) -> str:
    header = [*table.index, *(" ".join(c) for c in table.columns)]
    notes = "".join(f"- {n}\n" for n in table.notes)
    return f"**{table.title}**\n\n{markdown_grid(header, table_cells(table), len(table.index))}\n\n{notes}"


def id_span(ids: Sequence[int]) -> str:
    """Memory ids in a line of text: the first eight, and how many more."""
    return ", ".join(map(str, ids[:8])) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")


def csv_number(x) -> str:
    """Full precision (repr round-trips a float), blank where missing."""
    return "" if x is None else repr(x)


def estimate_header(name: str) -> list[str]:
    return [name, *(f"{name} {c}" for c in CI_COLUMNS)]


def estimate_row(value: Value) -> list[str]:
    """value, ci_lo, ci_hi, n; a published number fills only the first."""
    if isinstance(value, Score):
        e = value.est
        return [csv_number(e.mean), csv_number(e.lo), csv_number(e.hi), str(e.n) if e.mean is not None else ""]
    return [csv_number(value), "", "", ""]


def csv_text(rows: Iterable[Sequence]) -> str:
    """The rows as CSV, each line ended by "\\n" on every platform."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def to_csv(table: Table) -> str:
    """One column per value; a column holding cells of ours adds its ci_lo, ci_hi, n and replicates."""
    ours = [any(isinstance(values[i], Score) for _, values in table.rows) for i in range(len(table.columns))]
    header = list(table.index)
    for column, has_ci in zip(table.columns, ours):
        name = " ".join(column)
        header += [*estimate_header(name), f"{name} replicates"] if has_ci else [name]
    rows = [header]
    for labels, values in table.rows:
        row = list(labels)
        for value, has_ci in zip(values, ours):
            if has_ci:
                row += [*estimate_row(value), str(value.replicates) if isinstance(value, Score) else ""]
            else:
                row.append(csv_number(value))
        rows.append(row)
    return csv_text(rows)


def _tex(text: str) -> str:
    return re.sub(r"([&%$#_{}])", r"\\\1", str(text))


def to_latex(table: Table) -> str:
    """A booktabs table; upper header levels become spanning \\multicolumn cells."""
    n_index, depth = len(table.index), len(table.columns[0]) if table.columns else 1
    lines = [
        f"% {table.title} (written by ms-report; needs \\usepackage{{booktabs}})",
        *(f"% {_tex(n)}" for n in table.notes),
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex(table.title)}}}",
        r"\begin{tabular}{" + "l" * n_index + "r" * len(table.columns) + "}",
        r"\toprule",
    ]
    for level in range(depth - 1):
        cells, rules, start = [""] * n_index, [], n_index + 1
        for key, group in itertools.groupby(table.columns, key=lambda c: c[: level + 1]):
            width = len(list(group))
            cells.append(rf"\multicolumn{{{width}}}{{c}}{{{_tex(key[-1])}}}")
            if width > 1:  # a rule under a lone column only adds clutter
                rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        lines += [" & ".join(cells) + r" \\", " ".join(rules)]
    lines += [" & ".join(_tex(x) for x in [*table.index, *(c[-1] for c in table.columns)]) + r" \\", r"\midrule"]
    lines += [" & ".join(map(_tex, row)) + r" \\" for row in table_cells(table, "--")]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
