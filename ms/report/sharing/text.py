"""A sharing matrix in words and numbers: its CSV (one block of rows per quantity), its section of
sharing.md (the table of shares and gains under the heatmap), the notes under both tables, and the
definitions sharing.md opens with."""

from collections import Counter

from ms.report.common.render import csv_number, csv_text, id_span, markdown_grid
from ms.report.common.runs import metric_label
from ms.report.common.writers import POISONER
from ms.report.sharing.counts import (
    ALL,
    OTHER_BACKBONE,
    OTHER_DOMAIN,
    OTHER_RUN,
    OWN,
    SAME_DOMAIN,
    UNKNOWN,
    Sharing,
    row_label,
)

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
        notes.append(
            f"{s.count(ALL, f'agent={UNKNOWN}')} retrievals of {len(ids)} memories (ids {id_span(ids)}) whose "
            f"writer no file of the run records: counted under `{UNKNOWN}`."
        )
    return notes


def sharing_csv(s: Sharing) -> str:
    """One block of rows per quantity (QUANTITIES), each with a row per retrieving agent and ALL."""
    table = [["quantity", "agent", *s.columns]]
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
            table.append([quantity, row, *cells])
    if not s.grants.open:  # 1 where the rule granted the row's agent the column's writer, 0 where it withheld it
        for row in s.rows[:-1]:
            table.append(
                [
                    "granted",
                    row,
                    *("" if not c.startswith("agent=") else str(int(not s.withheld(row, c))) for c in s.columns),
                ]
            )
    return csv_text(table)


def _share(s: Sharing, row: str, column: str) -> str:
    n, total = s.count(row, column), s.count(row, ALL)
    return f"{n / total:.0%} ({n})" if total else "–"


def _gain(s: Sharing, row: str, column: str) -> str:
    return s.estimate(row, column).text(3) if s.count(row, column) else "–"


def sharing_markdown(s: Sharing, stem: str) -> str:
    r, base = s.run.record, s.baseline
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
        f"{r.backbone}, k = {r.k}, {r.pool} pool, retriever {s.run.retriever_label}, fill {s.fill}%; "
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
    ]
    cells = [
        [
            "**all**" if row == ALL else row_label(s, row),
            str(s.count(row, ALL)),
            *(_share(s, row, c) for c in blocks + runs + backbones),
            *(_gain(s, row, c) for c in [*blocks, *runs, ALL]),
            *([] if rule.open else ["" if row == ALL else rule.text(row)]),
        ]
        for row in s.rows
    ]
    lines.append(markdown_grid(header, cells, len(header)))
    if f"run={OTHER_RUN}" in runs:
        by_run = ", ".join(f"`{name}` {n}" for name, n in sorted(s.other_runs.get(ALL, Counter()).items()))
        lines += ["", f"Retrievals of memories another run admitted, by that run: {by_run or 'none'}."]
    lines += [line for note in sharing_notes(s) for line in ("", note)]
    return "\n".join(lines) + "\n"
