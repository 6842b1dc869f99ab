"""How good are the answers a gate admits, against the references? `ms-data gate-quality RUN_DIR...`
scores each answer a finished run's gate judged (decisions.jsonl) against its stream question's
reference answer with BERTScore P/R/F1, built from the run's own `eval` settings, and writes
<run>/quality.jsonl, one line per decision in the same order. ms-report reads it where present and
writes quality.md/.csv: per run and agent, the mean of admitted and of rejected answers with 95% CIs.
A gate that tells good answers from bad should admit answers closer to the references than it rejects."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import UserError
from ms.common.stats import Estimate, mean_ci
from ms.config.files import DECISIONS_FILE, METRICS_FILE, QUALITY_FILE
from ms.metrics.evaluate import BERTSCORE_KEYS
from ms.report.common.render import csv_number, markdown_grid
from ms.report.common.runs import Run, read_jsonl

ALL = "all"
GROUPS = (("admitted", True), ("rejected", False))


def _section(config, key: str, schema):
    """The run's saved config section as `schema` types it. Keys the schema has dropped since are left
    out; keys added since take their defaults, which are what the run, predating them, ran with."""
    from dataclasses import fields

    from omegaconf import OmegaConf

    saved = OmegaConf.to_container(config[key], resolve=True) if config.get(key) is not None else {}
    known = {f.name for f in fields(schema)}
    return OmegaConf.merge(OmegaConf.structured(schema), {k: v for k, v in saved.items() if k in known})


def _run_settings(run_dir: Path):
    """(the run's saved config, its data's splits per agent), read as the run read them."""
    from omegaconf import OmegaConf

    from ms.agents import agents_from, default_agents
    from ms.config.schema import DataConfig
    from ms.data import load_splits

    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        raise UserError(f"{path}: not found; gate-quality reads the run's data and BERTScore settings from it")
    config = OmegaConf.load(path)
    # Runs from before the agents were a config group saved none: they ran the default agents.
    agents = agents_from(config.agents) if config.get("agents") else default_agents()
    return config, load_splits(_section(config, "data", DataConfig), agents)


def _decisions(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise UserError(f"{path}: not found; gate-quality scores the decisions a finished run recorded")
    out = []
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if text.strip():
            try:
                out.append((line, json.loads(text)))
            except json.JSONDecodeError as err:
                raise UserError(f"{path} line {line}: not JSON ({err})") from None
    return out


def match(question: str, examples: Sequence, whole_prompt: bool):
    """The stream example a decision's question is; with `whole_prompt` (memory.question=prompt, where
    the run stored the prompt, which ends with the query) the example whose question it ends with,
    the longest where several do (a shorter one is then a tail of the real question). None: no match."""
    found = [e for e in examples if e.question == question]
    if not found and whole_prompt:
        found = sorted(
            (e for e in examples if e.question and question.endswith(e.question)), key=lambda e: -len(e.question)
        )
    return found[0] if found else None


def quality_records(run_dir: Path, scorers: Optional[dict] = None) -> tuple[list[dict], list[str]]:
    """One record per decision of the run, in order, and notes to print. `scorers` caches a BERTScore
    per eval setting across runs (loading the model is the slow part)."""
    from omegaconf import OmegaConf

    from ms.config.schema import EvalConfig
    from ms.loop.cell import data_fingerprint
    from ms.metrics.evaluate import BERTScore

    config, splits = _run_settings(run_dir)
    whole_prompt = (config.get("memory") or {}).get("question") == "prompt"
    path = run_dir / DECISIONS_FILE
    records, todo = [], []
    for line, d in _decisions(path):
        example = match(
            d.get("question") or "", splits[d["agent"]].stream if d.get("agent") in splits else [], whole_prompt
        )
        if example is None:
            raise UserError(
                f"{path} line {line}: no stream example of agent {d.get('agent')!r} in "
                f"{config.data.dir} has this question ({(d.get('question') or '')[:80]!r})"
            )
        reference = example.answer if example.answer.strip() else None  # the authors' stream may have none
        records.append(
            {
                "step": d.get("step"),
                "agent": d["agent"],
                "id": example.id,
                "question": example.question,
                "accepted": bool(d.get("accepted")),
                "memory_id": d.get("memory_id"),
                "reference": reference,
            }
        )
        if reference is not None:
            todo.append((records[-1], d.get("answer") or ""))
    notes = []
    recorded = (_json(run_dir / METRICS_FILE).get("cell") or {}).get("data_sha256")
    if recorded and recorded != data_fingerprint(splits):
        notes.append(
            f"note: {config.data.dir} differs from the data the run read (metrics.json's fingerprint); "
            "the references are today's"
        )
    if todo:
        eval_cfg = _section(config, "eval", EvalConfig)
        key = OmegaConf.to_yaml(eval_cfg)
        scorers = {} if scorers is None else scorers
        scorer = scorers[key] = scorers.get(key) or BERTScore(eval_cfg)
        model = f"{scorer.name}, layer {scorer.num_layers}"
        for (record, _), scores in zip(todo, scorer.score([a for _, a in todo], [r["reference"] for r, _ in todo])):
            record.update(dict(zip(BERTSCORE_KEYS, scores)), bertscore=model)
    return records, notes


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: {err}") from None


def gate_quality(run_dirs: Sequence[str]) -> None:
    """`ms-data gate-quality`: write each run's quality.jsonl and say what was scored and what was not."""
    started, scorers = time.perf_counter(), {}
    for run in map(Path, run_dirs):
        records, notes = quality_records(run, scorers)
        out = run / QUALITY_FILE
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        missing = [r["agent"] for r in records if r["reference"] is None]
        by_agent = ", ".join(f"{a} {missing.count(a)}" for a in dict.fromkeys(missing))
        admitted = sum(r["accepted"] for r in records)
        print(
            f"{out}: {len(records)} decisions ({admitted} admitted, {len(records) - admitted} rejected); "
            f"{len(records) - len(missing)} scored, {len(missing)} without a reference"
            + (f" ({by_agent})" if missing else "")
        )
        for note in notes:
            print(note)
    print(f"wall time {time.perf_counter() - started:.0f} s")


# ---- ms-report: quality.md and quality.csv ----


def quality_rows(runs: Sequence[Run]) -> list[dict]:
    """Per run with a quality.jsonl, per agent (ALL first) and group (admitted, rejected): how many
    decisions, how many without a reference, and the mean P/R/F1 of the rest with their CIs."""
    rows = []
    for run in runs:
        path = run.path / QUALITY_FILE
        if not path.is_file():
            continue
        records = read_jsonl(path)
        for agent in [ALL, *dict.fromkeys(r["agent"] for r in records)]:
            for group, accepted in GROUPS:
                chosen = [r for r in records if r["accepted"] == accepted and agent in (ALL, r["agent"])]
                scored = [r for r in chosen if r.get("reference") is not None]
                rows.append(
                    {
                        "run": run.name,
                        "gate": run.gate,
                        "agent": agent,
                        "group": group,
                        "decisions": len(chosen),
                        "no_reference": len(chosen) - len(scored),
                        "model": next((r["bertscore"] for r in scored if r.get("bertscore")), None),
                        **{m: mean_ci([r[m] for r in scored]) for m in BERTSCORE_KEYS},
                    }
                )
    return rows


HEADER = ["agent", "answers", "decisions", "no reference", *(f"{m} [95% CI] n" for m in BERTSCORE_KEYS)]


def _cells(row: dict) -> list[str]:
    return [
        row["agent"],
        row["group"],
        str(row["decisions"]),
        str(row["no_reference"]),
        *(row[m].text(3) for m in BERTSCORE_KEYS),
    ]


def quality_markdown(rows: Sequence[dict]) -> str:
    parts = [
        "# Quality of what each gate admits",
        "",
        "Each stream answer a gate judged, scored by BERTScore against its stream question's reference answer "
        f"(`ms-data gate-quality RUN_DIR`, the run's own BERTScore settings; model: "
        f"{next((r['model'] for r in rows if r['model']), 'none scored')}). Per run and agent, the mean of the "
        "answers it admitted and of those it rejected, each with its 95% bootstrap CI over answers and n; "
        "`no reference`: decisions whose stream question has no reference answer, counted and not scored.",
        "",
    ]
    for run in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == run]
        parts += [f"## {run} (gate {mine[0]['gate']})", "", markdown_grid(HEADER, [_cells(r) for r in mine], 2), ""]
    return "\n".join(parts)


def quality_csv(rows: Sequence[dict]) -> str:
    out = io.StringIO()
    table = csv.writer(out, lineterminator="\n")
    table.writerow(
        [
            "run",
            "gate",
            "agent",
            "answers",
            "decisions",
            "no_reference",
            "n",
            *(f"{m}{s}" for m in BERTSCORE_KEYS for s in ("", "_ci_lo", "_ci_hi")),
        ]
    )
    for r in rows:
        estimates: list[Estimate] = [r[m] for m in BERTSCORE_KEYS]
        table.writerow(
            [
                r["run"],
                r["gate"],
                r["agent"],
                r["group"],
                r["decisions"],
                r["no_reference"],
                estimates[0].n,
                *(csv_number(x) for e in estimates for x in (e.mean, e.lo, e.hi)),
            ]
        )
    return out.getvalue()


def write_quality(runs: Sequence[Run], out: Path) -> str:
    """quality.md and quality.csv for the runs with a quality.jsonl; returns summary.md's section ('' if none)."""
    for stale in ("quality.md", "quality.csv"):  # a rerun into the same --out must not keep an old one
        (out / stale).unlink(missing_ok=True)
    rows = quality_rows(runs)
    if not rows:
        return ""
    (out / "quality.md").write_text(quality_markdown(rows), encoding="utf-8")
    (out / "quality.csv").write_text(quality_csv(rows), encoding="utf-8")
    overall = [r for r in rows if r["agent"] == ALL]
    return (
        "## Quality of what each gate admits\n\nBERTScore of each gated answer against its reference, admitted "
        "vs rejected; per agent: [quality.md](quality.md), [quality.csv](quality.csv).\n\n"
        + markdown_grid(
            ["run", "gate", "answers", "decisions", "no reference", *(f"{m} [95% CI] n" for m in BERTSCORE_KEYS)],
            [[r["run"], r["gate"], *_cells(r)[1:]] for r in overall],
            3,
        )
        + "\n"
    )
