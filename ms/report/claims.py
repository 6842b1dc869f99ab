"""The paper's claims, each tested as paired differences on the same test questions: claims.md and
claims.csv. A row is one (claim, comparison, metric); its verdict comes from ms.common.stats."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import NamedTuple, Optional, Sequence

from ms.common.stats import ALPHA, CONFIDENCE, RESAMPLES, Paired, paired
from ms.report.conditions import FIGURE4_K, FIGURE4_POOL, NOT_COMPARED, Condition, pairable
from ms.report.gates import gate_variants
from ms.report.render import csv_number, markdown_grid
from ms.report.runs import Cell, metric_words


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
            "dense-learned against dense-frozen, bm25 and random at the same backbone, k and pool, plain memory, "
            "each at its last fill.",
            "a dense-learned run and a dense-frozen, bm25 or random run of the same backbone, k and pool, plain memory",
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
# gate labels of the controls (ms.report.runs.Run.gate): a reference-written stream, a matched random gate
REFERENCE_SUFFIX, MATCHED_PREFIX = "+reference", "random~"


def measures_utility(gate: str) -> bool:
    """Whether the gate a run recorded admits by measured utility, as its class says (ms.gates:
    utility, both); a gate this process does not know does not."""
    from ms.config.parts import GATES

    return gate in GATES and GATES.load(gate).measures_utility


BASELINES = ("dense-frozen", "bm25", "random")  # claim (d)'s opponents, in its order


def higher_is_better(metric: str) -> bool:
    """As the metric's class says (ms.metrics); a key no registered metric writes is taken as higher-better."""
    from ms.metrics.base import metric_of_key

    cls = metric_of_key(metric)
    return cls is None or cls.higher_is_better


@dataclass(frozen=True)
class Comparison:
    claim: Claim
    label: str  # what differs, e.g. "k=1 vs k=0"
    setting: str  # what is held fixed
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


OPEN = "open"  # the access rule under which every agent reads every memory of its pool


def access_label(c: Condition) -> str:
    """'open', or the access rule a condition's pool was read under and the file it came from."""
    recorded = c.fields.get("access") or {}
    settings = c.settings or {}
    name = str(recorded.get("rule") or settings.get("access.name") or OPEN)
    file = recorded.get("file") or settings.get("access.file")
    return name if name == OPEN or not file else f"access={name} ({Path(str(file)).name})"


class Setting(NamedTuple):
    """How claims.md names a condition: a comparison's two conditions differ in one of these (the
    claim's) and share the rest. Which conditions pair is decided by their cells (pairable)."""

    backbone: str
    k: Optional[int]
    pool: Optional[str]
    retriever: Optional[str]
    memory: str
    gate: Optional[str]
    grader: Optional[str]
    agents: tuple[str, ...]  # two runs of other agents answer other test questions: never paired
    access: str = OPEN

    @classmethod
    def of(cls, c: Condition) -> "Setting":
        return cls(*c.cell, c.retriever_label, c.memory, c.gate, c.grader, tuple(sorted(c.agents)), access_label(c))

    def text(self, **varied: None) -> str:
        """As claims.md names it, without the fields the comparison varies (given as None)."""
        s = self._replace(**varied)
        parts = [
            s.backbone,
            None if s.k is None else f"k={s.k}",
            None if s.pool is None else f"{s.pool} pool",
            s.retriever,
            f"{s.memory} memory",
            None if s.gate in (None, "rubric") else f"gate={s.gate}",
            None if s.access == OPEN else s.access,
            None if s.grader in (None, s.backbone) else f"graded by {s.grader}",
        ]
        return ", ".join(p for p in parts if p)


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


def comparisons(conds: Sequence[Condition], chosen: dict[Cell, Condition]) -> list[Comparison]:
    """Every comparison the conditions allow, claim by claim: two conditions whose Settings differ in the
    one field the claim varies and whose cells differ in the claim's keys alone, apart from NOT_COMPARED
    keys, which the comparison's setting names (claims (a), (b) and (d) compare runs under one gate, and
    every claim compares runs graded by one backbone, under one access rule). Of conditions with one
    Setting whose cells differ only in NOT_COMPARED keys, one pair answers: the one whose two cells differ
    in the fewest keys besides the claim's, then the most recently finished."""
    index = _alike([c for c in conds if not c.fields.get("poison")])  # poison.md compares those
    out = []

    def pair(group: list[Condition], claim: Claim, **changed) -> Optional[tuple[Condition, Condition, list[str]]]:
        """A condition of `group` and its opponent under the claim (its Setting changed as given), and the
        NOT_COMPARED keys their cells differ in; None where there is none."""
        found = []
        for c in group:
            for other in (o for g in index.get(Setting.of(c)._replace(**changed), []) for o in g):
                if other is not c and (unvaried := pairable(c, other, claim.varies)) is not None:
                    found.append((len(unvaried), -c.finished, -other.finished, c.name, other.name, c, other, unvaried))
        return min(found, key=lambda f: f[:5])[5:] if found else None

    for s, groups in sorted(index.items(), key=lambda kv: kv[0]):
        for group in groups:
            if s.k == 0:
                for k_ in (1, 2, 3):
                    if (found := pair(group, CLAIMS["a"], k=k_)) is not None:
                        c, other, unvaried = found
                        out.append(
                            Comparison(
                                CLAIMS["a"],
                                f"k={k_} vs k=0",
                                held(s.text(k=None), unvaried),
                                other,
                                c,
                                other.last_fill,
                                c.last_fill,
                            )
                        )
            if (s.k, s.pool) == (3, "domain") and (found := pair(group, CLAIMS["b"], pool="single")) is not None:
                c, other, unvaried = found
                out.append(
                    Comparison(
                        CLAIMS["b"],
                        "Domain vs Single",
                        held(s.text(pool=None), unvaried),
                        c,
                        other,
                        c.last_fill,
                        other.last_fill,
                    )
                )
            if s.retriever == "dense-learned" and s.memory == "plain":
                for baseline in BASELINES:
                    if (found := pair(group, CLAIMS["d"], retriever=baseline)) is not None:
                        c, other, unvaried = found
                        out.append(
                            Comparison(
                                CLAIMS["d"],
                                f"dense-learned vs {baseline}",
                                held(s.text(retriever=None), unvaried),
                                c,
                                other,
                                c.last_fill,
                                other.last_fill,
                            )
                        )
            if measures_utility(s.gate) and (found := pair(group, CLAIMS["e"], gate="rubric")) is not None:
                c, other, unvaried = found
                out.append(
                    Comparison(
                        CLAIMS["e"],
                        f"gate={s.gate} vs rubric",
                        held(s.text(gate=None), unvaried),
                        c,
                        other,
                        c.last_fill,
                        other.last_fill,
                    )
                )
            model_written = s.gate.removesuffix(REFERENCE_SUFFIX)
            if model_written != s.gate and (found := pair(group, CLAIMS["f"], gate=model_written)) is not None:
                c, other, unvaried = found
                out.append(
                    Comparison(
                        CLAIMS["f"],
                        "reference-grown vs model-grown",
                        held(s.text(), unvaried),
                        c,
                        other,
                        c.last_fill,
                        other.last_fill,
                    )
                )
            matched = s.gate.removeprefix(MATCHED_PREFIX)
            if matched != s.gate and (found := pair(group, CLAIMS["g"], gate=matched)) is not None:
                c, other, unvaried = found
                out.append(
                    Comparison(
                        CLAIMS["g"],
                        f"gate={matched} vs random matched to it",
                        held(s.text(gate=None), unvaried),
                        other,
                        c,
                        other.last_fill,
                        c.last_fill,
                    )
                )
    for (backbone, k, pool), chosen_c in sorted(chosen.items()):
        if (k, pool) == (FIGURE4_K, FIGURE4_POOL):  # its growth curve, and the same setting's under each other gate
            out += [_growth(c) for c in gate_variants(conds, chosen_c).values()]
    return sorted(out, key=lambda cmp: cmp.claim.id)


def _growth(c: Condition) -> Comparison:
    """Claim (c) within one condition: its last fill against its 20% fill, or its smallest."""
    top, low = c.last_fill, 20 if 20 in c.fills else c.fills[0]
    caveats = []
    if low != 20:
        caveats.append("no 20% fill: its smallest")
    if top != 100:
        caveats.append("no 100% fill: its largest")
    label = f"fill {top}% vs {low}%" + (f" ({'; '.join(caveats)})" if caveats else "")
    return Comparison(CLAIMS["c"], label, Setting.of(c).text(), c, c, top, low)


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


CSV_HEADER = [
    "claim",
    "claim_text",
    "comparison",
    "setting",
    "metric",
    "estimate",
    "ci_lo",
    "ci_hi",
    "p",
    "n",
    "agent_wins",
    "verdict",
    "runs_a",
    "runs_b",
    "fill_a",
    "fill_b",
]


def claims_csv(rows: Sequence[ClaimRow]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for row in rows:
        c, r = row.comparison, row.result
        writer.writerow(
            [
                c.claim.id,
                c.claim.text,
                c.label,
                c.setting,
                row.metric,
                csv_number(r.estimate),
                csv_number(r.lo),
                csv_number(r.hi),
                csv_number(r.p),
                r.n,
                f"{row.wins}/{row.agents}",
                r.verdict,
                c.a.name,
                c.b.name,
                c.fill_a,
                c.fill_b,
            ]
        )
    return buf.getvalue()


def _signed(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:+.3f}"


def claims_grid(rows: Sequence[ClaimRow]) -> str:
    """The claims table in Markdown, as claims.md and summary.md show it."""
    header = [
        "claim",
        "comparison",
        "setting",
        "metric",
        "a - b [95% CI]",
        "p",
        "n",
        "agents ahead",
        "verdict",
        "runs (a vs b)",
    ]
    cells = [
        [
            f"({c.claim.id})",
            c.label,
            c.setting,
            row.metric,
            f"{_signed(r.estimate)} [{_signed(r.lo)}, {_signed(r.hi)}]" if r.lo is not None else _signed(r.estimate),
            "–" if r.p is None else f"{r.p:.3g}",
            str(r.n),
            f"{row.wins}/{row.agents}",
            f"**{r.verdict}**",
            f"{c.a.name} vs {c.b.name}" if c.a is not c.b else c.a.name,
        ]
        for row in rows
        for c, r in [(row.comparison, row.result)]
    ]
    return markdown_grid(header, cells, len(header))  # left-aligned: verdicts and run names read better so


def untested(rows: Sequence[ClaimRow], empty: Sequence[Comparison]) -> list[str]:
    """One line per claim with no row, saying why."""
    tested = {row.comparison.claim.id for row in rows}
    lines = []
    for claim in CLAIMS.values():
        if claim.id in tested:
            continue
        without = [c for c in empty if c.claim is claim]
        why = (
            f"runs found ({'; '.join(f'{c.label}: {c.a.name} vs {c.b.name}' for c in without)}) but without "
            "per-question values for these metrics (no predictions.jsonl, or the metric not recorded)"
            if without
            else f"no runs: it needs {claim.needs}"
        )
        lines.append(f"({claim.id}) {claim.text}: {why}.")
    return lines


def _shown(folder: Path) -> str:
    """Relative to the working folder where it lies below it, so committed reports name no machine's paths."""
    try:
        return str(Path(folder).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(folder)


def _better(metrics: Sequence[str]) -> str:
    lower = [m for m in metrics if not higher_is_better(m)]
    if not lower:
        return "Higher is better for all."
    return (
        f"Higher is better, except for {', '.join(lower)}, where lower is: its differences are b - a, so that "
        f"a difference above 0 says a is better."
    )


PAIRING_RULE = (
    "Which runs are paired: two conditions only where their cells (metrics.json `cell.config`, or the "
    ".hydra/config.yaml saved beside a run without one) differ in the keys the claim varies ("
    + "; ".join(f"({c.id}) {', '.join(c.varies)}" for c in CLAIMS.values() if c.varies)
    + "; a section stands for every key in it, gate for gate.name, gate.probes, ...) and besides only in keys "
    "that cannot change a paired question's value: "
    + ", ".join(NOT_COMPARED)
    + ". A comparison whose runs differ in one of those names it in its setting. "
    "A key one of the two cells lacks (a setting added after that run) is not compared."
)


def claims_markdown(
    rows: Sequence[ClaimRow], empty: Sequence[Comparison], metrics: Sequence[str], folders: Sequence[Path]
) -> str:
    """claims.md: how the numbers were made and from which run folders, the table, how each claim is
    judged, and the claims no run could test."""
    out = [
        "# Claims\n",
        f"Numbers: the mean paired difference a - b over the test questions both sides measured (matched on "
        f"agent and test id), its {CONFIDENCE:.0%} bootstrap CI (scipy BCa, {RESAMPLES} resamples), a two-sided "
        f"sign-flip permutation p ({RESAMPLES} resamples), and a verdict at alpha = {ALPHA}: supported where the "
        f"CI lies above 0 and p < alpha, contradicted where it lies below 0 and p < alpha, inconclusive "
        f"otherwise. Seed replicates are averaged per question first. Run folders read: {len(folders)}, "
        f"listed at the end.\n",
        f"Metrics, where the runs have them: {'; '.join(f'{m}, {metric_words(m)}' for m in metrics)}. "
        + _better(metrics)
        + " 'agents ahead': agents whose mean difference is above 0, of those compared.\n",
        claims_grid(rows) if rows else "No claim could be tested on these runs.",
        "",
        "## How each claim is tested\n",
        *(f"- ({c.id}) {c.text}: {c.how}" for c in CLAIMS.values()),
        "",
        PAIRING_RULE,
        "",
    ]
    tested = {row.comparison.claim.id for row in rows}
    partial = [c for c in empty if c.claim.id in tested]
    if partial:
        out += [
            "## Comparisons without per-question values\n",
            *(f"- ({c.claim.id}) {c.label}, {c.setting}: {c.a.name} vs {c.b.name}" for c in partial),
            "",
        ]
    missing = [f"- {line}" for line in untested(rows, empty)]
    out += [
        "## Not tested here (no runs)\n",
        *(missing or ["None."]),
        "",
        "## Run folders read\n",
        *([f"- `{_shown(f)}`" for f in folders] or ["None."]),
    ]
    return "\n".join(out) + "\n"
