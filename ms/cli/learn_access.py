"""`ms-data learn-access RUN --half H --out FILE`: learn an access rule from a finished run (k > 0, and a
k = 0 run of the same questions beside it) on one half of its test questions, and write it as a rule
file the `access` group loads (access=rule access.file=FILE). ms.report.sharing.access_rule says how."""

import argparse
from pathlib import Path

from ms.common.errors import UserError


def learn_access_cmd(args: argparse.Namespace) -> int:
    from ms.pool.access.table import write_rule_file
    from ms.report.cli import chosen_metric
    from ms.report.common.runs import find_runs
    from ms.report.common.writers import read_writers
    from ms.report.sharing.access_rule import CREDIT, evidence_record, learn_grants
    from ms.report.sharing.baseline import find_baseline

    folder = Path(args.run)
    found, _ = find_runs([folder])
    runs = [r for r in found if r.path == folder.resolve()]
    if not runs:
        raise UserError(f"learn-access: {folder} holds no finished run (metrics.json with complete: true)")
    run = runs[0]
    if run.cell[1] == 0:
        raise UserError(f"learn-access: {run.name} ran at k = 0: it retrieved nothing to learn grants from")
    if run.predictions is None:
        raise UserError(f"learn-access: {run.name} has no predictions.jsonl: no per-question gains to learn from")
    metric = chosen_metric([run], args.metric, [folder])
    fill = run.last_fill if args.fill is None else args.fill
    if fill not in run.predictions:
        raise UserError(f"learn-access --fill {fill}: {run.name} evaluated at fills {', '.join(map(str, run.fills))}")
    candidates, _ = find_runs([Path(p) for p in (args.baseline or [folder.resolve().parent])])
    baseline = find_baseline(run, candidates, metric, fill)
    if baseline is None:
        where = ", ".join(args.baseline or [str(folder.resolve().parent)])
        raise UserError(
            f"learn-access: no k = 0 run of the same backbone, data and prompt under {where} to measure "
            f"gains against (--baseline FOLDER)"
        )
    writers = read_writers(run.path, run.record.backbone)
    if writers is None:
        raise UserError(
            f"learn-access: {run.name} keeps neither a pool file nor memories.csv: who wrote what is unknown"
        )
    rule = learn_grants(run.predictions[fill], writers, baseline.values, metric, args.half, run.agents)
    learned = {
        "run": str(run.path),
        "baseline": str(baseline.run.path),
        "metric": metric,
        "fill": fill,
        "half": args.half,
        "scored_on": 1 - args.half,
        "questions": rule.questions,
        "credit": CREDIT,
        "evidence": evidence_record(rule),
    }
    comment = (
        f"Learned by: ms-data learn-access {run.path} --half {args.half}\n"
        f"Grants reader r writer w where r's retrievals of w's stream memories came with a gain in {metric} "
        f"(k = {run.cell[1]} minus k = 0) whose 95% CI lies above 0,\non half {args.half} of the test questions "
        f"({rule.questions} paired); score the rule on half {1 - args.half} only. Seeds stay granted.\n{CREDIT}."
    )
    path = write_rule_file(args.out, dict(rule.grants), learned=learned, comment=comment)
    print(
        f"learned from {run.name} at fill {fill}%, half {args.half} ({rule.questions} questions paired with "
        f"{baseline.run.name}), {metric}:"
    )
    for reader, writers_granted in rule.grants.items():
        others = sorted(w for w in writers_granted if w != "seed")
        print(f"  {reader}: seed{', ' if others else ''}{', '.join(others)}")
    print(f"rule file: {path} (ms-run access=rule access.file={path}; score it on half {1 - args.half} only)")
    return 0


def add_learn_access(commands) -> None:
    learn = commands.add_parser(
        "learn-access",
        help="learn an access rule from a finished run on one half of its test questions, as a rule file (access=rule)",
    )
    learn.add_argument("run", help="a finished run folder at k > 0 (predictions.jsonl, its pool or memories.csv)")
    learn.add_argument(
        "--half",
        type=int,
        choices=(0, 1),
        required=True,
        help="the half of the test questions to measure on; the rule is to be scored on the other",
    )
    learn.add_argument("--out", required=True, help="the rule file to write (YAML)")
    learn.add_argument("--metric", help="the metric key (default: the first the run recorded)")
    learn.add_argument("--fill", type=int, help="the fill to read (default: the run's last)")
    learn.add_argument(
        "--baseline",
        nargs="+",
        metavar="FOLDER",
        help="folders holding the k = 0 run to pair with (default: the run's own sweep folder)",
    )
    learn.set_defaults(handler=learn_access_cmd)
