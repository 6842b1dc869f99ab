"""`ms-data gate-quality RUN_DIR...`: how good are the answers a gate admits, against the references? It
scores each answer a finished run's gate judged (decisions.jsonl) against its stream question's reference
answer with BERTScore P/R/F1, built from the run's own `eval` settings, and writes <run>/quality.jsonl, one
line per decision in the same order; ms-report reads it where present (ms.report.usage.quality)."""

import json
import time
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import UserError
from ms.config.files import DECISIONS_FILE, METRICS_FILE, QUALITY_FILE
from ms.loop.run_metrics import RunMetrics
from ms.metrics.evaluate import BERTSCORE_KEYS, BERTScore
from ms.report.common.runs import numbered_jsonl
from ms.report.common.saved_config import SAVED, SavedConfig


def _run_settings(run_dir: Path):
    """(the run's saved config, its data folder, its data's splits per agent), read as the run read them."""
    from ms.config.schema import DataConfig
    from ms.data import load_splits

    path = run_dir / SAVED
    if not path.is_file():
        raise UserError(f"{path}: not found; gate-quality reads the run's data and BERTScore settings from it")
    saved = SavedConfig.of(run_dir)
    data = saved.typed("data", DataConfig)
    return saved, data.dir, load_splits(data, saved.run_agents())


def _decisions(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise UserError(f"{path}: not found; gate-quality scores the decisions a finished run recorded")
    return numbered_jsonl(path, strict=True)


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

    saved, data_dir, splits = _run_settings(run_dir)
    whole_prompt = saved.memory_question == "prompt"
    path = run_dir / DECISIONS_FILE
    records, todo = [], []
    for line, d in _decisions(path):
        example = match(
            d.get("question") or "", splits[d["agent"]].stream if d.get("agent") in splits else [], whole_prompt
        )
        if example is None:
            raise UserError(
                f"{path} line {line}: no stream example of agent {d.get('agent')!r} in "
                f"{data_dir} has this question ({(d.get('question') or '')[:80]!r})"
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
    recorded = _data_fingerprint(run_dir / METRICS_FILE)
    if recorded and recorded != data_fingerprint(splits):
        notes.append(
            f"note: {data_dir} differs from the data the run read (metrics.json's fingerprint); "
            "the references are today's"
        )
    if todo:
        eval_cfg = saved.typed("eval", EvalConfig)
        key = OmegaConf.to_yaml(eval_cfg)
        scorers = {} if scorers is None else scorers
        scorer = scorers[key] = scorers.get(key) or BERTScore(eval_cfg)
        model = f"{scorer.name}, layer {scorer.num_layers}"
        for (record, _), scores in zip(todo, scorer.score([a for _, a in todo], [r["reference"] for r, _ in todo])):
            record.update(dict(zip(BERTSCORE_KEYS, scores)), bertscore=model)
    return records, notes


def _data_fingerprint(path: Path) -> Optional[str]:
    """The fingerprint of the examples the run read, as its metrics.json records it (`cell`); None where
    it records none (or there is no metrics.json)."""
    if not path.is_file():
        return None
    cell = RunMetrics.read(path).cell
    return cell.data_sha256 if cell is not None else None


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
