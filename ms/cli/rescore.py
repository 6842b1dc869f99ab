"""`ms-rescore`: BERTScore of finished runs' saved answers under another encoder, with no generation.

    ms-rescore results/figure4_bertscore_offline/runs --model mpnet --out outputs/rescored/mpnet
    ms-report outputs/rescored/mpnet --metric P

Every run folder under the roots that holds predictions.jsonl (a run that measured BERTScore keeps each
generated answer and its reference there) is copied to the same relative path under --out, with P, R and
F1 (each row's and each fill's summary) scored anew, and metrics.json saying which encoder that is and
where the answers came from; ms-report then draws the copy like any run.
"""

import argparse
import json
import logging
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from tqdm import tqdm

from ms.common.errors import DEBUG_ENV, USER_ERROR_EXIT, UserError, report_user_errors
from ms.config.files import METRICS_FILE, PREDICTIONS_FILE
from ms.config.schema import EvalConfig
from ms.data.load import write_jsonl
from ms.loop.run_metrics import RunMetrics
from ms.metrics.evaluate import BERTSCORE_KEYS, BERTScore, summarize
from ms.metrics.summary_record import BertScoreRecord, FillSummary, Scores
from ms.report.common.runs import numbered_jsonl, run_folders

COPIED = ("decisions.jsonl", "retirements.jsonl", "llm_usage.json", "run_id", "memories.csv")


def _jobs(roots: Sequence[Path], out: Path) -> list[tuple[Path, Path]]:
    """(run folder, its copy under out) for every run with predictions.jsonl; the same relative path
    under two roots gets the root's name in front."""
    jobs, taken = [], set()
    for root in roots:
        for folder in run_folders(root):
            if not (folder / PREDICTIONS_FILE).is_file():
                continue
            relative = folder.relative_to(root)
            target = out / relative if relative not in taken else out / root.name / relative
            taken.add(relative)
            jobs.append((folder, target))
    return jobs


def rescore(roots: Sequence[Path], out: Path, model: Optional[str], num_layers: Optional[int], batch: int) -> int:
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        raise UserError(f"not a folder: {', '.join(missing)}")
    if out.resolve() in [r.resolve() for r in roots] or any(out.resolve().is_relative_to(r.resolve()) for r in roots):
        raise UserError(f"--out {out} lies inside a folder being rescored; name a folder outside it")
    jobs = _jobs(roots, out)
    if not jobs:
        raise UserError(f"no run folder with {PREDICTIONS_FILE} under {', '.join(map(str, roots))}")
    scorer = BERTScore(EvalConfig(model=model, num_layers=num_layers, batch_size=batch))
    for folder, target in tqdm(jobs, desc=f"rescoring with {scorer.name}, layer {scorer.num_layers}", unit="run"):
        try:
            n = rescore_run(folder, target, scorer)
        except ValueError as err:
            raise UserError(str(err)) from None
        tqdm.write(f"{folder} -> {target}: {n} answers")
    print(f"{len(jobs)} run(s) rescored into {out}/ (draw them: ms-report {out} --metric P)")
    return 0


def rescore_run(folder: Path, out: Path, scorer: BERTScore) -> int:
    """Write `out`, a copy of the run `folder` scored by `scorer`. Returns the rows scored. Only rows
    that hold an answer are scored (ref_logprob-only runs have none: a ValueError names the file)."""
    predictions, metrics_path = folder / PREDICTIONS_FILE, folder / METRICS_FILE
    for path in (predictions, metrics_path):
        if not path.is_file():
            raise ValueError(f"{folder}: no {path.name}; only a finished run's answers can be rescored")
    rows = [row for _, row in numbered_jsonl(predictions, strict=True)]
    answered = [r for r in rows if "answer" in r]
    if not answered:
        raise ValueError(f"{predictions}: no generated answers (a ref_logprob-only run): nothing to rescore")
    scores = scorer.score([r["answer"] for r in answered], [r["reference"] for r in answered])
    for row, values in zip(answered, scores):
        row.update(zip(BERTSCORE_KEYS, values))

    metrics = RunMetrics.read(metrics_path)
    fills = {}
    for fill, summary in metrics.fills.items():
        fresh = FillSummary.from_json(summarize([r for r in answered if int(r["fill"]) == fill], BERTSCORE_KEYS))
        per_agent = {agent: _replaced(scope, fresh.scores(agent)) for agent, scope in summary.per_agent.items()}
        fills[fill] = FillSummary(_replaced(summary.overall, fresh.overall), per_agent)
    described = BertScoreRecord.from_json({**scorer.describe(), "rescored_from": str(folder)})
    cell = metrics.cell
    if cell is not None and cell.config is not None and "eval.model" in cell.config:  # a cell of its own encoder
        cell = replace(cell, config={**cell.config, "eval.model": scorer.cfg.model})
    metrics = replace(metrics, fills=fills, described={**metrics.described, "bertscore": described}, cell=cell)

    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / PREDICTIONS_FILE, rows)
    (out / METRICS_FILE).write_text(json.dumps(metrics.to_json(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    for name in COPIED:
        if (folder / name).is_file():
            shutil.copy2(folder / name, out / name)
    if (folder / ".hydra").is_dir():
        shutil.copytree(folder / ".hydra", out / ".hydra", dirs_exist_ok=True)
    return len(answered)


def _replaced(scores: Scores, fresh: Scores) -> Scores:
    """One summary scope (overall or an agent's) with the BERTScore keys `fresh` holds replaced by its."""
    keys = [key for key in BERTSCORE_KEYS if key in fresh.means]
    if not keys:
        return scores
    n = {**scores.n, **{key: fresh.n[key] for key in keys}} if isinstance(scores.n, dict) else scores.n
    ci = {**(scores.ci or {}), **{key: fresh.ci[key] for key in keys}}
    means = {**scores.means, **{key: fresh.means[key] for key in keys}}
    return replace(scores, n=n, ci=ci, means=means, absent=scores.absent - {"ci"})


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ms-rescore",
        description="BERTScore P, R and F1 of finished runs' saved answers under another encoder (no generation)",
    )
    parser.add_argument("roots", nargs="+", type=Path, metavar="RUNS", help="run folders, or folders holding them")
    parser.add_argument("--out", type=Path, required=True, help="where the rescored copies go (a new folder)")
    parser.add_argument(
        "--model", help="mpnet (the packaged all-mpnet-base-v2, layer 12), or a hub name; default: the packaged MiniLM"
    )
    parser.add_argument("--num-layers", type=int, help="the layer compared; default: the model's own")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--debug", action="store_true", help="show the traceback of one-line errors")
    args = parser.parse_args(argv)
    if args.debug:
        os.environ[DEBUG_ENV] = "1"
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    result = report_user_errors(
        "ms-rescore", lambda: rescore(args.roots, args.out, args.model, args.num_layers, args.batch_size)
    )
    return USER_ERROR_EXIT if result == USER_ERROR_EXIT else 0


if __name__ == "__main__":
    raise SystemExit(main())
