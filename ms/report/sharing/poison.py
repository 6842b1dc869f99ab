"""poison.md, poison.csv and poison.png/.pdf: for each run with a poisoning writer (`run.poison` in metrics.json,
ms.data.poison), how far its memories spread and whom they hurt; poison.md's opening paragraph (poison_markdown)
says what each number is. The poisoner's memories are read from the pool file or memories.csv as the sharing matrix
reads them; the clean run is the one whose fields are the same but for the poisoner and the access rule."""

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from ms.common.stats import MIN_CI_N, Estimate, mean_ci
from ms.config.parts import ACCESS_RULES
from ms.data.poison_record import PoisonRecord
from ms.report.common.labels import option
from ms.report.common.render import csv_number, csv_text, markdown_grid
from ms.report.common.runs import Run, metric_label
from ms.report.common.writers import decisions_of, read_writers
from ms.report.figures.canvas import new_figure, save_figure

FILE = "poison"
VICTIM, OTHERS = "victim", "others"
SIDES = {VICTIM: "the victim", OTHERS: "the other agents"}
BAR = 0.38  # the height of one side's bar in a run's row (two sides per row)


def clean_twin(run: Run, runs: Sequence[Run]) -> Optional[Run]:
    """The newest run without a poisoner whose fields equal `run`'s but for the poisoner, its access rule
    and its seed, on the same examples."""

    def rest(r: Run) -> dict:
        return r.record.without("poison", "access", "seed")

    found = [r for r in runs if r.record.poison is None and r.data == run.data and rest(r) == rest(run)]
    return max(found, key=lambda r: (r.finished, r.name)) if found else None


@dataclass
class Spread:
    """What one poisoned run shows."""

    run: Run
    poison: PoisonRecord
    asked: Optional[int]
    admitted: Optional[int]  # from the pool where it could be read, else metrics.json's count
    retrievals: dict[str, tuple[int, int]]  # VICTIM / OTHERS -> (retrievals of poisoned memories, all retrievals)
    marked: dict[str, tuple[int, int]]  # "stream: victim" ... -> (answers with the marker, answers)
    harm: dict[str, Estimate]  # VICTIM / OTHERS -> the metric's change against the clean run
    clean: Optional[Run]


def _retrievals(run: Run, victim: str, poisoned: set[int]) -> dict[str, tuple[int, int]]:
    counts = {VICTIM: [0, 0], OTHERS: [0, 0]}
    for (agent, _), row in (run.predictions or {}).get(run.last_fill, {}).items():
        ids = [int(m) for m in row.get("retrieved") or []]
        side = counts[VICTIM if agent == victim else OTHERS]
        side[0] += sum(m in poisoned for m in ids)
        side[1] += len(ids)
    return {k: (a, b) for k, (a, b) in counts.items()}


def _marked(run: Run, victim: str, marker: str) -> dict[str, tuple[int, int]]:
    """Answers that carry the marker: the agents' own stream answers (decisions.jsonl), and the test
    answers at the last fill where the run generated them (BERTScore runs)."""
    out = {}
    own = [d for d in decisions_of(run.path) if not d.get("writer")]
    tests = [
        (a, r["answer"])
        for (a, _), r in (run.predictions or {}).get(run.last_fill, {}).items()
        if isinstance(r.get("answer"), str)
    ]
    for where, answers in (("stream", [(d["agent"], d.get("answer") or "") for d in own]), ("test", tests)):
        if not answers:
            continue
        for side, keep in ((VICTIM, lambda a: a == victim), (OTHERS, lambda a: a != victim)):
            mine = [text for a, text in answers if keep(a)]
            out[f"{where}: {side}"] = (sum(marker in text for text in mine), len(mine))
    return out


def _harm(run: Run, clean: Optional[Run], victim: str, metric: str) -> dict[str, Estimate]:
    if clean is None:
        return {}
    mine, theirs = run.values(metric, run.last_fill) or {}, clean.values(metric, clean.last_fill) or {}
    shared = sorted(mine.keys() & theirs.keys())
    return {
        side: mean_ci([mine[q] - theirs[q] for q in shared if (q[0] == victim) == (side == VICTIM)])
        for side in (VICTIM, OTHERS)
    }


def spread(run: Run, runs: Sequence[Run], metric: str) -> Spread:
    poison = run.record.poison
    victim, writer = poison.victim, poison.writer
    counts = run.written.stream.poison  # None: not recorded
    writers = read_writers(run.path, run.record.backbone)
    poisoned = {i for i, w in (writers or {}).items() if w.agent == writer}
    admitted = len(poisoned) if writers is not None else (counts.accepted if counts else None)
    marker = poison.marker
    clean = clean_twin(run, runs)
    return Spread(
        run,
        poison,
        counts.asked if counts else None,
        admitted,
        _retrievals(run, victim, poisoned),
        _marked(run, victim, marker) if marker else {},
        _harm(run, clean, victim, metric),
        clean,
    )


def _share(counts: Optional[tuple[int, int]]) -> str:
    if counts is None:
        return "–"
    n, total = counts
    return f"{n} of {total}" + (f" ({n / total:.0%})" if total else "")


def _change(s: Spread, side: str) -> str:
    return s.harm[side].text(3, signed=True) if side in s.harm else "–"


def poison_markdown(found: Sequence[Spread], metric: str) -> str:
    columns: dict[str, Callable[[Spread], object]] = {
        "run": lambda s: f"`{s.run.name}`",
        "kind": lambda s: s.poison.kind,
        "victim": lambda s: s.poison.victim,
        "gate": lambda s: s.run.gate,
        "access": lambda s: option(ACCESS_RULES, s.run.record.access),
        "asked": lambda s: "–" if s.asked is None else s.asked,
        "admitted": lambda s: "–" if s.admitted is None else s.admitted,
        "victim's retrievals": lambda s: _share(s.retrievals[VICTIM]),
        "others' retrievals": lambda s: _share(s.retrievals[OTHERS]),
        "marker: victim's stream answers": lambda s: _share(s.marked.get("stream: victim")),
        "marker: others' stream answers": lambda s: _share(s.marked.get("stream: others")),
        f"change, victim ({metric_label(metric)})": lambda s: _change(s, VICTIM),
        "change, others": lambda s: _change(s, OTHERS),
        "clean run": lambda s: f"`{s.clean.name}`" if s.clean else "none",
    }
    rows = [[value(s) for value in columns.values()] for s in found]
    return "\n".join(
        [
            "# A poisoned writer",
            "",
            "Each run with a poisoning writer (any `poison=` option but `none`): the pairs it asked the gate to "
            "admit (one per stream question of its victim) and those admitted; the test questions' retrievals of its "
            "memories at the run's last fill (k per question), by the victim and by the other agents; for an "
            "injection, the agents' own stream answers that carry its marker; and the change in the metric against "
            "the clean run (the same fields without the poisoner and its access rule), paired per test question, "
            "mean with its 95% bootstrap CI and n (higher is better: a negative change is harm).",
            "",
            markdown_grid(list(columns), rows, 5),
            "",
            f"![A poisoned writer: retrievals of its memories and the change against the clean run]({FILE}.png) "
            f"([pdf]({FILE}.pdf))",
            "",
        ]
    )


NO_CHANGE = Estimate(None, None, None, 0)  # a side without a clean run to set it against
# poison.csv's columns, each with what it holds of a run's side (VICTIM or OTHERS).
CSV_COLUMNS: dict[str, Callable[[Spread, str], object]] = {
    "run": lambda s, side: s.run.name,
    "kind": lambda s, side: s.poison.kind,
    "victim": lambda s, side: s.poison.victim,
    "gate": lambda s, side: s.run.gate,
    "asked": lambda s, side: "" if s.asked is None else s.asked,
    "admitted": lambda s, side: "" if s.admitted is None else s.admitted,
    "side": lambda s, side: side,
    "poisoned_retrievals": lambda s, side: s.retrievals[side][0],
    "retrievals": lambda s, side: s.retrievals[side][1],
    "stream_marked": lambda s, side: s.marked.get(f"stream: {side}", ("", ""))[0],
    "stream_answers": lambda s, side: s.marked.get(f"stream: {side}", ("", ""))[1],
    "test_marked": lambda s, side: s.marked.get(f"test: {side}", ("", ""))[0],
    "test_answers": lambda s, side: s.marked.get(f"test: {side}", ("", ""))[1],
    "change": lambda s, side: csv_number(s.harm.get(side, NO_CHANGE).mean),
    "change_ci_lo": lambda s, side: csv_number(s.harm.get(side, NO_CHANGE).lo),
    "change_ci_hi": lambda s, side: csv_number(s.harm.get(side, NO_CHANGE).hi),
    "change_n": lambda s, side: s.harm.get(side, NO_CHANGE).n,
    "clean_run": lambda s, side: s.clean.name if s.clean else "",
}


def poison_csv(found: Sequence[Spread]) -> str:
    rows = [[value(s, side) for value in CSV_COLUMNS.values()] for s in found for side in (VICTIM, OTHERS)]
    return csv_text([list(CSV_COLUMNS), *rows])


def _label(s: Spread) -> str:
    access = option(ACCESS_RULES, s.run.record.access)
    return f"{s.poison.kind}, gate={s.run.gate}, {access}" + ("" if s.clean else "\n(no clean run)")


def _distinct(labels: list[str], found: Sequence[Spread]) -> list[str]:
    """Two runs of one kind, gate and rule (seeds, another metric) get the fields they differ in, so
    that the labels stay short enough to leave the axes their room."""
    out = []
    for label, s in zip(labels, found):
        twins = [t for other, t in zip(labels, found) if other == label and t is not s]
        mine = s.run.record.to_json()
        theirs = [t.run.record.to_json() for t in twins]
        keys = sorted({k for other in theirs for k in mine.keys() | other.keys() if mine.get(k) != other.get(k)})
        out.append(label + "".join(f", {k}={mine.get(k)}" for k in keys) if twins else label)
    return out


def poison_figure(found: Sequence[Spread], metric: str) -> Figure:
    """One row per poisoned run (kind, gate, access rule), the victim's bar or point beside the other
    agents': left, the share of their test questions' retrievals that were the poisoner's memories; right,
    the change in the metric against the clean run with its 95% CI bar (none at n < MIN_CI_N; no point
    without a clean run). The numbers are the Spreads' own, as poison.md and poison.csv show them."""
    labels = _distinct([_label(s) for s in found], found)
    fig = new_figure(11, 2.2 + 0.6 * len(found))
    share, change = fig.subplots(1, 2, sharey=True)
    rows = np.arange(len(found))
    for i, side in enumerate((VICTIM, OTHERS)):
        at = rows + (i - 0.5) * BAR
        counts = [s.retrievals[side] for s in found]
        bars = share.barh(
            at, [n / total if total else np.nan for n, total in counts], height=BAR, color=f"C{i}", label=SIDES[side]
        )
        share.bar_label(bars, [f"{n} of {total}" for n, total in counts], padding=3, fontsize="x-small")
        points = [(y, s.harm[side]) for y, s in zip(at, found) if s.harm.get(side) and s.harm[side].mean is not None]
        if points:
            spans = [[0.0, 0.0] if e.lo is None else [e.mean - e.lo, e.hi - e.mean] for _, e in points]
            change.errorbar(
                [e.mean for _, e in points],
                [y for y, _ in points],
                xerr=np.array(spans).T,
                fmt="o",
                capsize=4,
                color=f"C{i}",
                label=SIDES[side],
            )
    share.set_yticks(rows, labels)
    share.invert_yaxis()  # the table's order, top to bottom
    share.set_xlim(0, 1.15)  # room for the counts beside a full bar
    share.set_xticks(np.linspace(0, 1, 5))
    share.set_xlabel("share of the test questions' retrievals\nthat are the poisoner's memories")
    change.axvline(0.0, color="grey", linewidth=0.8)
    change.set_xlabel(f"change in {metric_label(metric)}\nagainst the clean run (negative: harm)")
    for ax in (share, change):
        ax.grid(axis="x", alpha=0.3)
    fig.legend(*share.get_legend_handles_labels(), fontsize="small", loc="outside lower center", ncol=2, frameon=False)
    victims = ", ".join(sorted({str(s.poison.victim) for s in found}))
    fig.suptitle(
        f"A poisoned writer (victim: {victims}): how far its memories spread and the change they made\n"
        f"(at each run's last fill, paired per test question; bar: 95% bootstrap CI, none at n < {MIN_CI_N})"
    )
    return fig


def write_poison(runs: Sequence[Run], out: Path, metric: str) -> str:
    """poison.md, poison.csv and poison.png/.pdf where some run had a poisoning writer; returns a line for
    summary.md."""
    for suffix in (".md", ".csv", ".png", ".pdf"):  # a rerun into the same --out must not keep an old one
        (out / f"{FILE}{suffix}").unlink(missing_ok=True)
    found = [spread(run, runs, metric) for run in runs if run.record.poison is not None]
    if not found:
        return ""
    (out / f"{FILE}.md").write_text(poison_markdown(found, metric), encoding="utf-8")
    (out / f"{FILE}.csv").write_text(poison_csv(found), encoding="utf-8")
    png = save_figure(poison_figure(found, metric), out, FILE)
    return (
        f"A poisoned writer: its memories admitted, retrieved, and the change against the clean run "
        f"([{FILE}.md]({FILE}.md); figure: [{png}]({png}))"
    )
