"""`ms-data`: look at, check and import the question-answer datasets."""

from __future__ import annotations

import argparse
import sys
from statistics import mean

from ms.cli.forget import add_forget
from ms.cli.learn_access import add_learn_access
from ms.data import (Example, drop_leaked_tests, form_problem, format_hygiene, hygiene_report, import_paper,
                     line_numbers, load_dir, split_examples, with_splits, write_dir, write_hygiene)
from ms.common.errors import UserError


def _lengths(texts: list[str]) -> str:
    sizes = [len(t) for t in texts]
    return f"{mean(sizes):7.0f} {min(sizes):5d} {max(sizes):5d}"


def _row(name: str, examples: list[Example], sizes: list[int]) -> str:
    return (f"{name:<11} {len(examples):>5} {sizes[0]:>5} {sizes[1]:>6} {sizes[2]:>5}   "
            f"{_lengths([e.question for e in examples])}   {_lengths([e.answer for e in examples])}")


def _load(args: argparse.Namespace) -> dict:
    """The data folder's files. With `--agents NAME` (conf/agents/NAME.yaml, composed as `ms-run
    agents=NAME` composes it) every agent of the set must have its file, as ms-run needs; without
    it, the files there, each checked against the default agent set."""
    from ms.agents import DEFAULT_AGENTS, agents_from, default_agents

    if args.agents is None:
        return load_dir(args.data_dir)
    agents = (default_agents() if args.agents == DEFAULT_AGENTS
              else agents_from(_compose([f"agents={args.agents}"], check=False).agents))
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
    print(f"{'agent':<11} {'pairs':>5} {'seed':>5} {'stream':>6} {'test':>5}   "
          f"{'question chars':^19}   {'answer chars':^19}")
    print(f"{'':<36}   {'mean':>7} {'min':>5} {'max':>5}   {'mean':>7} {'min':>5} {'max':>5}")
    print("\n".join(rows + [_row("all", every, totals)]))


def validate(args: argparse.Namespace) -> int:
    data = _load(args)
    problems = [f"{e.id}: {problem}" for examples in data.values() for e in examples
                if (problem := form_problem(e))]
    for line in problems:
        print(f"form: {line}")
    print(f"{args.data_dir}: {len(data)} files, {sum(map(len, data.values()))} pairs valid; "
          f"{len(problems)} form problem(s)")
    try:  # examples without a split fall where ms-run would put them
        framed = with_splits(data, args.fractions, args.seed)
    except ValueError as err:  # bad --fractions
        raise UserError(f"--fractions: {err}") from None
    report = hygiene_report(framed, line_numbers(args.data_dir))
    print(format_hygiene(report, args.data_dir))
    if args.report:
        print(f"hygiene report: {write_hygiene(report, args.report)}")
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


def import_paper_cmd(args: argparse.Namespace) -> None:
    from ms.data.paper import ONEPOOL, format_import

    report = import_paper(args.path, args.out, args.drop_leaked_tests)
    print(format_import(report, args.out))
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
    from pathlib import Path

    from ms.agents import agents_from
    from ms.data.invert import invert, read_answers
    from ms.llm import build_lm
    from ms.llm.usage import format_usage, save_usage
    from ms.plan.data import invert_plan

    cfg = _compose([f"backbone={args.backbone}", *args.overrides], plan=args.plan)
    agents = agents_from(cfg.agents)
    rows = read_answers(args.answers, args.agent, agents)[: args.limit]
    if args.plan:
        return invert_plan(cfg, rows, agents, args.out)
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


def gate_check_cmd(args: argparse.Namespace) -> int:
    import tempfile
    import time
    from pathlib import Path

    from ms.agents import PromptTemplate
    from ms.config.files import USAGE_FILE
    from ms.llm.backbones import Backbones, build_backbones
    from ms.gates.check import (format_results, gate_scores, grade, missing_score, summarize, threshold_report,
                              what_to_check, write_results)
    from ms.gates.check_utility import utility_of_jobs
    from ms.gates.scorer import Scorer, load_rubric, load_rubrics, rubric_ref
    from ms.llm.usage import format_usage, save_usage
    from ms.plan.data import gate_check_plan
    from ms.loop.schedule import stream_k

    cfg = _compose(args.overrides, plan=args.plan)
    checked = what_to_check(cfg, args.per_agent, args.gate)
    agents, splits, jobs, rubric, utility, backbone_of = checked
    out = Path(args.out or time.strftime("outputs/gate_check/%Y-%m-%d_%H-%M-%S"))  # beside ms-run's folders
    if args.plan:
        return gate_check_plan(cfg, checked, out)
    catalog = Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache)
    backbones = build_backbones(catalog, [*(backbone_of.values() if utility else []), cfg.scorer.backbone])
    shots = stream_k(cfg.k, cfg.stream_k)
    seconds, decisions, utilities, scorer = {}, None, None, None
    if rubric:
        refs = {agent: rubric_ref(agents[agent], cfg.pool.mode) for agent in splits}
        scorer = Scorer(backbones[catalog.resolve(cfg.scorer.backbone)], load_rubrics(set(refs.values())),
                        cfg.scorer)
        started = time.perf_counter()
        decisions = grade(scorer, jobs, {agent: load_rubric(ref).name for agent, ref in refs.items()})
        seconds["rubric"] = time.perf_counter() - started
    if utility:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ms-gate-check-") as folder:
            utilities = utility_of_jobs(jobs, {agent: parts.seed for agent, parts in splits.items()}, agents,
                                        lambda agent: backbones[backbone_of[agent]], Path(folder),
                                        retriever=cfg.retriever, pool_mode=cfg.pool.mode,
                                        template=PromptTemplate(**cfg.prompt), probes=cfg.gate.probes, shots=shots)
        seconds["utility"] = time.perf_counter() - started
    scores = gate_scores(args.gate, decisions, utilities)
    results = {gate: summarize([(j.agent, j.kind, s) for j, s in zip(jobs, scores[gate])], missing_score(gate))
               for gate in args.gate}
    write_results(out, jobs, decisions, utilities, results)
    header = (f"Gate check: gates {', '.join(args.gate)}; backbone {cfg.backbone.name}; up to {args.per_agent} seed "
              f"pairs per agent from {cfg.data.dir}, each against corrupted copies (swapped, other_question, "
              f"truncated, empty); AUC of good vs corrupted, 95% bootstrap CI")
    if scorer is not None:
        header += (f"\nrubric: graded by {cfg.scorer.backbone or cfg.backbone.name}, score read from {scorer.read}, "
                   f"{cfg.pool.mode} rubrics; both: rubric admits at score >= {cfg.scorer.threshold:g}")
    if utility:
        header += (f"\nutility: u over m = {cfg.gate.probes} probes from a {cfg.pool.mode} pool of every seed pair, "
                   f"retriever {cfg.retriever.name} as shipped, {shots} shot(s)")
    header += "\nwall time: " + ", ".join(f"{part} {s:.0f} s" for part, s in seconds.items())
    text = format_results(results, header)
    if utilities is not None:
        text += threshold_report([j.kind for j in jobs], [m.u for m in utilities])
    (out / "gate_check.md").write_text("```\n" + text + "\n```\n", encoding="utf-8")
    print(text)
    print(format_usage(save_usage(list(backbones.values()), out / USAGE_FILE)))
    print(f"gate check written to {out}")
    return 0


def cross_grade_cmd(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ms.gates.crossgrade import cross_grade, graded_pairs
    from ms.plan.data import cross_grade_plan

    # Run folders' names hold "=" too (backbone=smollm2,k=3): a folder that exists is a run.
    runs = [Path(a) for a in args.items if Path(a).is_dir()]
    overrides = [a for a in args.items if not Path(a).is_dir()]
    if not runs:
        raise UserError("cross-grade: name at least one run folder (with decisions.jsonl)")
    configs = {name: _compose([*overrides, f"grader={name}"], plan=args.plan) for name in args.graders.split(",")}
    if args.plan:
        return cross_grade_plan(graded_pairs(runs), configs, Path(args.out))
    print(cross_grade(runs, configs, Path(args.out)))
    return 0


def gate_quality_cmd(args: argparse.Namespace) -> None:
    from ms.report.quality import gate_quality  # lazily: ms.report loads matplotlib
    gate_quality(args.runs)


def _gates(text: str) -> list[str]:
    """--gate: one gate or several, comma-separated, of those the gate check measures (ms.gates.check,
    from the registered gates); `both` is derived from the other two's measurements."""
    from ms.gates.check import checked_gates

    choices = checked_gates()
    gates = list(dict.fromkeys(g.strip() for g in text.split(",") if g.strip()))
    if not gates or any(g not in choices for g in gates):
        raise argparse.ArgumentTypeError(f"'{text}': choose from {', '.join(choices)}, comma-separated")
    return gates


def pool_stats_cmd(args: argparse.Namespace) -> int:
    """Memories per run (oldest first, with its run folder), scope and agent, split by origin."""
    from pathlib import Path

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
    run_order = ([r for r in labels if r in runs] + sorted(r for r in runs if r not in labels and r)
                 + [None] * (None in runs))  # None: memories from before runs were recorded
    sections = {"run": (0, run_order, lambda r: f"{r} {labels.get(r) or ''}".rstrip() if r else "(before run ids)"),
                "scope": (1, sorted({k[1] for k in counts}), str), "agent": (2, sorted({k[2] for k in counts}), str)}
    for title, (index, values, name) in sections.items():
        rows = {value: [sum(n for k, n in counts.items() if k[index] == value and k[3] == o) for o in origins]
                for value in values}
        width = max(len(name(v)) for v in [*values, ""]) if values else 0
        width = max(width, len(title) + 3)
        print(f"\n{'by ' + title:<{width}}" + "".join(f" {o:>8}" for o in origins) + f" {'total':>8}")
        for value, row in rows.items():
            print(f"{name(value):<{width}}" + "".join(f" {n:>8}" for n in row) + f" {sum(row):>8}")
    return 0


def _compose(overrides, check: bool = True, plan: bool = False):
    """The config ms-run would compose from these overrides, checked as ms-run checks it (`check`),
    or as its plan mode does (`plan`: no API key or pool DSN needed)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from ms.config.store import CONF_DIR
    from ms.common.errors import one_line
    from ms.loop.validation import validate

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        try:
            cfg = compose("config", overrides=list(overrides))
        except HydraException as err:  # a misspelt key or option
            raise UserError(one_line(f"{err} {err.__cause__ or ''}", 500)) from err
    if check:
        validate(cfg, plan=plan)
    return cfg


AGENTS_HELP = ("the agent set, a conf/agents option: every agent of it must have its file, as ms-run needs "
               "(default: the files there, checked against the paper's nine)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ms-data", description=__doc__,
                                     epilog="--debug: show the traceback of errors that are reported in one line")
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser("stats", help="pairs per agent and split, and text lengths")
    show.add_argument("--data-dir", default="data")
    show.add_argument("--fractions", type=float, nargs=3, default=[0.2, 0.4, 0.4],
                      metavar=("SEED", "STREAM", "TEST"))
    show.add_argument("--seed", type=int, default=0, help="split seed")
    show.add_argument("--agents", help=AGENTS_HELP)
    show.set_defaults(handler=stats)

    check = commands.add_parser("validate", help="check the schema of every file and the poetic forms, and "
                                                 "report duplicates, test leaks and empty answers")
    check.add_argument("--data-dir", default="data")
    check.add_argument("--fractions", type=float, nargs=3, default=[0.2, 0.4, 0.4],
                       metavar=("SEED", "STREAM", "TEST"), help="the split of examples that carry none")
    check.add_argument("--seed", type=int, default=0, help="split seed")
    check.add_argument("--agents", help=AGENTS_HELP)
    check.add_argument("--report", metavar="DIR", help="write the full hygiene report to DIR/hygiene.json")
    check.add_argument("--drop-leaked-tests", metavar="DIR",
                       help="write a clean variant to DIR: test items that leak from seed or stream, or repeat "
                            "an earlier test item, removed; every item keeps its split")
    check.add_argument("--strict", action="store_true", help="fail on form problems too")
    check.set_defaults(handler=validate)

    paper = commands.add_parser("import-paper", help="convert the paper authors' repository layout")
    paper.add_argument("path", help="a checkout of the authors' repository")
    paper.add_argument("out", help="output folder: <agent>.jsonl (domain folders), onepool/<agent>.jsonl "
                                   "(single-pool files), import_report.json, hygiene.json")
    paper.add_argument("--drop-leaked-tests", metavar="DIR",
                       help="also write the clean variant to DIR (and DIR/onepool): test items that leak from "
                            "seed or stream, or repeat an earlier test item, removed")
    paper.set_defaults(handler=import_paper_cmd)

    inv = commands.add_parser("invert", help="let an agent write the question each answer responds to")
    inv.add_argument("answers", help="JSONL with an 'answer' (and 'agent', unless --agent) per line")
    inv.add_argument("out", help="JSONL of new stream examples in the project's schema")
    inv.add_argument("--agent", help="the agent of every line without an 'agent' field")
    inv.add_argument("--backbone", default="smollm2", help="a conf/backbone option")
    inv.add_argument("--limit", type=int, default=None, help="invert only the first N answers")
    inv.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. backbone.batch_size=4")
    inv.set_defaults(handler=invert_cmd)

    gate = commands.add_parser("gate-check", help="does a gate tell good pairs from corrupted copies? "
                                                  "per-agent ROC AUC with a 95%% CI")
    gate.add_argument("--per-agent", type=int, default=8, help="seed pairs per agent (default 8)")
    gate.add_argument("--gate", type=_gates, default=["rubric"], metavar="GATES",
                      help="rubric (default), utility, both, or several comma-separated (rubric,utility,both): "
                           "each gate's AUC from one measurement of the pairs")
    gate.add_argument("--out", help="folder for gate_check.{md,csv} and the decisions "
                                    "(default: outputs/gate_check/DATE_TIME)")
    gate.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backbone=gpt-4o scorer.read=text")
    gate.set_defaults(handler=gate_check_cmd)

    cross = commands.add_parser("cross-grade", help="every grader (conf/grader) on the stream pairs that runs "
                                                    "graded: scores, admissions by writer backbone, agreement")
    cross.add_argument("items", nargs="+", metavar="RUN_OR_OVERRIDE",
                       help="run folders (with decisions.jsonl, metrics.json and .hydra/), then any Hydra "
                            "overrides, e.g. cache_dir=...")
    cross.add_argument("--graders", default="smollm2,gemma3", help="conf/grader names, comma-separated")
    cross.add_argument("--out", default="cross_grade", help="folder for cross_grade.{md,csv}")
    cross.set_defaults(handler=cross_grade_cmd)

    quality = commands.add_parser("gate-quality", help="BERTScore of each answer a run's gate judged against its "
                                                       "stream question's reference: <run>/quality.jsonl")
    quality.add_argument("runs", nargs="+", metavar="RUN_DIR", help="finished run folders (decisions.jsonl, .hydra/)")
    quality.set_defaults(handler=gate_quality_cmd)

    stats_pool = commands.add_parser("pool-stats", help="memories in a pool file per run, scope and agent, "
                                                        "split by origin (seed, stream, summary)")
    stats_pool.add_argument("pool", help="a pool file: <run folder>/pool.sqlite, or a shared pool.path")
    stats_pool.set_defaults(handler=pool_stats_cmd)
    add_forget(commands)
    add_learn_access(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """User errors (bad data or settings, missing or damaged files) print one line and exit 2;
    --debug (or HYDRA_FULL_ERROR=1) shows their traceback."""
    from ms.config.store import register
    from ms.common.errors import report_user_errors, take_debug_flag
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
