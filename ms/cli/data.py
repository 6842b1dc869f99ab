"""`ms-data`: look at, check and import the question-answer datasets."""

import argparse
import sys
from pathlib import Path
from statistics import mean

from ms.cli.compose import compose_checked
from ms.cli.forget import add_forget
from ms.cli.gate_commands import add_gate_commands
from ms.cli.learn_access import add_learn_access
from ms.common.errors import UserError, report_user_errors, take_debug_flag
from ms.data import (
    Example,
    drop_leaked_tests,
    form_problem,
    format_hygiene,
    hygiene_report,
    import_paper,
    line_numbers,
    load_dir,
    split_examples,
    with_splits,
    write_dir,
    write_hygiene,
)
from ms.data.paper import ONEPOOL
from ms.data.reference_twins import format_twins, reference_twins, write_twin_ids


def _lengths(texts: list[str]) -> str:
    sizes = [len(t) for t in texts]
    return f"{mean(sizes):7.0f} {min(sizes):5d} {max(sizes):5d}"


def _row(name: str, examples: list[Example], sizes: list[int]) -> str:
    return (
        f"{name:<11} {len(examples):>5} {sizes[0]:>5} {sizes[1]:>6} {sizes[2]:>5}   "
        f"{_lengths([e.question for e in examples])}   {_lengths([e.answer for e in examples])}"
    )


def _load(args: argparse.Namespace) -> dict:
    """The data folder's files. With `--agents NAME` (conf/agents/NAME.yaml, composed as `ms-run
    agents=NAME` composes it) every agent of the set must have its file, as ms-run needs; without
    it, the files there, each checked against the default agent set."""
    from ms.agents import DEFAULT_AGENTS, agents_from, default_agents

    if args.agents is None:
        return load_dir(args.data_dir)
    agents = (
        default_agents()
        if args.agents == DEFAULT_AGENTS
        else agents_from(compose_checked([f"agents={args.agents}"], check=False).agents)
    )
    return load_dir(args.data_dir, list(agents), agents=agents)


def stats(args: argparse.Namespace) -> None:
    data = _load(args)
    rows, every, totals = [], [], [0, 0, 0]
    for agent, examples in data.items():
        try:
            parts = split_examples(examples, args.fractions, args.seed)
        except ValueError as err:  # bad --fractions
            raise UserError(f"--fractions: {err}") from None
        sizes = [len(parts.seed), len(parts.stream), len(parts.test)]
        totals = [t + s for t, s in zip(totals, sizes)]
        every += examples
        rows.append(_row(agent, examples, sizes))
    print(
        f"{'agent':<11} {'pairs':>5} {'seed':>5} {'stream':>6} {'test':>5}   "
        f"{'question chars':^19}   {'answer chars':^19}"
    )
    print(f"{'':<36}   {'mean':>7} {'min':>5} {'max':>5}   {'mean':>7} {'min':>5} {'max':>5}")
    print("\n".join(rows + [_row("all", every, totals)]))


def validate(args: argparse.Namespace) -> int:
    data = _load(args)
    problems = [f"{e.id}: {problem}" for examples in data.values() for e in examples if (problem := form_problem(e))]
    for line in problems:
        print(f"form: {line}")
    print(
        f"{args.data_dir}: {len(data)} files, {sum(map(len, data.values()))} pairs valid; "
        f"{len(problems)} form problem(s)"
    )
    try:  # examples without a split fall where ms-run would put them
        framed = with_splits(data, args.fractions, args.seed)
    except ValueError as err:  # bad --fractions
        raise UserError(f"--fractions: {err}") from None
    report = hygiene_report(framed, line_numbers(args.data_dir))
    print(format_hygiene(report, args.data_dir))
    if args.report:
        print(f"hygiene report: {write_hygiene(report, args.report)}")
    twins = reference_twins(framed)
    print(format_twins(twins, args.data_dir))
    if args.twins:
        print(f"reference twins' test ids: {write_twin_ids(twins, args.twins)}")
    if args.drop_leaked_tests:
        _write_clean(framed, report, args.drop_leaked_tests)
    return 1 if problems and args.strict else 0


def _write_clean(data: dict, report: dict, folder: str) -> None:
    """The clean variant of `data`, with its own hygiene report beside it."""
    clean = drop_leaked_tests(data, report)
    write_dir(folder, clean)
    write_hygiene(hygiene_report(clean, line_numbers(folder)), folder)
    kept = ", ".join(f"{agent} {row['kept']}/{row['test']}" for agent, row in report["kept_tests"].items())
    print(f"clean variant in {folder}; test items kept per agent: {kept}")


def _format_import(report: dict, out: str | Path) -> str:
    """What `ms-data import-paper` prints. Per file: records and the agents they went to; then every
    record the importer is unsure of."""
    lines = [f"{'file':<44} {'split':<6} {'records':>7}  {'unsure':>6} {'unassigned':>10}  assigned"]
    for name, row in report["files"].items():
        assigned = ", ".join(f"{agent} {n}" for agent, n in row["assigned"].items())
        lines.append(
            f"{name:<44} {row['split']:<6} {row['records']:>7}  {row['unsure']:>6} {row['unassigned']:>10}  {assigned}"
        )
    lines.append(
        f"imported {report['total']} records into {out} (the single-pool files into "
        f"{Path(out) / ONEPOOL}); {len(report['unsure'])} unsure, {report['unassigned']} unassigned "
        f"(unassigned.jsonl); {report['copies_agree']['same_agent']} of {report['copies_agree']['copies']} "
        f"OnePool copies of domain records got the same agent"
    )
    for u in report["unsure"]:
        lines.append(
            f"  unsure: {u['file']}:{u['line']} -> {u['agent']} (p {u['p']:.2f}); runner-up "
            f"{u['runner_up']} (p {u['runner_up_p']:.2f}): {u['why']}"
        )
    lines += [f"skipped {skipped}" for skipped in report["skipped_files"]]
    return "\n".join(lines)


def import_paper_cmd(args: argparse.Namespace) -> None:
    report = import_paper(args.path, args.out, args.drop_leaked_tests)
    print(_format_import(report, args.out))
    for group, hygiene in report["hygiene"].items():
        print(format_hygiene(hygiene, str(args.out if group == "." else f"{args.out}/{group}")))
    if args.drop_leaked_tests:
        for group, hygiene in report["hygiene"].items():
            kept = ", ".join(f"{a} {row['kept']}/{row['test']}" for a, row in hygiene["kept_tests"].items())
            where = args.drop_leaked_tests if group == "." else f"{args.drop_leaked_tests}/{ONEPOOL}"
            print(f"clean variant in {where}; test items kept per agent: {kept}")


def invert_cmd(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from ms.agents import agents_from
    from ms.data.invert import invert, read_answers
    from ms.llm import build_lm
    from ms.llm.backbones import Backbones
    from ms.llm.usage import format_usage, save_usage
    from ms.plan.data import invert_plan

    cfg = compose_checked([f"backbone={args.backbone}", *args.overrides], plan=args.plan)
    agents = agents_from(cfg.agents)
    rows = read_answers(args.answers, args.agent, agents)[: args.limit]
    if args.plan:
        return invert_plan(Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache), rows, agents, args.out)
    lm = build_lm(cfg.backbone, cfg.cache_dir, cfg.use_cache)
    made, empty = invert(lm, rows, agents)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(asdict(e), ensure_ascii=False) + "\n" for e in made)
    usage_file = Path(args.out).with_suffix(".usage.json")
    print(f"wrote {len(made)} stream questions to {args.out}; LLM usage to {usage_file}")
    print(format_usage(save_usage([lm], usage_file)))
    if empty:
        print(f"no question came back for {len(empty)} answer(s): {', '.join(empty)}", file=sys.stderr)
    return 0


def pool_stats_cmd(args: argparse.Namespace) -> int:
    """Memories per run (oldest first, with its run folder), scope and agent, split by origin."""
    from ms.pool import ORIGINS, Pool

    path = Path(args.pool)
    if not path.is_file():
        raise UserError(f"{path}: no such pool file (a run's pool is <run folder>/pool.sqlite, or its pool.path)")
    with Pool(path) as pool:
        counts = pool.tally(("run_id", "scope", "agent", "origin"))
        labels = pool.runs()
    origins = [o for o in ORIGINS if any(key[3] == o for key in counts)]
    runs = {key[0] for key in counts}
    print(f"{path}: {sum(counts.values())} memories, {len(runs)} run(s)")
    run_order = (
        [r for r in labels if r in runs] + sorted(r for r in runs if r not in labels and r) + [None] * (None in runs)
    )  # None: memories from before runs were recorded
    sections = {
        "run": (0, run_order, lambda r: f"{r} {labels.get(r) or ''}".rstrip() if r else "(before run ids)"),
        "scope": (1, sorted({k[1] for k in counts}), str),
        "agent": (2, sorted({k[2] for k in counts}), str),
    }
    for title, (index, values, name) in sections.items():
        rows = {
            value: [sum(n for k, n in counts.items() if k[index] == value and k[3] == o) for o in origins]
            for value in values
        }
        width = max(len(name(v)) for v in [*values, ""]) if values else 0
        width = max(width, len(title) + 3)
        print(f"\n{'by ' + title:<{width}}" + "".join(f" {o:>8}" for o in origins) + f" {'total':>8}")
        for value, row in rows.items():
            print(f"{name(value):<{width}}" + "".join(f" {n:>8}" for n in row) + f" {sum(row):>8}")
    return 0


AGENTS_HELP = (
    "the agent set, a conf/agents option: every agent of it must have its file, as ms-run needs "
    "(default: the files there, checked against the paper's nine)"
)


def _data_arguments(command, fractions_help: str | None = None) -> None:
    """The data folder, its split and the agent set, as stats and validate read them."""
    command.add_argument("--data-dir", default="data")
    splits = ("SEED", "STREAM", "TEST")
    command.add_argument(
        "--fractions", type=float, nargs=3, default=[0.2, 0.4, 0.4], metavar=splits, help=fractions_help
    )
    command.add_argument("--seed", type=int, default=0, help="split seed")
    command.add_argument("--agents", help=AGENTS_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ms-data",
        description=__doc__,
        epilog="--debug: show the traceback of errors that are reported in one line",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser("stats", help="pairs per agent and split, and text lengths")
    _data_arguments(show)
    show.set_defaults(handler=stats)

    check = commands.add_parser(
        "validate",
        help="check the schema of every file and the poetic forms, and report duplicates, test leaks and empty answers",
    )
    _data_arguments(check, fractions_help="the split of examples that carry none")
    check.add_argument("--report", metavar="DIR", help="write the full hygiene report to DIR/hygiene.json")
    check.add_argument(
        "--drop-leaked-tests",
        metavar="DIR",
        help="write a clean variant to DIR: test items that leak from seed or stream, or repeat "
        "an earlier test item, removed; every item keeps its split",
    )
    check.add_argument(
        "--twins",
        metavar="FILE",
        help="write the test ids of the reference twins to FILE, one per line (ms-report --exclude-tests FILE)",
    )
    check.add_argument("--strict", action="store_true", help="fail on form problems too")
    check.set_defaults(handler=validate)

    paper = commands.add_parser("import-paper", help="convert the paper authors' repository layout")
    paper.add_argument("path", help="a checkout of the authors' repository")
    paper.add_argument(
        "out",
        help="output folder: <agent>.jsonl (domain folders), onepool/<agent>.jsonl "
        "(single-pool files), import_report.json, hygiene.json",
    )
    paper.add_argument(
        "--drop-leaked-tests",
        metavar="DIR",
        help="also write the clean variant to DIR (and DIR/onepool): test items that leak from "
        "seed or stream, or repeat an earlier test item, removed",
    )
    paper.set_defaults(handler=import_paper_cmd)

    inv = commands.add_parser("invert", help="let an agent write the question each answer responds to")
    inv.add_argument("answers", help="JSONL with an 'answer' (and 'agent', unless --agent) per line")
    inv.add_argument("out", help="JSONL of new stream examples in the project's schema")
    inv.add_argument("--agent", help="the agent of every line without an 'agent' field")
    inv.add_argument("--backbone", default="smollm2", help="a conf/backbone option")
    inv.add_argument("--limit", type=int, default=None, help="invert only the first N answers")
    inv.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. backbone.batch_size=4")
    inv.set_defaults(handler=invert_cmd)

    add_gate_commands(commands)  # gate-check, cross-grade, gate-quality

    stats_pool = commands.add_parser(
        "pool-stats", help="memories in a pool file per run, scope and agent, split by origin (seed, stream, summary)"
    )
    stats_pool.add_argument("pool", help="a pool file: <run folder>/pool.sqlite, or a shared pool.path")
    stats_pool.set_defaults(handler=pool_stats_cmd)
    add_forget(commands)
    add_learn_access(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """User errors (bad data or settings, missing or damaged files) print one line and exit 2;
    --debug (or HYDRA_FULL_ERROR=1) shows their traceback."""
    from ms.config.store import register
    from ms.plan.data import take_plan

    register()  # the schema the configs it composes (gate-check, invert) are typed by
    given = take_debug_flag(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(given)
    args.command_line = given  # what a removal's audit record names (ms-data forget)

    def call() -> int:
        args.plan = take_plan(args)  # +plan=true: what the command would ask of its LLMs, and nothing more
        return args.handler(args) or 0

    return report_user_errors("ms-data", call)


if __name__ == "__main__":
    sys.exit(main())
