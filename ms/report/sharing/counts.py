"""Who retrieved whose memories, counted: each retrieval of a run's test questions at one fill under
its writer's columns (agent, backbone, source, and where they apply the writing run and the backbone
family), with the gain against k = 0 those retrievals came with and its bootstrap CI."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from ms.common.stats import MIN_CI_N, Estimate, bootstrap_ci
from ms.report.common.runs import Item, Run
from ms.report.common.saved_config import SavedConfig
from ms.report.common.writers import POISONER, UNWRITTEN, Writer, own_run_id
from ms.report.sharing.baseline import Baseline
from ms.report.sharing.grants import Grants

ALL = "all"
OWN, SAME_DOMAIN, OTHER_DOMAIN = "own agent", "same domain", "other domain"
# Which run admitted a memory, where the pool was shared with other runs (each `ms-run` process of a
# multi-process run is a run of its own): a cross-process retrieval is one of another run's memories.
THIS_RUN, OTHER_RUN, UNRECORDED = "this run", "another run", "unrecorded"
# Whether the backbone that wrote a memory is the retrieving agent's own, where the run's agents run on
# more than one backbone (`agents.NAME.backbone`): a cross-family retrieval is one of the other's memories.
SAME_BACKBONE, OTHER_BACKBONE = "same backbone", "other backbone"
# A retrieved id whose writer no file of the run records: neither its pool file (or the PostgreSQL pool)
# nor memories.csv, nor, for one that left the pool, decisions.jsonl (ms.report.common.forgotten).
UNKNOWN = "(writer not recorded)"


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
        return Grants(self.run.record.access)

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

    lo, hi = bootstrap_ci((w, v), ratio, methods=("BCa", "percentile"), paired=True, vectorized=True)
    return Estimate(mean, lo, hi, n)


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
    order = list(run.record.agents or run.agents)  # the config's order
    rows = [*order, *sorted({a for a, _ in predictions} - set(order))]
    rows = [a for a in rows if any(a == item[0] for item in predictions)]
    # An agent's domain as its own memories say, else as the run's agents config does.
    written = {w.agent: w.domain for w in writers.values()}
    saved = SavedConfig.of(run.path)
    backbone_of = saved.agent_backbones(run.record.backbone)
    families = len({backbone_of[a] for a in rows}) > 1
    domain_of = {a: written.get(a) or saved.entry(a).get("domain") for a in rows}
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


def row_label(s: Sharing, row: str) -> str:
    """A retrieving agent as the tables and the heatmap name it: with its backbone, where they differ."""
    return f"{row} ({s.backbone_of[row]})" if row in s.backbone_of else row
