"""Who helped whom: for each agent of a run, whose memories it retrieved (which agents, which
backbones, its own agent, another agent of its domain or another domain) and the gain in the metric
those retrievals came with against k = 0. Per run, <out>/sharing/<run>.csv and <run>.png; sharing.md
says what each number is."""

from __future__ import annotations

import csv
import io
import logging
import math
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure
from scipy import stats

from ms.common.stats import CONFIDENCE, MIN_CI_N, RESAMPLES, SEED, Estimate
from ms.report.baseline import Baseline, find_baseline
from ms.report.figures import new_figure
from ms.report.grants import Grants
from ms.report.runs import Item, Run, metric_label
from ms.report.writers import POISONER, UNWRITTEN, Writer, agent_backbones, own_run_id, read_writers, run_config

log = logging.getLogger(__name__)

FOLDER = "sharing"
ALL = "all"
OWN, SAME_DOMAIN, OTHER_DOMAIN = "own agent", "same domain", "other domain"
# Which run admitted a memory, where the pool was shared with other runs (each `ms-run` process of a
# multi-process run is a run of its own): a cross-process retrieval is one of another run's memories.
THIS_RUN, OTHER_RUN, UNRECORDED = "this run", "another run", "unrecorded"
# Whether the backbone that wrote a memory is the retrieving agent's own, where the run's agents run on
# more than one backbone (`agents.NAME.backbone`): a cross-family retrieval is one of the other's memories.
SAME_BACKBONE, OTHER_BACKBONE = "same backbone", "other backbone"
# A retrieved id whose writer no file of the run records: neither its pool file (or the PostgreSQL pool)
# nor memories.csv, nor, for one that left the pool, decisions.jsonl (ms.report.forgotten).
UNKNOWN = "(writer not recorded)"
QUANTITIES = ("retrievals", "fraction", "questions", "gain", "gain_ci_lo", "gain_ci_hi", "gain_n")
DEFINITIONS = (
    "A retrieval is one memory id in one test question's prompt (`retrieved` in predictions.jsonl) at the "
    "fill shown, so each question adds k. Rows are the retrieving agents; the `agent=` columns are the "
    "agents that wrote the memories, `backbone=` the backbone that wrote them (`seed`: the data's own pairs), "
    "and `source=` whether the writer is the retrieving agent itself, another agent of its domain, or an "
    "agent of another domain. Where other runs wrote to the same pool (a shared pool.path, or a PostgreSQL pool "
    "that several `ms-run` processes share), `run=` says whether the memory was admitted by this run or by "
    "another one (`unrecorded`: a pool that did not record it); which other runs, is listed under the table. "
    "Where the run's agents run on more than one backbone, `family=` says whether the backbone that wrote the "
    "memory is the retrieving agent's own (`same backbone`) or another (`other backbone`), or that no backbone "
    "wrote it (`seed`); each agent's backbone is shown beside its name. "
    "A poisoning writer's memories (`poison=...`) count under their own columns, `poisoner` in the backbone, "
    "source and family blocks: no model wrote them, and the poisoner is no agent of its victim's domain. "
    "A memory that left the pool after the run (`ms-data forget`) still counts under the writer the run's files "
    "record (memories.csv, decisions.jsonl); how many retrievals were of such memories is said under the table. "
    "Each block of columns sums to the row's retrievals (`all`). "
    "**Gain**: each k > 0 question is paired with the same (agent, test question) evaluated at k = 0 in a "
    "run of the same backbone, data and prompt among the runs given; a retrieval's gain is that question's "
    "metric difference (k > 0 minus k = 0; higher is better), and a cell's gain is the mean over the "
    "retrievals it counts, i.e. each question weighted by how many of its k memories the cell holds. The "
    "95% CI resamples the cell's questions (bootstrap). The whole prompt's gain is credited to each of its "
    "memories, so a cell's gain is what its retrievals came with, not what they caused. "
    "Where the run retrieved under an access rule (`access=rule`: each agent reads only the writers it is granted), "
    "the rule's grants stand beside the retrievals: the `granted` rows of the CSV (1 granted, 0 withheld, per "
    "`agent=` column), the table's last column, and `withheld` under those writers in the heatmap."
)


@dataclass
class Sharing:
    run: Run
    fill: int
    metric: str
    rows: list[str]  # retrieving agents, then ALL
    columns: list[str]  # agent=..., backbone=..., source=..., [run=...], [family=...], ALL
    weights: dict[tuple[str, str], Counter]  # (row, column) -> test question -> retrievals
    gain: dict[Item, float]  # per paired question: k > 0 minus k = 0
    baseline: Optional[Baseline]
    domains: dict[str, Optional[str]]  # retrieving agent -> its domain
    other_runs: dict[str, Counter] = field(default_factory=dict)  # retrieving agent or ALL -> other run -> count
    backbone_of: dict[str, str] = field(default_factory=dict)  # retrieving agent -> its backbone, where they differ
    gone: Counter = field(default_factory=Counter)  # why a memory left the pool -> retrievals of such memories
    unknown: set[int] = field(default_factory=set)  # retrieved ids whose writer no file of the run records
    _estimates: dict[tuple[str, str], Estimate] = field(default_factory=dict)  # bootstraps are the slow part

    def count(self, row: str, column: str) -> int:
        return sum(self.weights[row, column].values())

    @property
    def grants(self) -> Grants:
        """The access rule the run retrieved under (open where it recorded none)."""
        return Grants.of(self.run.fields)

    def withheld(self, row: str, column: str) -> bool:
        """Whether the rule withheld the writer of an agent= column from the row's agent."""
        return column.startswith("agent=") and row != ALL and not self.grants.granted(row, column.split("=", 1)[1])

    def estimate(self, row: str, column: str) -> Estimate:
        if (row, column) not in self._estimates:
            paired = [(w, self.gain[q]) for q, w in self.weights[row, column].items() if q in self.gain]
            self._estimates[row, column] = weighted_mean_ci([w for w, _ in paired], [g for _, g in paired])
        return self._estimates[row, column]


def weighted_mean_ci(weights: Sequence[float], values: Sequence[float]) -> Estimate:
    """sum(w * v) / sum(w) with a 95% bootstrap CI that resamples the (w, v) pairs together; n is sum(w)."""
    w, v = np.asarray(weights, dtype=float), np.asarray(values, dtype=float)
    if not len(w):
        return Estimate(None, None, None, 0)
    mean, n = float(w @ v / w.sum()), int(w.sum())
    if len(w) < MIN_CI_N:
        return Estimate(mean, None, None, n)
    if np.ptp(v) == 0:
        return Estimate(mean, mean, mean, n)

    def ratio(w, v, axis=-1):
        return (w * v).sum(axis=axis) / w.sum(axis=axis)

    for method in ("BCa", "percentile"):  # BCa is undefined on some small skewed samples
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = stats.bootstrap(
                (w, v),
                ratio,
                paired=True,
                vectorized=True,
                confidence_level=CONFIDENCE,
                n_resamples=RESAMPLES,
                method=method,
                random_state=SEED,
            ).confidence_interval
        if math.isfinite(ci.low) and math.isfinite(ci.high):
            break
    return Estimate(mean, float(ci.low), float(ci.high), n)


def _writer_columns(
    writers: dict[int, Writer], rows: list[str], seen: set[str], shared: bool, families: bool
) -> list[str]:
    agents = [*rows, *sorted({w.agent for w in writers.values()} - set(rows))]
    backbones = sorted({w.backbone for w in writers.values()}, key=lambda b: (b not in UNWRITTEN, b))
    missing = [UNKNOWN] if UNKNOWN in seen else []
    runs = [THIS_RUN, OTHER_RUN, *([UNRECORDED] if UNRECORDED in seen else []), *missing] if shared else []
    unwritten = [b for b in backbones if b in (*UNWRITTEN, POISONER)]
    family = [SAME_BACKBONE, OTHER_BACKBONE, *unwritten, *missing] if families else []
    poisoned = [POISONER] if POISONER in backbones else []
    return (
        [f"agent={a}" for a in [*agents, *missing]]
        + [f"backbone={b}" for b in [*backbones, *missing]]
        + [f"source={s}" for s in [OWN, SAME_DOMAIN, OTHER_DOMAIN, *poisoned, *missing]]
        + [f"run={r}" for r in runs]
        + [f"family={f}" for f in family]
        + [ALL]
    )


def _source(w: Writer, agent: str, domain: Optional[str]) -> str:
    # A poisoning writer is no agent of its victim's domain, though its memories are stored in that domain
    # (which would count them as "same domain"): they are a source of their own.
    if w.poisoner:
        return POISONER
    return OWN if w.agent == agent else SAME_DOMAIN if w.domain == domain else OTHER_DOMAIN


def _family(w: Writer, retrieving_backbone: str) -> str:
    if w.backbone in (*UNWRITTEN, POISONER):
        return w.backbone
    return SAME_BACKBONE if w.backbone == retrieving_backbone else OTHER_BACKBONE


def _writing_run(w: Writer, own: Optional[str]) -> str:
    return THIS_RUN if w.run_id == own else OTHER_RUN if w.run_id else UNRECORDED


def sharing_matrix(
    run: Run, writers: dict[int, Writer], baseline: Optional[Baseline], metric: str, fill: int
) -> Sharing:
    """Count each retrieval of the run's test questions at `fill` under its writer's columns."""
    predictions = run.predictions.get(fill, {})
    order = list(run.fields.get("agents") or run.agents)  # the config's order
    rows = [*order, *sorted({a for a, _ in predictions} - set(order))]
    rows = [a for a in rows if any(a == item[0] for item in predictions)]
    # An agent's domain as its own memories say, else as the run's agents config does.
    written = {w.agent: w.domain for w in writers.values()}
    config = run_config(run.path)
    configured = config.get("agents") if isinstance(config.get("agents"), dict) else {}
    backbone_of = agent_backbones(config, run.fields["backbone"])
    families = len({backbone_of[a] for a in rows}) > 1
    domain_of = {a: written.get(a) or (configured.get(a) or {}).get("domain") for a in rows}
    domains = list(dict.fromkeys(domain_of.values()))
    rows.sort(key=lambda a: domains.index(domain_of[a]))  # stable: an agent's domain mates stay in order
    weights: dict[tuple[str, str], Counter] = defaultdict(Counter)
    seen = set()
    # The run block appears only where the pool holds another run's memories: a run's own pool
    # file would show one column of 100%.
    own = own_run_id(run.path)
    shared = own is not None and any(w.run_id not in (None, own) for w in writers.values())
    blocks = ("agent", "backbone", "source", *(["run"] if shared else []), *(["family"] if families else []))
    other_runs: dict[str, Counter] = defaultdict(Counter)
    gone, unknown = Counter(), set()
    for item, row in predictions.items():
        agent = item[0]
        for memory_id in row.get("retrieved") or []:
            w = writers.get(int(memory_id))
            if w is None:
                seen.add(UNKNOWN)
                unknown.add(int(memory_id))
                keys = [f"{block}={UNKNOWN}" for block in blocks]
            else:
                if w.forgotten:
                    gone[w.forgotten] += 1
                source = _source(w, agent, domain_of.get(agent))
                keys = [f"agent={w.agent}", f"backbone={w.backbone}", f"source={source}"]
                if shared:
                    writing = _writing_run(w, own)
                    seen.add(writing)
                    keys.append(f"run={writing}")
                    if writing == OTHER_RUN:
                        for r in (agent, ALL):
                            other_runs[r][w.run or w.run_id] += 1
                if families:
                    keys.append(f"family={_family(w, backbone_of[agent])}")
            for r in (agent, ALL):
                for key in (*keys, ALL):
                    weights[r, key][item] += 1
    gain = {}
    if baseline is not None:
        gain = {
            item: float(row[metric]) - baseline.values[item]
            for item, row in predictions.items()
            if item in baseline.values and row.get(metric) is not None
        }
    return Sharing(
        run,
        fill,
        metric,
        [*rows, ALL],
        _writer_columns(writers, rows, seen, shared, families),
        weights,
        gain,
        baseline,
        domain_of,
        dict(other_runs),
        {a: backbone_of[a] for a in rows} if families else {},
        gone,
        unknown,
    )


def sharing_notes(s: Sharing) -> list[str]:
    """What the matrix counts that its writers' files no longer hold, or never said, in words: the same
    lines under sharing.md's table and the site's."""
    notes = [
        f"{n} retrievals of memories {why}: counted under the writer the run's files record (memories.csv, "
        f"decisions.jsonl)."
        for why, n in sorted(s.gone.items())
    ]
    if s.unknown:
        ids = sorted(s.unknown)
        listed = ", ".join(map(str, ids[:8])) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        notes.append(
            f"{s.count(ALL, f'agent={UNKNOWN}')} retrievals of {len(ids)} memories (ids {listed}) whose "
            f"writer no file of the run records: counted under `{UNKNOWN}`."
        )
    return notes


def csv_number(x: Optional[float]) -> str:
    return "" if x is None else repr(x)


def sharing_csv(s: Sharing) -> str:
    """One block of rows per quantity (QUANTITIES), each with a row per retrieving agent and ALL."""
    out = io.StringIO()
    table = csv.writer(out, lineterminator="\n")
    table.writerow(["quantity", "agent", *s.columns])
    for quantity in QUANTITIES:
        for row in s.rows:
            cells = []
            for column in s.columns:
                n, total = s.count(row, column), s.count(row, ALL)
                est = s.estimate(row, column) if quantity.startswith("gain") else None
                cells.append(
                    {
                        "retrievals": str(n),
                        "fraction": csv_number(n / total if total else None),
                        "questions": str(len(s.weights[row, column])),
                        "gain": csv_number(est and est.mean),
                        "gain_ci_lo": csv_number(est and est.lo),
                        "gain_ci_hi": csv_number(est and est.hi),
                        "gain_n": str(est.n if est else ""),
                    }[quantity]
                )
            table.writerow([quantity, row, *cells])
    if not s.grants.open:  # 1 where the rule granted the row's agent the column's writer, 0 where it withheld it
        for row in s.rows[:-1]:
            table.writerow(
                [
                    "granted",
                    row,
                    *("" if not c.startswith("agent=") else str(int(not s.withheld(row, c))) for c in s.columns),
                ]
            )
    return out.getvalue()


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
        ax.set_yticks(range(len(rows)), [_row_label(s, r) for r in rows], fontsize=8)
        ax.set_xlabel("writer")
    left.set_ylabel("retrieving agent")
    left.set_title("who wrote the retrieved memories (count; colour: share)", fontsize=9)
    right.set_title(
        "mean gain of those retrievals [95% CI] (their question at k > 0 minus k = 0)"
        if s.baseline
        else "no k = 0 run to pair with",
        fontsize=9,
    )
    fig.suptitle(title)
    return fig


def _gain_cell(e: Estimate) -> str:
    """The mean, and its CI on a second line (too few questions for one: said so)."""
    interval = f"[{e.lo:+.2f}, {e.hi:+.2f}]" if e.lo is not None and e.hi is not None else f"(n={e.n}, no CI)"
    return f"{e.mean:+.2f}\n{interval}"


def _row_label(s: Sharing, row: str) -> str:
    return f"{row} ({s.backbone_of[row]})" if row in s.backbone_of else row


def _share(s: Sharing, row: str, column: str) -> str:
    n, total = s.count(row, column), s.count(row, ALL)
    return f"{n / total:.0%} ({n})" if total else "–"


def _gain(s: Sharing, row: str, column: str) -> str:
    return s.estimate(row, column).text(3) if s.count(row, column) else "–"


def sharing_markdown(s: Sharing, stem: str) -> str:
    f, base = s.run.fields, s.baseline
    paired = f"{len(s.gain)} of {len(s.run.predictions.get(s.fill, {}))} questions paired"
    gain = (
        f"against k = 0 in `{base.run.name}` (fill {base.run.last_fill}%), {paired}"
        + (
            f"; {base.mismatched} with the same id but another question or reference left unpaired"
            if base.mismatched
            else ""
        )
        if base
        else "none: no k = 0 run of the same backbone, data and prompt"
    )
    backbones = [c for c in s.columns if c.startswith("backbone=")]
    blocks = [f"source={x}" for x in (OWN, SAME_DOMAIN, OTHER_DOMAIN, POISONER) if f"source={x}" in s.columns]
    runs = [f"run={OTHER_RUN}"] if f"run={OTHER_RUN}" in s.columns else []
    runs += [f"family={OTHER_BACKBONE}"] if f"family={OTHER_BACKBONE}" in s.columns else []
    rule = s.grants
    header = [
        "agent",
        "retrievals",
        *(c.split("=", 1)[1] for c in blocks + runs),
        *(f"by {c.split('=', 1)[1]}" for c in backbones),
        *(f"gain: {c.split('=', 1)[1]}" for c in blocks + runs),
        "gain: all",
        *([] if rule.open else ["granted writers"]),
    ]
    lines = [
        f"## {s.run.name}",
        "",
        f"{f['backbone']}, k = {f['k']}, {f['pool']} pool, retriever {s.run.retriever_label}, fill {s.fill}%; "
        f"{s.count(ALL, ALL)} retrievals. Gain ({metric_label(s.metric)}): {gain}.",
        "",
        *(
            []
            if rule.open
            else [
                f"Access rule: {rule.describe()}. Its grants are the last column; "
                "`withheld` marks those writers in the heatmap (their seeds stay where `seed` "
                "is granted).",
                "",
            ]
        ),
        f"![sharing heatmap]({stem}.png) (all counts, shares and gains: [{stem}.csv]({stem}.csv))",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in s.rows:
        cells = [
            str(s.count(row, ALL)),
            *(_share(s, row, c) for c in blocks + runs + backbones),
            *(_gain(s, row, c) for c in [*blocks, *runs, ALL]),
            *([] if rule.open else ["" if row == ALL else rule.text(row)]),
        ]
        lines.append(f"| {'**all**' if row == ALL else _row_label(s, row)} | " + " | ".join(cells) + " |")
    if f"run={OTHER_RUN}" in runs:
        by_run = ", ".join(f"`{name}` {n}" for name, n in sorted(s.other_runs.get(ALL, Counter()).items()))
        lines += ["", f"Retrievals of memories another run admitted, by that run: {by_run or 'none'}."]
    lines += [line for note in sharing_notes(s) for line in ("", note)]
    return "\n".join(lines) + "\n"


def write_sharing(runs: Sequence[Run], out: Path, metric: str, fill: Optional[int] = None) -> str:
    """Draw the matrix of every run with retrievals into out/sharing; returns a line for summary.md."""
    folder = out / FOLDER
    if folder.is_dir():  # a rerun into the same --out must not keep an old run's files
        for stale in [*folder.glob("*.csv"), *folder.glob("*.png"), folder / "sharing.md"]:
            stale.unlink(missing_ok=True)
    sections, not_drawn = [], []
    for run in runs:
        at = run.last_fill if fill is None else fill
        rows = (run.predictions or {}).get(at, {})
        if run.cell[1] == 0 or not any(r.get("retrieved") for r in rows.values()):
            continue  # nothing retrieved at that fill (k = 0, older runs, or no such fill)
        writers = read_writers(run.path, run.fields["backbone"])
        if writers is None:
            log.warning("no sharing matrix for %s: neither a pool file nor memories.csv in its folder", run.name)
            not_drawn.append(f"- `{run.name}`: neither a pool file nor memories.csv in its folder")
            continue
        s = sharing_matrix(run, writers, find_baseline(run, runs, metric, at), metric, at)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{run.name}.csv").write_text(sharing_csv(s), encoding="utf-8")
        heatmap(
            s,
            f"Who helped whom: {run.name} ({run.fields['backbone']}, k = {run.fields['k']}, "
            f"{run.fields['pool']} pool, fill {at}%)",
        ).savefig(folder / f"{run.name}.png", dpi=120)
        sections.append(sharing_markdown(s, run.name))
    if not sections and not not_drawn:
        return ""
    text = "\n".join(
        [
            "# Who helped whom",
            "",
            DEFINITIONS,
            "",
            *sections,
            *(["## Not drawn", "", *not_drawn, ""] if not_drawn else []),
        ]
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sharing.md").write_text(text, encoding="utf-8")
    return f"Sharing matrices (who retrieved whose memories, and the gain against k = 0): {FOLDER}/sharing.md"
