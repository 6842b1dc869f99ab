"""The paper's claims, each tested as paired differences on the same test questions (claims.md and
claims.csv are ms.report.tables.claim_files'). A row is one (claim, comparison, metric); its verdict comes from
ms.common.stats. Comparisons and settings are said in words (Run.words, ms.report.common.labels)."""

from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean
from typing import NamedTuple, Optional, Sequence

from ms.common.stats import Paired, paired
from ms.config.parts import GATES, RETRIEVERS
from ms.gates.record import GateRecord
from ms.report.common.conditions import FIGURE4_K, FIGURE4_POOL, TABLE_GATE, TABLE_MEMORY, Condition, pairable
from ms.report.common.gates import gate_variants
from ms.report.common.labels import Retrieval, gate_key, other_answers, pool_words, retriever_key, words
from ms.report.common.runs import Cell


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    how: str  # how its pairs are formed and judged, for claims.md
    needs: str  # the runs it needs, said where there are none
    varies: tuple[str, ...] = ()  # the cell keys (or sections) in which its two runs may differ


CLAIMS = {
    c.id: c
    for c in [
        Claim(
            "a",
            "k = 1, 2 and 3 each beat k = 0 (Table 1)",
            "each k against k = 0 at the same backbone, pool, retriever and memory policy; each run at its last fill.",
            "a k = 0 run and a k = 1, 2 or 3 run that share backbone, pool, retriever and memory policy",
            ("k",),
        ),
        Claim(
            "b",
            "Domain-pool is at least as good as Single-pool at k = 3 (Table 2)",
            "Domain minus Single at k = 3, the same backbone, retriever and memory policy, each at its last fill. "
            "'At least as good' is judged as: supported if Domain is significantly better, contradicted if it is "
            "significantly worse, inconclusive otherwise. Inconclusive here includes 'no detectable difference': "
            "this test cannot show that the two are equal.",
            "a Domain-pool and a Single-pool run at k = 3 that share backbone, retriever and memory policy",
            ("pool.mode",),
        ),
        Claim(
            "c",
            "100% fill beats 20% fill (Figure 4)",
            "within one condition (Figure 4's: k = 3, Domain-pool, dense, plain memory), its last fill against its "
            "20% fill; where it has no 20% (or no 100%) fill, its smallest (largest) one, as the comparison says.",
            "a Figure 4 run (k = 3, Domain-pool, dense, plain memory) with two or more fills",
        ),
        Claim(
            "d",
            "learned dense beats frozen dense, BM25 and random (ablation)",
            "the learned dense retriever against the frozen one, BM25 and random at the same backbone, k and pool, "
            "plain memory, each at its last fill.",
            "a learned dense run and a frozen dense, BM25 or random run of the same backbone, k and pool, plain memory",
            ("retriever", "train.enabled"),
        ),
        Claim(
            "e",
            "a gate that measures utility admits a better pool than the rubric gate",
            "each run under gate=utility or gate=both against the rubric-gated run of the same backbone, k, pool, "
            "retriever and memory policy, each at its last fill (not a claim of the paper: ms's utility gate).",
            "a gate=utility or gate=both run and a rubric-gated run that share backbone, k, pool, retriever and memory",
            ("gate",),
        ),
        Claim(
            "f",
            "a pool grown with the stream's reference answers beats one grown with the model's answers",
            "the run whose stream wrote the references (stream.answers=reference) against the run under the same "
            "gate that wrote the model's answers, same backbone, k, pool, retriever and memory, each at its last "
            "fill (a control, not a claim of the paper). ref_logprob rewards the data's own writing style, so "
            "this comparison favours the reference-grown pool by construction.",
            "a stream.answers=reference run and a model-written run under the same gate and setting",
            ("stream.answers",),
        ),
        Claim(
            "g",
            "a gate admits a better pool than a random gate admitting as many",
            "each gate's run against the gate=random run matched to it (gate.match: the same number admitted per "
            "agent and micro-batch, the pairs drawn at random), same backbone, k, pool, retriever and memory, each "
            "at its last fill: whether the gate admits better, not just less (a control, not a claim of the paper).",
            "a gated run and a gate=random run matched to it (gate.match) that share the setting",
            ("gate",),
        ),
    ]
}
# Claim (b)'s k and pools (pool.mode), Domain's first; claim (d)'s retrievers as runs record them (the
# `retriever` and `learned` run fields), the learned dense one first, then its opponents in the claim's order.
POOLS_K, POOLS = 3, ("domain", "single")
LEARNED_DENSE = Retrieval("dense", learned=True)
BASELINES = (Retrieval("dense", learned=False), Retrieval("bm25"), Retrieval("random"))


def measures_utility(gate: str) -> bool:
    """Whether the gate a run recorded admits by measured utility, as its class says (ms.gates:
    utility, both); a gate this process does not know does not."""
    return gate in GATES and GATES.load(gate).measures_utility


def higher_is_better(metric: str) -> bool:
    """As the metric's class says (ms.metrics); a key no registered metric writes is taken as higher-better."""
    from ms.metrics.base import metric_of_key

    cls = metric_of_key(metric)
    return cls is None or cls.higher_is_better


@dataclass(frozen=True)
class Comparison:
    claim: Claim
    label: str  # what differs, in words, e.g. "k = 1 against k = 0"
    setting: str  # what is held fixed, in words
    a: Condition  # the claim says a beats b (higher is better)
    b: Condition
    fill_a: int
    fill_b: int


@dataclass(frozen=True)
class ClaimRow:
    comparison: Comparison
    metric: str
    result: Paired
    wins: int  # agents whose mean difference is above 0
    agents: int


class Setting(NamedTuple):
    """Which conditions a claim may set against each other: a comparison's two conditions differ in one
    of these (the claim's) and share the rest; which of those pair is decided by their cells (pairable).
    Each part is the short form conditions are grouped and ordered by; Run.words says them in words."""

    backbone: str
    k: Optional[int]
    pool: Optional[str]
    retriever: Optional[str]  # Run.retriever_label
    memory: str
    gate: Optional[str]  # Run.gate
    grader: Optional[str]
    agents: tuple[str, ...]  # two runs of other agents answer other test questions: never paired
    access: str  # Run.access_key

    @classmethod
    def of(cls, c: Condition) -> "Setting":
        return cls(*c.cell, c.retriever_label, c.memory, c.gate, c.grader, tuple(sorted(c.agents)), c.first.access_key)


def held(text: str, unvaried: Sequence[str]) -> str:
    """A comparison's setting, and the keys besides the claim's in which its two cells differ (all of
    them NOT_COMPARED ones)."""
    if not unvaried:
        return text
    return f"{text}; the runs also differ in {', '.join(unvaried)}, which cannot change a paired value"


def _alike(conds: Sequence[Condition]) -> dict[Setting, list[list[Condition]]]:
    """Setting -> its conditions, in groups whose cells differ only in NOT_COMPARED keys (one comparison
    would be answered by each of a group: it is answered once). Each group's first is its most recently
    finished; conditions whose cells differ in more are in groups of their own."""
    index: dict[Setting, list[list[Condition]]] = {}
    for c in sorted(conds, key=lambda c: (c.finished, c.name), reverse=True):
        groups = index.setdefault(Setting.of(c), [])
        alike = next((g for g in groups if pairable(c, g[0]) is not None), None)
        if alike is None:
            groups.append([c])
        else:
            alike.append(c)
    return {s: sorted(groups, key=lambda g: min(c.name for c in g)) for s, groups in index.items()}


Found = tuple[Condition, Condition, list[str]]  # a condition, its opponent, the NOT_COMPARED keys their cells differ in


def comparisons(conds: Sequence[Condition], chosen: dict[Cell, Condition]) -> list[Comparison]:
    """Every comparison the conditions allow, claim by claim: two conditions whose Settings differ in the
    one field the claim varies and whose cells differ in the claim's keys alone, apart from NOT_COMPARED
    keys, which the comparison's setting names (claims (a), (b) and (d) compare runs under one gate, and
    every claim compares runs graded by one backbone, under one access rule). Of conditions with one
    Setting whose cells differ only in NOT_COMPARED keys, one pair answers: the one whose two cells differ
    in the fewest keys besides the claim's, then the most recently finished."""
    index = _alike([c for c in conds if c.record.poison is None])  # poison.md compares those
    out = []

    def pair(group: list[Condition], claim: Claim, **changed) -> Optional[Found]:
        """A condition of `group` and its opponent under the claim (its Setting changed as given); None
        where there is none."""
        found = []
        for c in group:
            for other in (o for g in index.get(Setting.of(c)._replace(**changed), []) for o in g):
                if other is not c and (unvaried := pairable(c, other, claim.varies)) is not None:
                    found.append((len(unvaried), -c.finished, -other.finished, c.name, other.name, c, other, unvaried))
        return min(found, key=lambda f: f[:5])[5:] if found else None

    def add(claim: Claim, label: str, found: Optional[Found], omit: Sequence[str], opponent_first: bool = False):
        """The comparison `found` answers, if any: the group's condition is a, its opponent b (or the other
        way round), in a setting said by the group's condition without the parts the claim varies."""
        if found is not None:
            c, other, unvaried = found
            a, b = (other, c) if opponent_first else (c, other)
            out.append(Comparison(claim, label, held(c.words(omit), unvaried), a, b, a.last_fill, b.last_fill))

    for s, groups in sorted(index.items(), key=lambda kv: kv[0]):
        for group in groups:
            record = group[0].record  # what a group shares: its Setting
            if s.k == 0:
                for k in (1, 2, 3):
                    add(CLAIMS["a"], f"k = {k} against k = 0", pair(group, CLAIMS["a"], k=k), ("k",), True)
            if (s.k, s.pool) == (POOLS_K, POOLS[0]):
                label = " against ".join(map(pool_words, POOLS))
                add(CLAIMS["b"], label, pair(group, CLAIMS["b"], pool=POOLS[1]), ("pool",))
            if s.retriever == retriever_key(LEARNED_DENSE) and s.memory == TABLE_MEMORY:
                for baseline in BASELINES:
                    found = pair(group, CLAIMS["d"], retriever=retriever_key(baseline))
                    label = f"{words(RETRIEVERS, LEARNED_DENSE)} against {words(RETRIEVERS, baseline)}"
                    add(CLAIMS["d"], label, found, ("retriever",))
            if measures_utility(s.gate):
                rubric = words(GATES, GateRecord(TABLE_GATE))
                found = pair(group, CLAIMS["e"], gate=TABLE_GATE)
                add(CLAIMS["e"], f"{group[0].gate_words} against {rubric}", found, ("gate",))
            if answers := other_answers(record.stream_answers):  # where the stream did not write the model's
                found = pair(group, CLAIMS["f"], gate=gate_key(record.gate))
                add(CLAIMS["f"], f"{answers}-grown pool against model-grown pool", found, ("answers",))
            if matched := record.gate.matched_gate:  # a random gate matched to another gate's admissions
                opponent = gate_key(GateRecord(matched), record.stream_answers)
                label = f"{words(GATES, GateRecord(matched))} against a random gate matched to it"
                add(CLAIMS["g"], label, pair(group, CLAIMS["g"], gate=opponent), ("gate",), True)
    for (backbone, k, pool), chosen_c in sorted(chosen.items()):
        if (k, pool) == (FIGURE4_K, FIGURE4_POOL):  # its growth curve, and the same setting's under each other gate
            # (c) compares a run with itself, so a variant's fills need not cut its stream as the chosen run's do
            out += [_growth(c) for c in gate_variants(conds, chosen_c, also_varied=("fills",)).values()]
    return sorted(out, key=lambda cmp: cmp.claim.id)


def _growth(c: Condition) -> Comparison:
    """Claim (c) within one condition: its last fill against its 20% fill, or its smallest."""
    top, low = c.last_fill, 20 if 20 in c.fills else c.fills[0]
    caveats = []
    if low != 20:
        caveats.append("no 20% fill: its smallest")
    if top != 100:
        caveats.append("no 100% fill: its largest")
    label = f"fill {top}% against {low}%" + (f" ({'; '.join(caveats)})" if caveats else "")
    return Comparison(CLAIMS["c"], label, c.words(), c, c, top, low)


def compare(comparison: Comparison, metric: str) -> Optional[ClaimRow]:
    """The paired difference a - b over the test questions both sides measured (b - a for a metric where
    lower is better, so that a positive difference always says a beats b); None where there are none
    (a run without predictions.jsonl, or a metric one side never recorded)."""
    a = comparison.a.values(metric, comparison.fill_a)
    b = comparison.b.values(metric, comparison.fill_b)
    if a is None or b is None or not (items := sorted(a.keys() & b.keys())):
        return None
    if not higher_is_better(metric):
        a, b = {i: -v for i, v in a.items()}, {i: -v for i, v in b.items()}
    by_agent: dict[str, list[float]] = defaultdict(list)
    for item in items:
        by_agent[item[0]].append(a[item] - b[item])
    wins = sum(fmean(d) > 0 for d in by_agent.values())
    return ClaimRow(comparison, metric, paired([a[i] for i in items], [b[i] for i in items]), wins, len(by_agent))


def test_all(comps: Sequence[Comparison], metrics: Sequence[str]) -> tuple[list[ClaimRow], list[Comparison]]:
    """Rows for every comparison and metric with data, and the comparisons that had none for any metric."""
    rows, empty = [], []
    for comp in comps:
        found = [row for metric in metrics if (row := compare(comp, metric)) is not None]
        rows += found
        if not found:
            empty.append(comp)
    return rows, empty
