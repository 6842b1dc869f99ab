"""H3: how much of each top k the stream wrote, fill by fill and per retrieving agent, with a 95% CI
(stream_share.md says what each number is). The unit is the test question, not the retrieval: the k
retrievals of one question share its prompt, so an interval over retrievals would be too narrow."""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ms.common.stats import Estimate, interval_text, mean_ci
from ms.report.common.render import csv_number, csv_text, markdown_grid
from ms.report.common.runs import Run
from ms.report.common.writers import stream_written
from ms.report.sharing.counts import ALL

log = logging.getLogger(__name__)

STREAM_SHARE = "stream_share"


@dataclass(frozen=True)
class Share:
    """Retrievals of stream-written memories among all retrievals, and the mean share per test question."""

    stream: int
    retrievals: int
    per_question: Estimate

    def text(self) -> str:
        e = self.per_question
        if e.mean is None:
            return "–"
        ci = interval_text(None if e.lo is None else 100 * e.lo, None if e.hi is None else 100 * e.hi, e.n, 0)
        return f"{100 * e.mean:.0f}%{ci} (q={e.n})"


def question_counts(run: Run, stream: set[int]) -> dict[int, dict[str, list[tuple[int, int]]]]:
    """fill -> retrieving agent (ALL last, in the config's order) -> per test question (stream-written
    retrievals, retrievals); questions that retrieved nothing are left out."""
    out = {}
    for fill, rows in sorted((run.predictions or {}).items()):
        per_agent: dict[str, list[tuple[int, int]]] = {}
        for (agent, _), row in rows.items():
            retrieved = [int(m) for m in row.get("retrieved") or []]
            if retrieved:
                counts = (sum(m in stream for m in retrieved), len(retrieved))
                for key in (agent, ALL):
                    per_agent.setdefault(key, []).append(counts)
        order = [a for a in dict.fromkeys([*run.record.agents, *sorted(per_agent)]) if a != ALL]
        out[fill] = {a: per_agent[a] for a in [*order, ALL] if a in per_agent}
    return out


def share(counts: Sequence[tuple[int, int]]) -> Share:
    return Share(sum(s for s, _ in counts), sum(n for _, n in counts), mean_ci([s / n for s, n in counts]))


def stream_share(run: Run, stream: set[int]) -> dict[int, dict[str, Share]]:
    return {fill: {a: share(c) for a, c in agents.items()} for fill, agents in question_counts(run, stream).items()}


def write_stream_share(runs: Sequence[Run], out: Path) -> dict[str, str]:
    """stream_share.md/.csv for every run with retrievals at two or more fills; returns run name -> the
    line summary.md shows beside its pool-growth curve."""
    for suffix in (".md", ".csv"):  # a rerun into the same --out must not keep an old one
        (out / f"{STREAM_SHARE}{suffix}").unlink(missing_ok=True)
    sections, lines = [], {}
    table = [
        ["run", "fill", "agent", "stream_retrievals", "retrievals", "share", "share_ci_lo", "share_ci_hi", "questions"]
    ]
    for run in runs:
        if len(run.fills) < 2 or not any(
            r.get("retrieved") for rows in (run.predictions or {}).values() for r in rows.values()
        ):
            continue
        found = stream_written(run.path, run.record.backbone)
        if found is None:
            log.warning("no stream share for %s: no pool file, memories.csv or decisions.jsonl", run.name)
            continue
        shares = stream_share(run, found[0])
        fills = [f for f in shares if shares[f]]
        agents = list(dict.fromkeys(a for f in fills for a in shares[f]))
        grid = [[a, *(shares[f][a].text() if a in shares[f] else "–" for f in fills)] for a in agents]
        sections += [
            f"## {run.name}",
            "",
            f"Stream-written memories read from `{found[1]}`.",
            "",
            markdown_grid(["agent", *(f"{f}% fill" for f in fills)], grid, 1),
            "",
        ]
        table += [
            [run.name, f, a, s.stream, s.retrievals, *(csv_number(x) for x in (e.mean, e.lo, e.hi)), e.n]
            for f in fills
            for a, s in shares[f].items()
            for e in [s.per_question]
        ]
        lines[run.name] = (
            "Share of each top k written by the stream (all agents): "
            + ", ".join(f"{f}% fill {shares[f][ALL].text()}" for f in fills)
            + f"; per agent: [{STREAM_SHARE}.md]({STREAM_SHARE}.md)"
        )
    if lines:
        (out / f"{STREAM_SHARE}.md").write_text(
            "\n".join(
                [
                    "# Stream memories in each top k (H3)",
                    "",
                    "Per fill and retrieving agent, the share of a test question's retrieved memories (`retrieved` in "
                    "predictions.jsonl, k per question) that the stream wrote rather than the data's seed pairs: the mean "
                    "over q test questions, with a 95% bootstrap CI over questions (a question's k retrievals are not "
                    "independent). Does the pool the stream grows take over the top k as it grows?",
                    "",
                    *sections,
                ]
            ),
            encoding="utf-8",
        )
        (out / f"{STREAM_SHARE}.csv").write_text(csv_text(table), encoding="utf-8")
    return lines
