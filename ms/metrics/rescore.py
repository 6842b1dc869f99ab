"""BERTScore again, with another encoder, from the answers a run saved: no generation.

A run that measured BERTScore keeps each generated answer and its reference in predictions.jsonl.
`rescore_run` scores those pairs with the encoder asked for and writes a copy of the run folder in
which P, R and F1 (each row's and each fill's summary) are the new encoder's, and metrics.json says
which encoder that is and where the answers came from. ms-report reads the copy like any run, so
every table, claim and figure can be drawn under the second encoder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ms.config.files import METRICS_FILE, PREDICTIONS_FILE
from ms.metrics.evaluate import BERTSCORE_KEYS, BERTScore, summarize

COPIED = ("decisions.jsonl", "retirements.jsonl", "llm_usage.json", "run_id", "memories.csv")


def _rows(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {n}: not JSON ({err.msg})") from None
    return rows


def rescore_run(folder: Path, out: Path, scorer: BERTScore) -> int:
    """Write `out`, a copy of the run `folder` scored by `scorer`. Returns the rows scored. Only rows
    that hold an answer are scored (ref_logprob-only runs have none: a ValueError names the file)."""
    predictions, metrics_path = folder / PREDICTIONS_FILE, folder / METRICS_FILE
    for path in (predictions, metrics_path):
        if not path.is_file():
            raise ValueError(f"{folder}: no {path.name}; only a finished run's answers can be rescored")
    rows = _rows(predictions)
    answered = [r for r in rows if "answer" in r]
    if not answered:
        raise ValueError(f"{predictions}: no generated answers (a ref_logprob-only run): nothing to rescore")
    scores = scorer.score([r["answer"] for r in answered], [r["reference"] for r in answered])
    for row, values in zip(answered, scores):
        row.update(zip(BERTSCORE_KEYS, values))

    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    for fill, summary in metrics["fills"].items():
        fresh = summarize([r for r in answered if str(r["fill"]) == fill], BERTSCORE_KEYS)
        _replace(summary["overall"], fresh["overall"])
        for agent, scope in summary["per_agent"].items():
            _replace(scope, fresh["per_agent"].get(agent, {}))
    metrics["bertscore"] = {**scorer.describe(), "rescored_from": str(folder)}
    cell = (metrics.get("cell") or {}).get("config")
    if isinstance(cell, dict) and "eval.model" in cell:  # the copy is a cell of its own encoder
        cell["eval.model"] = scorer.cfg.model

    out.mkdir(parents=True, exist_ok=True)
    (out / PREDICTIONS_FILE).write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    (out / METRICS_FILE).write_text(json.dumps(metrics, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name in COPIED:
        if (folder / name).is_file():
            shutil.copy2(folder / name, out / name)
    if (folder / ".hydra").is_dir():
        shutil.copytree(folder / ".hydra", out / ".hydra", dirs_exist_ok=True)
    return len(answered)


def _replace(scope: dict, fresh: dict) -> None:
    """The BERTScore keys of one summary scope (overall or an agent) replaced by the fresh ones."""
    for key in BERTSCORE_KEYS:
        if key in fresh:
            scope[key] = fresh[key]
            scope.setdefault("ci", {})[key] = fresh["ci"][key]
            if isinstance(scope.get("n"), dict):
                scope["n"][key] = fresh["n"][key]
