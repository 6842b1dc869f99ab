"""A learned access rule: reader r is granted writer w's memories only where r's
retrievals of w's memories came with a gain whose 95% CI lies above 0, measured on one half of the
test questions; the rule is then scored on the other half. Seeds stay granted.

The evidence is the sharing matrix's (ms.report.sharing.matrices): a test question at k > 0 paired with the
same question at k = 0, its gain credited to each memory in its prompt, weighted by how many of its k
memories w wrote (only memories the stream wrote: seeds are granted whatever they show). So a gain
is what w's memories came with, not what they caused: a rule learned this way keeps the writers
whose memories sat in prompts that went well.

Which half a question falls in is fixed before anything is measured: per agent, its test questions in
the order of a hash of (agent, test id), alternately into half 0 and half 1. Only the rows of the
measured half are read, so nothing the other half holds can move a grant.
"""

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from ms.common.stats import Estimate
from ms.pool.access import SEED
from ms.report.common.runs import Item
from ms.report.common.writers import UNWRITTEN, Writer
from ms.report.sharing.counts import weighted_mean_ci

HALVES = (0, 1)
CREDIT = (
    "each question's gain (k > 0 minus k = 0) is credited to every memory in its prompt: what a writer's "
    "memories came with, not what they caused"
)


def _order(item: Item) -> str:
    return hashlib.sha256(f"{item[0]}\x1f{item[1]}".encode()).hexdigest()


def question_halves(items: Iterable[Item]) -> dict[Item, int]:
    """Each test question's half: per agent, in hash order of (agent, test id), alternately 0 and 1,
    so each agent's questions split evenly (the first half takes the odd one out)."""
    by_agent: dict[str, list[Item]] = defaultdict(list)
    for item in set(items):
        by_agent[item[0]].append(item)
    return {item: i % 2 for questions in by_agent.values() for i, item in enumerate(sorted(questions, key=_order))}


@dataclass(frozen=True)
class LearnedRule:
    grants: dict[str, frozenset[str]]  # reader -> the writers granted (SEED always among them)
    evidence: dict[str, dict[str, Estimate]]  # reader -> writer -> the gain of its retrievals, measured half
    half: int  # the half the grants were measured on; the rule may be scored on the other
    questions: int  # test questions of the measured half paired with k = 0
    metric: str


def learn_grants(
    rows: Mapping[Item, dict],
    writers: Mapping[int, Writer],
    baseline: Mapping[Item, float],
    metric: str,
    half: int,
    readers: Optional[Iterable[str]] = None,
) -> LearnedRule:
    """The grants `rows` (test question -> its prediction row at one fill: `retrieved` ids and the
    metric) support on `half`, against `baseline` (test question -> the metric at k = 0). `readers`:
    the agents to write grants for (default: those with rows)."""
    if half not in HALVES:
        raise ValueError(f"half must be 0 or 1, got {half}")
    halves = question_halves(rows)
    measured = {item: row for item, row in rows.items() if halves[item] == half}
    weights: dict[tuple[str, str], Counter] = defaultdict(Counter)
    gain: dict[Item, float] = {}
    for item, row in measured.items():
        if row.get(metric) is not None and item in baseline:
            gain[item] = float(row[metric]) - float(baseline[item])
        for memory_id in row.get("retrieved") or []:
            writer = writers.get(int(memory_id))
            if writer is not None and writer.origin not in UNWRITTEN:
                weights[item[0], writer.agent][item] += 1
    evidence: dict[str, dict[str, Estimate]] = defaultdict(dict)
    for (reader, writer), counts in sorted(weights.items()):
        paired = [(n, gain[q]) for q, n in counts.items() if q in gain]
        evidence[reader][writer] = weighted_mean_ci([n for n, _ in paired], [g for _, g in paired])
    readers = list(dict.fromkeys(readers if readers is not None else (item[0] for item in rows)))
    grants = {
        r: frozenset({SEED, *(w for w, e in evidence.get(r, {}).items() if e.lo is not None and e.lo > 0)})
        for r in readers
    }
    return LearnedRule(grants, dict(evidence), half, len(gain), metric)


def evidence_record(rule: LearnedRule) -> dict:
    """reader -> writer -> {gain, ci, n, granted}: the measured half's evidence, as a rule file keeps it."""

    def number(x: Optional[float]) -> Optional[float]:
        return None if x is None else round(float(x), 6)

    return {
        reader: {
            writer: {
                "gain": number(e.mean),
                "ci": [number(e.lo), number(e.hi)],
                "n": e.n,
                "granted": writer in rule.grants.get(reader, ()),
            }
            for writer, e in by_writer.items()
        }
        for reader, by_writer in rule.evidence.items()
    }
