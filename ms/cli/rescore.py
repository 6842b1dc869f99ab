"""`ms-rescore`: BERTScore of finished runs' saved answers under another encoder, with no generation.

    ms-rescore results/figure4_bertscore_offline/runs --model mpnet --out outputs/rescored/mpnet
    ms-report outputs/rescored/mpnet --metric P

Every run folder under the roots that holds predictions.jsonl is copied to the same relative path
under --out, with P, R and F1 scored anew (ms.metrics.rescore); ms-report then draws the copy.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Optional, Sequence

from tqdm import tqdm

from ms.common.errors import DEBUG_ENV, USER_ERROR_EXIT, UserError, report_user_errors
from ms.config.files import PREDICTIONS_FILE
from ms.config.schema import EvalConfig
from ms.report.common.runs import run_folders


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
    from ms.metrics.evaluate import BERTScore
    from ms.metrics.rescore import rescore_run

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
