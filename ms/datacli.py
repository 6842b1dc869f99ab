"""`ms-data`: look at, check and import the question-answer datasets."""

from __future__ import annotations

import argparse
import sys
from statistics import mean

from ms.data import Example, form_problem, import_paper, load_dir, split_examples


def _lengths(texts: list[str]) -> str:
    sizes = [len(t) for t in texts]
    return f"{mean(sizes):7.0f} {min(sizes):5d} {max(sizes):5d}"


def _row(name: str, examples: list[Example], sizes: list[int]) -> str:
    return (f"{name:<11} {len(examples):>5} {sizes[0]:>5} {sizes[1]:>6} {sizes[2]:>5}   "
            f"{_lengths([e.question for e in examples])}   {_lengths([e.answer for e in examples])}")


def stats(args: argparse.Namespace) -> None:
    data = load_dir(args.data_dir)
    rows, every, totals = [], [], [0, 0, 0]
    for agent, examples in data.items():
        parts = split_examples(examples, args.fractions, args.seed)
        sizes = [len(parts.seed), len(parts.stream), len(parts.test)]
        totals = [t + s for t, s in zip(totals, sizes)]
        every += examples
        rows.append(_row(agent, examples, sizes))
    print(f"{'agent':<11} {'pairs':>5} {'seed':>5} {'stream':>6} {'test':>5}   "
          f"{'question chars':^19}   {'answer chars':^19}")
    print(f"{'':<36}   {'mean':>7} {'min':>5} {'max':>5}   {'mean':>7} {'min':>5} {'max':>5}")
    print("\n".join(rows + [_row("all", every, totals)]))


def validate(args: argparse.Namespace) -> int:
    data = load_dir(args.data_dir)
    problems = [f"{e.id}: {problem}" for examples in data.values() for e in examples
                if (problem := form_problem(e))]
    for line in problems:
        print(f"form: {line}")
    print(f"{args.data_dir}: {len(data)} files, {sum(map(len, data.values()))} pairs valid; "
          f"{len(problems)} form problem(s)")
    return 1 if problems and args.strict else 0


def import_paper_cmd(args: argparse.Namespace) -> None:
    report = import_paper(args.path, args.out)
    for agent, counts in report["counts"].items():
        if any(counts.values()):
            print(f"{agent:<11} " + " ".join(f"{split}={n}" for split, n in counts.items()))
    print(f"imported {report['total']} items into {args.out}; unassigned: {report['unassigned']} "
          f"{report['unassigned_by_reason'] or ''} (see unassigned.jsonl)")
    for skipped in report["skipped_files"]:
        print(f"skipped {skipped}")


def invert_cmd(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from ms.invert import invert, read_answers
    from ms.llm import build_lm

    rows = read_answers(args.answers, args.agent)[: args.limit]
    cfg = _compose([f"backbone={args.backbone}", *args.overrides])
    made, empty = invert(build_lm(cfg.backbone, cfg.cache_dir, cfg.use_cache), rows)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(asdict(e), ensure_ascii=False) + "\n" for e in made)
    print(f"wrote {len(made)} stream questions to {args.out}")
    if empty:
        print(f"no question came back for {len(empty)} answer(s): {', '.join(empty)}", file=sys.stderr)
    return 0


def gate_check_cmd(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from ms.data import load_splits
    from ms.gatecheck import format_results, run_gate_check
    from ms.llm import build_lm
    from ms.pipeline import scorer_backbone
    from ms.scorer import Scorer, load_rubrics

    cfg = _compose(args.overrides)
    seeds = {agent: parts.seed[:args.per_agent] for agent, parts in load_splits(cfg.data).items()}
    started = time.perf_counter()
    scorer = Scorer(scorer_backbone(cfg, build_lm(cfg.backbone, cfg.cache_dir, cfg.use_cache)), load_rubrics(),
                    cfg.scorer)
    out = Path(args.out)
    results = run_gate_check(scorer, seeds, cfg.pool.mode, out)
    header = (f"Gate check: backbone {cfg.scorer.backbone or cfg.backbone.name}, score read from "
              f"{scorer.read}, {cfg.pool.mode} rubrics, up to {args.per_agent} seed pairs per agent from "
              f"{cfg.data.dir}; AUC of good vs corrupted (swapped, truncated, empty), 95% bootstrap CI; "
              f"{time.perf_counter() - started:.0f} s")
    text = format_results(results, header)
    (out / "gate_check.md").write_text("```\n" + text + "\n```\n", encoding="utf-8")
    print(text)
    return 0


def _compose(overrides):
    from hydra import compose, initialize_config_dir

    from ms.cli import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        return compose("config", overrides=list(overrides))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ms-data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser("stats", help="pairs per agent and split, and text lengths")
    show.add_argument("--data-dir", default="data")
    show.add_argument("--fractions", type=float, nargs=3, default=[0.2, 0.4, 0.4],
                      metavar=("SEED", "STREAM", "TEST"))
    show.add_argument("--seed", type=int, default=0, help="split seed")
    show.set_defaults(handler=stats)

    check = commands.add_parser("validate", help="check the schema of every file, and the poetic forms")
    check.add_argument("--data-dir", default="data")
    check.add_argument("--strict", action="store_true", help="fail on form problems too")
    check.set_defaults(handler=validate)

    paper = commands.add_parser("import-paper", help="convert the paper authors' repository layout")
    paper.add_argument("path", help="a checkout of the authors' repository")
    paper.add_argument("out", help="output folder for <agent>.jsonl and import_report.json")
    paper.set_defaults(handler=import_paper_cmd)

    inv = commands.add_parser("invert", help="let an agent write the question each answer responds to")
    inv.add_argument("answers", help="JSONL with an 'answer' (and 'agent', unless --agent) per line")
    inv.add_argument("out", help="JSONL of new stream examples in the project's schema")
    inv.add_argument("--agent", help="the agent of every line without an 'agent' field")
    inv.add_argument("--backbone", default="smollm2", help="a conf/backbone option")
    inv.add_argument("--limit", type=int, default=None, help="invert only the first N answers")
    inv.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. backbone.batch_size=4")
    inv.set_defaults(handler=invert_cmd)

    gate = commands.add_parser("gate-check", help="does the grader tell good pairs from corrupted copies? "
                                                  "per-agent ROC AUC with a 95%% CI")
    gate.add_argument("--per-agent", type=int, default=8, help="seed pairs per agent (default 8)")
    gate.add_argument("--out", default="gate_check", help="folder for gate_check.{md,csv} and the decisions")
    gate.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backbone=gpt-4o scorer.read=text")
    gate.set_defaults(handler=gate_check_cmd)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args) or 0
    except ValueError as err:  # DataError is one; so are bad split fractions
        print(f"ms-data: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
