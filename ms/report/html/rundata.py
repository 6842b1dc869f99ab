"""One run as the site shows it (data/run-<n>.js): its test questions at every fill with what each
retrieved, its answer and every value recorded; its memories; the gate's decisions; the k = 0 values
its questions pair with; and its sharing matrix, each cell with the retrievals behind it."""

import copy
from collections import defaultdict
from typing import Optional, Sequence

from ms.report.common.runs import Item, Run
from ms.report.common.saved_config import SavedConfig
from ms.report.common.writers import decisions_of
from ms.report.html.memories import Memories, run_memories
from ms.report.html.prompts import prompt_spec
from ms.report.sharing.baseline import find_baseline
from ms.report.sharing.counts import ALL, Sharing, sharing_matrix
from ms.report.sharing.grants import Grants
from ms.report.sharing.text import sharing_notes

# A prediction row's fields that are no value of the question (every other number is shown beside the metrics).
ROW_FIELDS = {"agent", "test_id", "k", "fill", "question", "reference", "retrieved", "answer"}
# `writer`: set on a poisoning writer's pairs, whose `agent` is the victim whose question it answered.
DECISION_FIELDS = (
    "step",
    "agent",
    "writer",
    "scope",
    "question",
    "answer",
    "score",
    "accepted",
    "reason",
    "read",
    "mass",
    "utility",
    "memory_id",
    "pool_size",
    "retriever_version",
    "index_staleness",
)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _questions(run: Run) -> tuple[list[list[str]], dict[Item, int], dict[str, list[dict]]]:
    """The test questions once ([agent, test id, question, reference]), their index, and each fill's rows."""
    tests: list[list[str]] = []
    index: dict[Item, int] = {}
    rows: dict[str, list[dict]] = {}
    for fill, by_item in sorted((run.predictions or {}).items()):
        out = []
        for item, row in by_item.items():
            if item not in index:
                index[item] = len(tests)
                tests.append([item[0], item[1], row.get("question") or "", row.get("reference") or ""])
            entry = {
                "t": index[item],
                "r": [int(i) for i in row.get("retrieved") or []],
                "m": {k: v for k, v in row.items() if k not in ROW_FIELDS and _number(v)},
            }
            if row.get("answer") is not None:
                entry["a"] = row["answer"]
            first = tests[index[item]]
            if (row.get("question") or "", row.get("reference") or "") != (first[2], first[3]):
                entry |= {"q": row.get("question") or "", "ref": row.get("reference") or ""}
            out.append(entry)
        rows[str(fill)] = out
    return tests, index, rows


def _baseline(run: Run, runs: Sequence[Run], index: dict[Item, int]) -> Optional[dict]:
    """The k = 0 values each question pairs with (ms.report.sharing.baseline), per metric the run measured."""
    if run.cell[1] == 0 or run.predictions is None:
        return None
    values, name = {}, None
    for metric in run.measured:
        base = find_baseline(run, runs, metric, run.last_fill)
        if base is not None and base.values:
            name = base.run.name
            values[metric] = {index[item]: v for item, v in base.values.items() if item in index}
    return {"run": name, "values": values} if values else None


def _sharing(
    run: Run, runs: Sequence[Run], memories: Memories, metric: str, fill: Optional[int], index: dict[Item, int]
) -> dict:
    """The run's sharing matrix as ms.report.sharing.matrices draws it, each cell with its retrievals; or
    why there is none."""
    at = run.last_fill if fill is None else fill
    rows = (run.predictions or {}).get(at, {})
    if run.cell[1] == 0 or not any(r.get("retrieved") for r in rows.values()):
        return {"missing": f"no retrievals at {at}% fill"}
    if not memories.writers:
        return {"missing": f"no file of the run's folder says who wrote the retrieved memories ({memories.source})"}
    # As sharing.md draws it: a memory whose writer no file records counts under its own column, said in the notes.
    s = sharing_matrix(run, memories.writers, find_baseline(run, runs, metric, at), metric, at)
    return {
        "fill": at,
        "metric": metric,
        "notes": sharing_notes(s),
        **_cells(s, _cell_memories(run, memories, metric, at), index),
    }


def _cell_memories(run: Run, memories: Memories, metric: str, at: int) -> dict[tuple[str, str], dict[Item, list[int]]]:
    """Which of each question's memories every cell counts: the matrix of one rank of the top k at a
    time (each question then adds one retrieval, to the cells its rank's memory falls in), so a cell's
    memories are classified by ms.report.sharing.matrices itself."""
    rows = run.predictions[at]
    out: dict[tuple[str, str], dict[Item, list[int]]] = defaultdict(lambda: defaultdict(list))
    for rank in range(max(len(r.get("retrieved") or []) for r in rows.values())):
        view = copy.copy(run)
        view.__dict__["predictions"] = {
            at: {item: {**r, "retrieved": (r.get("retrieved") or [])[rank : rank + 1]} for item, r in rows.items()}
        }
        for key, items in sharing_matrix(view, memories.writers, None, metric, at).weights.items():
            for item in items:
                out[key][item].append(int(rows[item]["retrieved"][rank]))
    return out


def _cells(s: Sharing, memory_ids: dict[tuple[str, str], dict[Item, list[int]]], index: dict[Item, int]) -> dict:
    counts, gains, cells = {}, {}, {}
    for row in s.rows:
        for column in s.columns:
            n = s.count(row, column)
            if not n:
                continue
            est = s.estimate(row, column)
            counts.setdefault(row, {})[column] = n
            gains.setdefault(row, {})[column] = [est.mean, est.lo, est.hi, est.n]
            cells.setdefault(row, {})[column] = [
                [index[item], ids] for item, ids in sorted(memory_ids[row, column].items(), key=lambda kv: index[kv[0]])
            ]
    return {
        "rows": s.rows,
        "columns": s.columns,
        "everyone": ALL,  # the column of all writers
        "counts": counts,
        "gains": gains,
        "cells": cells,
        "baseline": s.baseline.run.name if s.baseline else None,
        "paired": len(s.gain),
        "domains": s.domains,
        "backbone_of": s.backbone_of,
    }


def run_data(
    run: Run, runs: Sequence[Run], metric: str, sharing_fill: Optional[int] = None, label: Optional[str] = None
) -> dict:
    """Everything the site shows of one run, JSON-ready; `label` names it on its page (ms.report.common.run_labels)."""
    tests, index, rows = _questions(run)
    memories = run_memories(run)
    if run.cell[1] == 0 and not any(r["r"] for fill in rows.values() for r in fill):
        # k = 0 reads no memory: its pool's seeds would only weigh on the page
        memories = Memories({}, "none shown: at k = 0 no test question read the pool", [], memories.writers)
    prompt, prompt_missing = prompt_spec(SavedConfig.of(run.path))
    poison = run.record.poison
    data = {
        "name": run.name,
        "label": label or run.words(),
        "fields": run.record.to_json(),
        "words": run.words(),
        "gate": run.gate_words,
        "retriever": run.retriever_words,
        **{key: getattr(run, key) for key in ("memory", "fills", "measured")},
        "tests": tests,
        "rows": rows,
        "prompt": prompt,
        "prompt_missing": prompt_missing,
        "memories": memories.records,
        "memory_source": memories.source,
        "memory_missing": memories.missing,
        "decisions": [{k: d[k] for k in DECISION_FIELDS if d.get(k) is not None} for d in decisions_of(run.path)],
        "baseline": _baseline(run, runs, index),
        # the run's header: the access rule it retrieved under and its poisoning writer, in words
        "access": Grants(run.record.access).describe(),
        "poison": (
            f"poison={poison.kind}: writer `{poison.writer}` answering the questions of {poison.victim}"
            if poison
            else "no poisoning writer"
        ),
    }
    if run.predictions is None:
        data["no_predictions"] = "this run's folder holds no predictions.jsonl (runs from before it was written)"
    else:
        data["sharing"] = _sharing(run, runs, memories, metric, sharing_fill, index)
    return data
