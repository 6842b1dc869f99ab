"""Tables and figures from finished runs, set beside the paper's published numbers.

    ms-report SWEEP_DIR... [--out DIR] [--metric P|R|F1]

Everything is read from what runs leave in their folders (metrics.json, decisions.jsonl,
.hydra/overrides.yaml); nothing is recomputed. Writes into --out (default: SWEEP_DIR/report):
table1/table2 as .md/.csv/.tex, runs.md, figure4_<backbone>.png/.pdf, pool_growth_<run>.png,
ablation.md/.csv (when the runs hold more than one retriever/memory combination) and summary.md. Functions that render take data and return text or a Figure, so tests can check them.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ms.agents import DOMAINS
from ms.scorer import DECISIONS_FILE

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.json"
PAPER_TABLES = Path(__file__).with_name("paper_tables.yaml")
METRICS = ("P", "R", "F1")
OURS, PAPER, DIFF = "ours", "paper", "ours - paper"
FIGURE4_K, FIGURE4_POOL = 3, "domain"  # the paper's Figure 4 setting
DOMAIN_TITLES = {"literary": "Literary creation", "logic": "Unconventional logic", "plan": "Plan generation"}
SELECTION_RULE = (
    "Tables 1-2 and Figure 4 use only runs with retriever=dense and plain memory (memory=plain, or no memory "
    "field: runs from before it existed). When several of those claim the same "
    "(backbone, k, pool) cell, a run with memory train on (learned) beats a frozen one, then the most "
    "recently finished one (metrics.json time) wins. Every other run is listed under 'Other runs' in runs.md, "
    "and retriever/memory variants of a cell are compared in ablation.md.")
TABLE_RETRIEVER, TABLE_MEMORY = "dense", "plain"
# Ablation rows, in this order; a label or policy not listed here follows, sorted.
RETRIEVER_LABELS = ("random", "bm25", "dense-frozen", "dense-learned", "composite-frozen", "composite")
MEMORY_POLICIES = ("plain", "stm_ltm")

Cell = tuple[str, int, str]  # (backbone, k, pool)


# ---- the paper's numbers -------------------------------------------------------------------

@dataclass(frozen=True)
class PaperTables:
    source: str
    metric: str  # what the published numbers are, in words
    metric_key: str  # which of P, R, F1 they are; differences only make sense against the same one
    backbones: tuple[str, ...]
    agents: tuple[str, ...]  # the paper's row order
    table1_pool: str
    table1: dict[tuple[int, str], dict[str, float]]  # (k, backbone) -> agent -> score
    table2_k: int
    table2: dict[tuple[str, str], dict[str, float]]  # (pool, backbone) -> agent -> score


def load_paper_tables(path: Path = PAPER_TABLES) -> PaperTables:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    agents = tuple(raw["agents"])
    t1, t2 = raw["table1"], raw["table2"]
    table1: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    for agent, values in t1["rows"].items():
        if len(values) != len(t1["columns"]):
            raise ValueError(f"{path}: table1 row {agent} has {len(values)} values for {len(t1['columns'])} columns")
        for (k, backbone), value in zip(t1["columns"], values):
            table1[(int(k), backbone)][agent] = float(value)
    table2 = {}
    for row in t2["rows"]:
        if len(row["values"]) != len(agents):
            raise ValueError(f"{path}: table2 row {row['pool']}/{row['backbone']} has {len(row['values'])} values")
        table2[(row["pool"], row["backbone"])] = dict(zip(agents, map(float, row["values"])))
    return PaperTables(source=raw["source"], metric=raw["metric"], metric_key=raw["metric_key"],
                       backbones=tuple(raw["backbones"]), agents=agents, table1_pool=t1["pool"], table1=dict(table1),
                       table2_k=int(t2["k"]), table2=table2)


# ---- finding runs ----------------------------------------------------------------------------

@dataclass
class Run:
    name: str  # unique and file-name safe: the folder's path under its sweep dir
    path: Path
    metrics: dict
    overrides: list[str]
    finished: float  # metrics.json mtime, the last tie-break of SELECTION_RULE

    @property
    def fields(self) -> dict:
        return self.metrics["run"]

    @property
    def cell(self) -> Cell:
        return self.fields["backbone"], int(self.fields["k"]), self.fields["pool"]

    @property
    def memory(self) -> str:
        """The memory policy; runs from before the field existed used plain memory."""
        policy = self.fields.get("memory") or (self.metrics.get("memory") or {}).get("policy")
        return str(policy or "plain")

    @property
    def retriever_label(self) -> str:
        """random, bm25, dense-frozen/dense-learned, composite-frozen/composite (learned), or the raw name."""
        name = str(self.fields.get("retriever"))
        learned = bool(self.fields.get("learned"))
        if name == "dense":
            return "dense-learned" if learned else "dense-frozen"
        if name == "composite":
            return "composite" if learned else "composite-frozen"
        return name

    @property
    def accepted(self) -> Optional[int]:
        """Stream questions whose answers the gate admitted to the pool; None where not recorded."""
        counts = (self.metrics.get("stream") or {}).get("accepted")
        return sum(int(n) for n in counts.values()) if isinstance(counts, dict) else None

    @property
    def consolidation(self) -> Optional[dict]:
        return (self.metrics.get("memory") or {}).get("consolidation") or None

    @property
    def last_fill(self) -> str:
        return max(self.metrics["fills"], key=int)

    def per_agent(self, metric: str, fill: Optional[str] = None) -> dict[str, Optional[float]]:
        summary = self.metrics["fills"][fill or self.last_fill]
        return {agent: scores.get(metric) for agent, scores in summary["per_agent"].items()}

    def overall(self, metric: str) -> Optional[float]:
        return self.metrics["fills"][self.last_fill]["overall"].get(metric)

    def curves(self, metric: str) -> dict[str, dict[int, Optional[float]]]:
        """agent -> fill (%) -> score, for Figure 4."""
        out: dict[str, dict[int, Optional[float]]] = defaultdict(dict)
        for fill in self.metrics["fills"]:
            for agent, value in self.per_agent(metric, fill).items():
                out[agent][int(fill)] = value
        return dict(out)

    @property
    def scorer(self) -> str:
        """The BERTScore model and layer, as titles and notes name them."""
        b = self.metrics.get("bertscore", {})
        return f"{b.get('model', 'unknown model')}, layer {b.get('num_layers', '?')}"


@dataclass
class Skipped:
    path: Path
    reason: str


def _read_metrics(folder: Path) -> tuple[Optional[dict], str]:
    """A run's metrics, or None and why the folder is an incomplete cell."""
    path = folder / METRICS_FILE
    if not path.exists():
        return None, "no metrics.json (still running, or failed)"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        return None, f"unreadable metrics.json ({e})"
    if not isinstance(metrics, dict) or metrics.get("complete") is not True:
        return None, "metrics.json does not say complete: true"
    if not {"backbone", "k", "pool"} <= set(metrics.get("run") or {}) or not metrics.get("fills"):
        return None, "metrics.json lacks its run fields (backbone, k, pool) or fill results"
    return metrics, ""


def _read_overrides(folder: Path) -> list[str]:
    path = folder / ".hydra" / "overrides.yaml"
    return [str(o) for o in yaml.safe_load(path.read_text(encoding="utf-8")) or []] if path.exists() else []


def _slug(text: str) -> str:
    return re.sub(r"[^\w.,=+-]", "_", text)


def find_runs(roots: Sequence[Path]) -> tuple[list[Run], list[Skipped]]:
    """Every run folder under the roots: one holding metrics.json or a Hydra .hydra folder."""
    runs, skipped, seen = [], [], set()
    for root in (Path(r).resolve() for r in roots):
        folders = {p.parent for p in root.rglob(METRICS_FILE)} | {p.parent for p in root.rglob(".hydra") if p.is_dir()}
        for folder in sorted(folders - seen):
            seen.add(folder)
            metrics, problem = _read_metrics(folder)
            if metrics is None:
                log.warning("skipped incomplete run %s: %s", folder, problem)
                skipped.append(Skipped(folder, problem))
                continue
            # Sweep folders are named by their overrides, so the relative path says what the run is;
            # the same name under two sweep dirs gets its sweep dir's name in front.
            name = _slug("__".join(folder.relative_to(root).parts) or folder.name)
            taken = {r.name for r in runs}
            if name in taken:
                name = _slug(f"{root.name}__{name}")
            base, i = name, 2
            while name in taken:
                name, i = f"{base}_{i}", i + 1
            runs.append(Run(name, folder, metrics, _read_overrides(folder), (folder / METRICS_FILE).stat().st_mtime))
    return runs, skipped


def select(runs: Sequence[Run]) -> tuple[dict[Cell, Run], dict[str, str]]:
    """The run that speaks for each cell (SELECTION_RULE), and why each other run does not."""
    def rank(run: Run):
        return bool(run.fields.get("learned")), run.finished, run.name

    def eligible(run: Run) -> bool:
        return run.fields.get("retriever") == TABLE_RETRIEVER and run.memory == TABLE_MEMORY

    chosen: dict[Cell, Run] = {}
    for run in runs:
        if eligible(run) and (run.cell not in chosen or rank(run) > rank(chosen[run.cell])):
            chosen[run.cell] = run
    why_not = {}
    for run in runs:
        if run.fields.get("retriever") != TABLE_RETRIEVER:
            why_not[run.name] = f"retriever={run.fields.get('retriever')} (the tables use dense only)"
        elif run.memory != TABLE_MEMORY:
            why_not[run.name] = f"memory={run.memory} (the tables use plain memory only; see ablation.md)"
        elif chosen[run.cell] is not run:
            why_not[run.name] = f"its cell is taken by {chosen[run.cell].name}"
    return chosen, why_not


def used_in(cell: Cell, paper: PaperTables) -> list[str]:
    _, k, pool = cell
    fits = {"Table 1": pool == paper.table1_pool, "Table 2": k == paper.table2_k,
            "Figure 4": (k, pool) == (FIGURE4_K, FIGURE4_POOL)}
    return [name for name, ok in fits.items() if ok]


# ---- tables ----------------------------------------------------------------------------------

@dataclass
class Table:
    title: str
    index: list[str]  # names of the row-label columns
    columns: list[tuple[str, ...]]  # header levels, outermost first
    rows: list[tuple[tuple[str, ...], list[Optional[float]]]]  # (row labels, one value per column)
    notes: list[str] = field(default_factory=list)


def _beside(ours: Optional[dict], paper: Optional[dict], comparable: bool) -> list[tuple[str, dict]]:
    """Our scores, the paper's, and ours - paper where both exist and measure the same thing."""
    out = [(source, values) for source, values in [(OURS, ours), (PAPER, paper)] if values is not None]
    if ours is not None and paper is not None and comparable:
        out.append((DIFF, {a: v - paper[a] for a, v in ours.items() if v is not None and a in paper}))
    return out


def _order(found, preferred: Sequence[str]) -> list[str]:
    """The paper's order, with anything it lacks sorted in front (our own backbones first)."""
    return sorted(set(found) - set(preferred)) + list(preferred)


def _notes(chosen: Sequence[Run], paper: PaperTables, where: str, metric: str) -> list[str]:
    notes = []
    if chosen:
        scorers = sorted({r.scorer for r in chosen})
        notes.append(f"ours: BERTScore {metric} ({'; '.join(scorers)}) from our runs, each at its last memory fill"
                     + "".join(f"; {r.name} stops at {r.last_fill}%" for r in chosen if r.last_fill != "100") + ".")
    else:
        notes.append("No finished run fits this table: only the paper's numbers are shown.")
    notes.append(f"paper: {paper.source}, {where}; {paper.metric}.")
    if metric != paper.metric_key:
        notes.append(f"No differences: the paper reports BERTScore {paper.metric_key}, this report {metric}.")
    else:
        notes.append("ours - paper is given where the backbone is one of the paper's; it also carries the change "
                     "of BERTScore model, so read it as a rough comparison.")
    outside = sorted({r.fields["backbone"] for r in chosen} - set(paper.backbones))
    if outside:
        notes.append(f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} not among the paper's backbones "
                     f"({', '.join(paper.backbones)}): shown beside the paper's columns, without differences.")
    return notes


def table1(chosen: dict[Cell, Run], paper: PaperTables, metric: str) -> Table:
    """Domain-pool, agents x (k-shot x backbone), our columns beside the paper's."""
    runs = {(k, b): run for (b, k, pool), run in chosen.items() if pool == paper.table1_pool}
    ours = {key: run.per_agent(metric) for key, run in runs.items()}
    agents = _order({a for scores in ours.values() for a in scores}, paper.agents)
    columns, values = [], []
    for k in sorted({k for k, _ in ours} | {k for k, _ in paper.table1}):
        for backbone in _order({b for _, b in ours}, paper.backbones):
            for source, scores in _beside(ours.get((k, backbone)), paper.table1.get((k, backbone)),
                                          metric == paper.metric_key):
                columns.append((f"{k}-shot", backbone, source))
                values.append(scores)
    return Table(title=f"Table 1: BERTScore {metric}, Domain-pool, k-shot x backbone", index=["agent"],
                 columns=columns, rows=[((a,), [v.get(a) for v in values]) for a in agents],
                 notes=_notes(list(runs.values()), paper, "Table 1", metric))


def table2(chosen: dict[Cell, Run], paper: PaperTables, metric: str) -> Table:
    """k = 3: (pool x backbone) rows, agents as columns; our rows beside the paper's."""
    runs = {(pool, b): run for (b, k, pool), run in chosen.items() if k == paper.table2_k}
    ours = {key: run.per_agent(metric) for key, run in runs.items()}
    agents = _order({a for scores in ours.values() for a in scores}, paper.agents)
    rows = []
    for pool in _order({p for p, _ in ours}, ["domain", "single"]):
        for backbone in _order({b for _, b in ours}, paper.backbones):
            for source, scores in _beside(ours.get((pool, backbone)), paper.table2.get((pool, backbone)),
                                          metric == paper.metric_key):
                rows.append(((pool.capitalize(), backbone, source), [scores.get(a) for a in agents]))
    return Table(title=f"Table 2: BERTScore {metric} at k = {paper.table2_k}, Domain-pool vs Single-pool",
                 index=["pool", "backbone", "source"], columns=[(a,) for a in agents], rows=rows,
                 notes=_notes(list(runs.values()), paper, "Table 2", metric))


def _cell_text(value: Optional[float], signed: bool, missing: str) -> str:
    if value is None:
        return missing
    return f"{value:+.2f}" if signed else f"{value:.2f}"  # two decimals, as the paper prints


def _cells(table: Table, missing: str) -> list[list[str]]:
    return [[*labels, *(_cell_text(v, DIFF in labels or DIFF in col, missing) for v, col in zip(values, table.columns))]
            for labels, values in table.rows]


def markdown_grid(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
    """A Markdown table; columns from `numeric_from` on are right-aligned."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    align = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    return "\n".join([line(header), "|" + "|".join(align) + "|", *map(line, rows)])


def to_markdown(table: Table) -> str:
    header = [*table.index, *(" ".join(c) for c in table.columns)]
    notes = "".join(f"- {n}\n" for n in table.notes)
    return f"**{table.title}**\n\n{markdown_grid(header, _cells(table, '–'), len(table.index))}\n\n{notes}"


def to_csv(table: Table) -> str:
    """Full precision (repr round-trips a float), blank where a value is missing."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*table.index, *(" ".join(c) for c in table.columns)])
    for labels, values in table.rows:
        writer.writerow([*labels, *("" if v is None else repr(v) for v in values)])
    return buf.getvalue()


def _tex(text: str) -> str:
    return re.sub(r"([&%$#_{}])", r"\\\1", str(text))


def to_latex(table: Table) -> str:
    """A booktabs table; upper header levels become spanning \\multicolumn cells."""
    n_index, depth = len(table.index), len(table.columns[0]) if table.columns else 1
    lines = [f"% {table.title} (written by ms-report; needs \\usepackage{{booktabs}})",
             *(f"% {_tex(n)}" for n in table.notes),
             r"\begin{table}[t]", r"\centering", rf"\caption{{{_tex(table.title)}}}",
             r"\begin{tabular}{" + "l" * n_index + "r" * len(table.columns) + "}", r"\toprule"]
    for level in range(depth - 1):
        cells, rules, start = [""] * n_index, [], n_index + 1
        for key, group in itertools.groupby(table.columns, key=lambda c: c[:level + 1]):
            width = len(list(group))
            cells.append(rf"\multicolumn{{{width}}}{{c}}{{{_tex(key[-1])}}}")
            if width > 1:  # a rule under a lone column only adds clutter
                rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        lines += [" & ".join(cells) + r" \\", " ".join(rules)]
    lines += [" & ".join(_tex(x) for x in [*table.index, *(c[-1] for c in table.columns)]) + r" \\", r"\midrule"]
    lines += [" & ".join(map(_tex, row)) + r" \\" for row in _cells(table, "--")]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


# ---- ablation: retriever x memory policy within a cell ---------------------------------------

ABLATION_INDEX = ("retriever", "memory", "run")


@dataclass
class AblationRow:
    retriever: str  # Run.retriever_label
    memory: str
    run: str
    scores: dict[str, Optional[float]]  # agent -> metric at the run's last fill
    overall: Optional[float]
    accepted: Optional[int]  # stream questions admitted to the pool


@dataclass
class Ablation:
    cell: Cell
    agents: list[str]  # the paper's order, only agents some row has
    rows: list[AblationRow]  # RETRIEVER_LABELS order, then MEMORY_POLICIES order
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        backbone, k, pool = self.cell
        return f"{backbone}, k = {k}, {pool} pool"


def _rank_of(value: str, order: Sequence[str]) -> tuple[int, str]:
    return (order.index(value), "") if value in order else (len(order), value)


def combinations(runs: Sequence[Run]) -> set[tuple[str, str]]:
    """The distinct (retriever label, memory policy) pairs among the runs."""
    return {(r.retriever_label, r.memory) for r in runs}


def ablation_tables(runs: Sequence[Run], metric: str, agent_order: Sequence[str]) -> tuple[list[Ablation], list[Cell]]:
    """One table per (backbone, k, pool) cell holding more than one (retriever, memory) combination, and the
    cells left out because all their runs share one. Where two runs share a combination, the most recently
    finished one speaks for it and the other is named in the notes."""
    by_cell: dict[Cell, dict[tuple[str, str], list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by_cell[run.cell][(run.retriever_label, run.memory)].append(run)
    tables, single = [], []
    for cell in sorted(by_cell, key=lambda c: (c[1] != FIGURE4_K, c)):  # the paper's k = 3 first
        combos = by_cell[cell]
        if len(combos) < 2:
            single.append(cell)
            continue
        rows, notes = [], []
        for retriever, memory in sorted(combos, key=lambda c: (_rank_of(c[0], RETRIEVER_LABELS),
                                                              _rank_of(c[1], MEMORY_POLICIES))):
            newest, *older = sorted(combos[(retriever, memory)], key=lambda r: (r.finished, r.name), reverse=True)
            rows.append(AblationRow(retriever, memory, newest.name, newest.per_agent(metric),
                                    newest.overall(metric), newest.accepted))
            if older:
                notes.append(f"{retriever} / {memory}: {newest.name} is the most recent of "
                             f"{1 + len(older)} runs; not shown: {', '.join(r.name for r in older)}.")
            if newest.last_fill != "100":
                notes.append(f"{newest.name} stops at {newest.last_fill}% fill.")
            if newest.consolidation:
                notes.append(f"{newest.name} consolidation: "
                             + ", ".join(f"{k} {v}" for k, v in newest.consolidation.items()) + ".")
        found = {a for row in rows for a in row.scores}
        agents = [a for a in _order(found, agent_order) if a in found]
        tables.append(Ablation(cell, agents, rows, notes))
    return tables, single


def _score_text(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3f}"


def ablation_markdown(tables: Sequence[Ablation], metric: str, single: Sequence[Cell] = (), level: int = 1) -> str:
    """Headed tables, one per cell; `level` is the Markdown heading level of the top heading."""
    h = "#" * level
    out = [f"{h} Ablation: retriever x memory policy (BERTScore {metric})\n",
           f"Runs of the same backbone, k and pool, one row per retriever (random, bm25, dense-frozen, "
           f"dense-learned, composite; -frozen = no memory train) and memory policy (plain, stm_ltm). Scores are "
           f"BERTScore {metric} at each run's last memory fill; 'accepted' counts the stream questions whose "
           f"answers the gate admitted to the pool.\n"]
    for table in tables:
        header = [*ABLATION_INDEX, *table.agents, "overall", "accepted"]
        rows = [[row.retriever, row.memory, row.run, *(_score_text(row.scores.get(a)) for a in table.agents),
                 _score_text(row.overall), "–" if row.accepted is None else str(row.accepted)]
                for row in table.rows]
        out += [f"{h}# {table.title}\n", markdown_grid(header, rows, len(ABLATION_INDEX)) + "\n"]
        out += [f"- {n}" for n in table.notes]
        if table.notes:
            out.append("")
    if single:
        out.append("Not tabled, as all their runs share one combination: "
                   + "; ".join(f"{b}, k = {k}, {p} pool" for b, k, p in single) + ".\n")
    return "\n".join(out)


def ablation_csv(tables: Sequence[Ablation], agent_order: Sequence[str] = ()) -> str:
    """All cells in one long table; full precision, blank where a value is missing."""
    found = {a for t in tables for a in t.agents}
    agents = [a for a in _order(found, agent_order) if a in found]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["backbone", "k", "pool", *ABLATION_INDEX, *agents, "overall", "accepted"])
    for table in tables:
        for row in table.rows:
            writer.writerow([*table.cell, row.retriever, row.memory, row.run,
                             *("" if row.scores.get(a) is None else repr(row.scores[a]) for a in agents),
                             "" if row.overall is None else repr(row.overall),
                             "" if row.accepted is None else row.accepted])
    return buf.getvalue()


# ---- figures ---------------------------------------------------------------------------------

def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state or any GUI backend
    return fig


def figure4(curves: dict[str, dict[int, Optional[float]]], title: str, ylabel: str) -> Figure:
    """One panel per domain, one curve per agent: score against memory fill (%)."""
    fig = _figure(13, 4)
    axes = fig.subplots(1, len(DOMAINS), sharey=True)
    for ax, (domain, agents) in zip(axes, DOMAINS.items()):
        for agent in agents:
            points = sorted((fill, v) for fill, v in curves.get(agent, {}).items() if v is not None)
            if points:
                ax.plot(*zip(*points), marker="o", label=agent)
        ax.set_title(DOMAIN_TITLES.get(domain, domain))
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


def read_decisions(path: Path) -> list[dict]:
    decisions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                decisions.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("%s line %d is not JSON; left out of the pool-growth plot", path, n)
    return decisions


# ---- runs.md and summary.md ------------------------------------------------------------------

def _field_text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def runs_markdown(runs: Sequence[Run], why_not: dict[str, str], paper: PaperTables, metric: str,
                  skipped: Sequence[Skipped]) -> str:
    """Every run with all its run fields and overall score; the ones in the tables first."""
    keys = list(dict.fromkeys(k for r in runs for k in r.fields))
    header = ["run", *keys, "overrides", "last fill", f"overall {metric}", "used in"]

    def row(run: Run, use: str) -> list[str]:
        overall = run.overall(metric)
        return [run.name, *(_field_text(run.fields.get(k, "")) for k in keys), " ".join(run.overrides),
                f"{run.last_fill}%", "–" if overall is None else f"{overall:.3f}", use]

    in_tables = [r for r in runs if r.name not in why_not and used_in(r.cell, paper)]
    others = [r for r in runs if r not in in_tables]
    parts = ["# Runs\n", SELECTION_RULE + "\n", f"## Runs in the tables ({len(in_tables)})\n"]
    parts.append(markdown_grid(header, [row(r, ", ".join(used_in(r.cell, paper))) for r in in_tables], len(header))
                 if in_tables else "None.")
    parts.append(f"\n## Other runs ({len(others)})\n")
    parts.append(markdown_grid(header, [row(r, why_not.get(r.name, "no table shows this k and pool"))
                                        for r in others], len(header)) if others else "None.")
    parts.append(f"\n## Skipped: incomplete ({len(skipped)})\n")
    parts.append("".join(f"- `{s.path}`: {s.reason}\n" for s in skipped) or "None.")
    return "\n".join(parts) + "\n"


def summary_markdown(roots: Sequence[Path], metric: str, runs: Sequence[Run], skipped: Sequence[Skipped],
                     tables: dict[str, Table], figure4s: dict[str, str], growth: dict[str, str],
                     why_not: dict[str, str], paper: PaperTables, ablation: Optional[str] = None) -> str:
    """The report's front page: what was found, what was left out, and every table and figure.
    `ablation` is ablation_markdown(..., level=2) where ablation.md was written, else None."""
    out = ["# ms report\n",
           f"Sweep dirs: {', '.join(f'`{r}`' for r in roots)}. Metric: BERTScore {metric} "
           f"(the paper's code reported {paper.metric_key}). Published numbers: {paper.source}.\n",
           f"## Runs ({len(runs)} complete, {len(skipped)} skipped)\n",
           f"{SELECTION_RULE} All run fields: [runs.md](runs.md).\n"]
    for r in runs:
        overall = r.overall(metric)
        use = (f"not used: {why_not[r.name]}" if r.name in why_not
               else f"used in {', '.join(used_in(r.cell, paper)) or 'no table (none shows this k and pool)'}")
        out.append(f"- `{r.name}`: backbone {r.fields['backbone']}, k={r.cell[1]}, pool {r.cell[2]}, "
                   f"retriever {r.retriever_label}, memory {r.memory}; overall {metric} "
                   f"{'–' if overall is None else f'{overall:.3f}'} at {r.last_fill}% fill; {use}")
    if skipped:
        out.append("\n### Skipped (incomplete cells)\n")
        out += [f"- `{s.path}`: {s.reason}" for s in skipped]
    for stem, table in tables.items():
        out += [f"\n## {table.title}\n", f"Files: [{stem}.md]({stem}.md), [{stem}.csv]({stem}.csv), "
                                         f"[{stem}.tex]({stem}.tex)\n", to_markdown(table)]
    if ablation is not None:
        out += ["", "Files: [ablation.md](ablation.md), [ablation.csv](ablation.csv)\n", ablation]
    out.append(f"\n## Figure 4: BERTScore {metric} against memory fill (k = {FIGURE4_K}, Domain-pool)\n")
    out += [f"![Figure 4, {b}]({png}) ([pdf]({Path(png).with_suffix('.pdf')}))\n" for b, png in figure4s.items()]
    if not figure4s:
        out.append("No dense run at k = 3 with a Domain-pool.\n")
    out.append("\n## Pool growth along the stream\n")
    out += [f"### {name}\n\n![pool growth, {name}]({png})\n" for name, png in growth.items()]
    if not growth:
        out.append("No run has a decisions.jsonl.\n")
    return "\n".join(out) + "\n"


# ---- writing it all --------------------------------------------------------------------------

def write_report(roots: Sequence[Path], out: Path, metric: str = "P", paper: Optional[PaperTables] = None) -> Path:
    """Write every table and figure for the runs under `roots` into `out`; returns summary.md."""
    paper = paper or load_paper_tables()
    runs, skipped = find_runs(roots)
    if not runs and not skipped:
        log.warning("no run folders (metrics.json or .hydra/) under %s", ", ".join(map(str, roots)))
    chosen, why_not = select(runs)
    out.mkdir(parents=True, exist_ok=True)

    tables = {"table1": table1(chosen, paper, metric), "table2": table2(chosen, paper, metric)}
    for stem, table in tables.items():
        for suffix, render in ((".md", to_markdown), (".csv", to_csv), (".tex", to_latex)):
            (out / f"{stem}{suffix}").write_text(render(table), encoding="utf-8")

    ablation = None
    for stale in ("ablation.md", "ablation.csv"):  # a rerun into the same --out must not keep an old one
        (out / stale).unlink(missing_ok=True)
    if len(combinations(runs)) > 1:
        ablations, single = ablation_tables(runs, metric, paper.agents)
        (out / "ablation.md").write_text(ablation_markdown(ablations, metric, single), encoding="utf-8")
        (out / "ablation.csv").write_text(ablation_csv(ablations, paper.agents), encoding="utf-8")
        ablation = ablation_markdown(ablations, metric, single, level=2)

    figure4s = {}
    for (backbone, k, pool), run in sorted(chosen.items()):
        if (k, pool) == (FIGURE4_K, FIGURE4_POOL):
            fig = figure4(run.curves(metric), f"BERTScore {metric} vs memory fill: {backbone}, k = {k}, "
                          f"Domain-pool\nBERTScore model {run.scorer}", f"BERTScore {metric}")
            stem = f"figure4_{_slug(backbone)}"
            for suffix in (".png", ".pdf"):
                fig.savefig(out / f"{stem}{suffix}", dpi=150)
            figure4s[backbone] = f"{stem}.png"

    growth = {}
    for run in runs:
        path = run.path / DECISIONS_FILE
        decisions = read_decisions(path) if path.exists() else []
        if not decisions:
            log.warning("no pool-growth plot for %s: %s missing or empty", run.name, path)
            continue
        f = run.fields
        png = f"pool_growth_{run.name}.png"
        pool_growth(decisions, f"Pool growth: {run.name}\n{f['backbone']}, k = {f['k']}, pool {f['pool']}, "
                               f"retriever {f.get('retriever')}").savefig(out / png, dpi=120)
        growth[run.name] = png

    (out / "runs.md").write_text(runs_markdown(runs, why_not, paper, metric, skipped), encoding="utf-8")
    summary = out / "summary.md"
    summary.write_text(summary_markdown(list(roots), metric, runs, skipped, tables, figure4s, growth, why_not, paper,
                                        ablation), encoding="utf-8")
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="ms-report", description="Tables and figures from ms runs, beside the "
                                     "paper's published numbers.")
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR",
                        help="folders searched recursively for run folders (metrics.json or .hydra/)")
    parser.add_argument("--out", type=Path, help="where to write (default: the first SWEEP_DIR/report)")
    parser.add_argument("--metric", choices=METRICS, default="P",
                        help="BERTScore component; P by default, as the paper's code reported precision")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    missing = [str(d) for d in args.sweep_dirs if not d.is_dir()]
    if missing:
        parser.error(f"not a folder: {', '.join(missing)}")
    summary = write_report(args.sweep_dirs, args.out or args.sweep_dirs[0] / "report", args.metric)
    print(f"report written: {summary}")
    return 0
