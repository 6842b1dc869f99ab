"""`ms-data`'s gate commands: gate-check (does a gate tell good pairs from corrupted copies?),
cross-grade (every grader on the pairs runs graded) and gate-quality (BERTScore of each judged answer)."""

import argparse
from pathlib import Path

from ms.cli.compose import compose_checked
from ms.common.errors import UserError

# The gates gate-compare reads scores of, and rubric_genre's admissions ranked by its test (check_pooled.RANKED).
COMPARED = ("rubric", "utility", "rubric_qdep", "rubric_genre", "rubric_genre_ranked", "both")


def check_settings(cfg):
    """What the gate check and its plan read of the root config `cfg` (ms.gates.check.CheckSettings)."""
    from ms.gates.check import CheckSettings
    from ms.llm.backbones import Backbones
    from ms.loop.schedule import stream_k

    return CheckSettings(
        **{name: cfg[name] for name in ("agents", "data", "scorer", "gate", "prompt", "seed")},
        backbones=Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache),
        pool_mode=cfg.pool.mode,
        shots=stream_k(cfg.k, cfg.stream_k),
    )


def gate_check_cmd(args: argparse.Namespace) -> int:
    import tempfile
    import time

    from tqdm.auto import tqdm

    from ms.agents import PromptTemplate
    from ms.config.files import USAGE_FILE
    from ms.gates.check import contrast_tests, gate_scores, grade, missing_score, what_to_check
    from ms.gates.check_auc import summarize
    from ms.gates.check_corruptions import with_model_praise
    from ms.gates.check_pooled import GENRE_GATE, QDEP_GATE, TESTED, Scored, pooled_report
    from ms.gates.check_praise import HELD_OUT, UNCOPIED, WRITTEN_BY, written
    from ms.gates.check_report import format_results, threshold_report, write_results
    from ms.gates.check_utility import utility_of_jobs
    from ms.gates.genre import REVIEWS, GenreTest
    from ms.gates.question_dependence import QuestionTest
    from ms.gates.scorer import Scorer, load_rubric, load_rubrics, rubric_ref
    from ms.gates.settings import RubricGenreSettings, RubricQdepSettings, UtilitySettings
    from ms.llm.backbones import build_backbones
    from ms.llm.usage import format_usage, save_usage
    from ms.plan.data import gate_check_plan

    cfg = compose_checked(args.overrides, plan=args.plan)
    settings = check_settings(cfg)
    writers = {kind: getattr(args, kind) for kind in WRITTEN_BY}
    checked = what_to_check(settings, args.per_agent, args.gate, writers, args.only)
    agents, splits, backbone_of = checked.agents, checked.splits, checked.backbone_of
    rubric, utility, question = checked.rubric, checked.utility, checked.question
    out = Path(args.out or time.strftime("outputs/gate_check/%Y-%m-%d_%H-%M-%S"))  # beside ms-run's folders
    if args.plan:
        return gate_check_plan(settings, checked, out)
    catalog = settings.backbones
    # Utility and the question test score answers on each agent's backbone; the genre test on its own, or theirs.
    scoring = list(backbone_of.values()) if utility or question else []
    scoring += [checked.genre_backbone_of(agent) for agent in splits] if checked.genre else []
    backbones = build_backbones(catalog, [*scoring, cfg.scorer.backbone, *checked.writers.values()])
    shots = settings.shots
    probes = UtilitySettings.probes_of(cfg.gate)  # the config's gate's where it measures utility, else the default
    tested = RubricQdepSettings.of(cfg.gate)  # likewise the question test's settings
    genre_margin = RubricGenreSettings.of(cfg.gate).margin  # and the genre test's
    seconds, decisions, utilities, scorer = {}, None, None, None
    started = time.perf_counter()
    # The held-out families: praise the check's own backbone (and --praise-by's, ...) writes, with the check's seed.
    jobs = checked.jobs
    uncopied = HELD_OUT if args.ask_again_copies else UNCOPIED
    for writer in dict.fromkeys(map(checked.writer_of, checked.asked)):
        asked = [a for a in checked.asked if checked.writer_of(a) == writer]
        lm = backbones[catalog.resolve(writer)]
        # No total: a family under the copy rule asks again where a reply copies its answer.
        desc = f"gate-check praise by {writer or cfg.backbone.name} ({len(asked)} pairs)"
        with tqdm(desc=desc, unit="reply") as bar, lm.reporting(bar.update):
            replies = written(lm, asked, cfg.seed, uncopied)
        jobs = with_model_praise(jobs, asked, replies)
    seconds["praise"] = time.perf_counter() - started
    if rubric:
        refs = {agent: rubric_ref(agents[agent], cfg.pool.mode) for agent in splits}
        scorer = Scorer(backbones[catalog.resolve(cfg.scorer.backbone)], load_rubrics(set(refs.values())), cfg.scorer)
        started = time.perf_counter()
        decisions = grade(scorer, jobs, {agent: load_rubric(ref).name for agent, ref in refs.items()})
        seconds["rubric"] = time.perf_counter() - started
    if question:
        started = time.perf_counter()
        test = QuestionTest(
            lambda agent: backbones[backbone_of[agent]],
            agents,
            PromptTemplate(**cfg.prompt),
            {agent: [e.question for e in parts.seed] for agent, parts in splits.items()},
            tested.others,
            tested.margin,
            tested.seed,
        )
        decisions = contrast_tests(test, jobs, decisions, TESTED[QDEP_GATE][0])
        seconds["question"] = time.perf_counter() - started
    if checked.genre:
        started = time.perf_counter()
        genre = GenreTest(
            lambda agent: backbones[checked.genre_backbone_of(agent)],
            agents,
            PromptTemplate(**cfg.prompt),
            genre_margin,
        )
        decisions = contrast_tests(genre, jobs, decisions, TESTED[GENRE_GATE][0])
        seconds["genre"] = time.perf_counter() - started
    if utility:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ms-gate-check-") as folder:
            utilities = utility_of_jobs(
                jobs,
                {agent: parts.seed for agent, parts in splits.items()},
                agents,
                lambda agent: backbones[backbone_of[agent]],
                Path(folder),
                retriever=cfg.retriever,
                pool_mode=cfg.pool.mode,
                template=PromptTemplate(**cfg.prompt),
                probes=probes,
                shots=shots,
            )
        seconds["utility"] = time.perf_counter() - started
    scores = gate_scores(args.gate, decisions, utilities)
    results = {
        gate: summarize([(j.agent, j.kind, s) for j, s in zip(jobs, scores[gate])], missing_score(gate))
        for gate in args.gate
    }
    write_results(out, jobs, decisions, utilities, results)
    header = (
        f"Gate check: gates {', '.join(args.gate)}; backbone {cfg.backbone.name}; up to {args.per_agent} seed "
        f"pairs per agent from {cfg.data.dir}, each against corrupted copies (swapped, other_question, "
        f"truncated, empty; all: these four), grader-directed ones (self_assessment, "
        f"answer_plus_assessment: pooled as grader-directed; grader_instruction) and plain-words praise "
        f"(praise_alone, line_plus_praise: the development set; model_praise, written by {cfg.backbone.name}"
        + "".join(f", and {kind}, written by {writer}" for kind, writer in checked.writers.items())
        + ": held out, the test of a defence); AUC of good vs corrupted, 95% bootstrap CI"
        + (f"\nonly the good pairs and {', '.join(args.only)} are judged (--only)" if args.only else "")
        + (
            "\nevery model-written family is asked again where it copies the answer (--ask-again-copies)"
            * args.ask_again_copies
        )
    )
    if scorer is not None:
        header += (
            f"\nrubric: graded by {cfg.scorer.backbone or cfg.backbone.name}, score read from {scorer.read}, "
            f"{cfg.pool.mode} rubrics, scorer.defence={cfg.scorer.defence}; both: rubric admits at score >= "
            f"{cfg.scorer.threshold:g}"
        )
    if question:
        header += (
            f"\n{QDEP_GATE}: the rubric's grade where the answer's log-prob per token after its question beats its "
            f"mean after m = {tested.others} other questions of its agent by more than {tested.margin:g} "
            f"(seed {tested.seed}), else 0"
        )
    if checked.genre:
        on = checked.genre_on or "each agent's own backbone"
        header += (
            f"\n{GENRE_GATE}: the rubric's grade where the answer's log-prob per token after its question beats its "
            f"mean after {len(REVIEWS)} requests to review a reply to it by more than {genre_margin:g}, else 0; "
            f"scored on {on}"
        )
    if utility:
        header += (
            f"\nutility: u over m = {probes} probes from a {cfg.pool.mode} pool of every seed pair, "
            f"retriever {cfg.retriever.name} as shipped, {shots} shot(s)"
        )
    header += "\nwall time: " + ", ".join(f"{part} {s:.0f} s" for part, s in seconds.items())
    text = format_results(results, header)
    threshold, held_out = cfg.scorer.threshold, ", ".join(k for k in HELD_OUT if any(j.kind == k for j in jobs))
    pooled = {}  # what a pooled report is titled -> each job's score
    if decisions is not None:
        title = f"rubric, pooled over agents (admitted: score >= {threshold:g})"
        pooled[title] = [0.0 if d.score is None else d.score for d in decisions]
    for defended, (_, test) in TESTED.items():
        if defended in scores:
            title = f"{defended}, pooled over agents (admitted: score >= {threshold:g} and the {test} passed)"
            pooled[f"{title}; held out: {held_out}"] = scores[defended]
    for title, values in pooled.items():
        rows = [Scored((j.agent, str(j.example.id)), j.kind, score) for j, score in zip(jobs, values)]
        text += "\n\n" + pooled_report(rows, threshold, title)
    if utilities is not None:
        text += threshold_report([j.kind for j in jobs], [m.u for m in utilities])
    (out / "gate_check.md").write_text("```\n" + text + "\n```\n", encoding="utf-8")
    print(text)
    print(format_usage(save_usage(list(backbones.values()), out / USAGE_FILE)))
    print(f"gate check written to {out}")
    return 0


def gate_compare_cmd(args: argparse.Namespace) -> int:
    from ms.gates.check_pooled import compare_report

    print(compare_report(Path(args.base), Path(args.other), args.gate, args.threshold, args.other_gate))
    return 0


def cross_grade_cmd(args: argparse.Namespace) -> int:
    from ms.gates.crossgrade import Grader, cross_grade, graded_pairs
    from ms.llm.backbones import Backbones
    from ms.plan.data import cross_grade_plan

    # Run folders' names hold "=" too (backbone=smollm2,k=3): a folder that exists is a run.
    runs = [Path(a) for a in args.items if Path(a).is_dir()]
    overrides = [a for a in args.items if not Path(a).is_dir()]
    if not runs:
        raise UserError("cross-grade: name at least one run folder (with decisions.jsonl)")
    configs = {
        name: compose_checked([*overrides, f"grader={name}"], plan=args.plan) for name in args.graders.split(",")
    }
    graders = {
        name: Grader(Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache), cfg.scorer) for name, cfg in configs.items()
    }
    if args.plan:
        return cross_grade_plan(graded_pairs(runs), graders, Path(args.out))
    print(cross_grade(runs, graders, Path(args.out)))
    return 0


def gate_quality_cmd(args: argparse.Namespace) -> None:
    from ms.report.usage.gate_quality import gate_quality  # lazily: ms.report loads matplotlib

    gate_quality(args.runs)


def _gates(text: str) -> list[str]:
    """--gate: one gate or several, comma-separated, of those the gate check measures (ms.gates.check,
    from the registered gates); `both` is derived from the other two's measurements."""
    from ms.gates.check import checked_gates

    return _listed(text, checked_gates())


def _kinds(text: str) -> list[str]:
    """--only: corruption kinds, comma-separated (ms.gates.check_corruptions.KINDS)."""
    from ms.gates.check_corruptions import KINDS

    return _listed(text, KINDS)


def _listed(text: str, choices) -> list[str]:
    """A comma-separated list of `choices`, each once, in the order given."""
    listed = list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not listed or any(item not in choices for item in listed):
        raise argparse.ArgumentTypeError(f"'{text}': choose from {', '.join(choices)}, comma-separated")
    return listed


def add_gate_commands(commands) -> None:
    gate = commands.add_parser(
        "gate-check", help="does a gate tell good pairs from corrupted copies? per-agent ROC AUC with a 95%% CI"
    )
    gate.add_argument("--per-agent", type=int, default=8, help="seed pairs per agent (default 8)")
    gate.add_argument(
        "--gate",
        type=_gates,
        default=["rubric"],
        metavar="GATES",
        help="rubric (default), utility, both, or several comma-separated (rubric,utility,both): "
        "each gate's AUC from one measurement of the pairs",
    )
    gate.add_argument(
        "--out", help="folder for gate_check.{md,csv} and the decisions (default: outputs/gate_check/DATE_TIME)"
    )
    from ms.gates.check_praise import UNCOPIED, WRITTEN_BY

    for kind, option in WRITTEN_BY.items():  # the held-out praise families another backbone writes
        copies = " (asked again where it copies the answer)" if kind in UNCOPIED else ""
        help_text = f"a backbone (a conf/backbone name) that writes the held-out praise family {kind}{copies}"
        gate.add_argument(option, dest=kind, metavar="BACKBONE", help=help_text)
    gate.add_argument(
        "--ask-again-copies",
        action="store_true",
        help=f"make every model-written family under the copy rule of {', '.join(UNCOPIED)} (model_praise and "
        "cross_praise were made without it): a reply that copies the answer is asked for again",
    )
    gate.add_argument(
        "--only",
        type=_kinds,
        metavar="KINDS",
        help="judge only these corruption kinds (comma-separated) beside the good pairs, e.g. third_praise",
    )
    gate.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backbone=gpt-4o scorer.read=text")
    gate.set_defaults(handler=gate_check_cmd)

    compare = commands.add_parser(
        "gate-compare",
        help="two gate checks of the same pairs (today's gate and a "
        "defended one, or two graders): pooled AUCs and their "
        "paired difference with a 95%% CI",
    )
    compare.add_argument("base", help="a gate-check output folder (gate_check_decisions.jsonl)")
    compare.add_argument("other", help="another, of the same data and --per-agent")
    compare.add_argument("--gate", choices=COMPARED, default="rubric", help="whose scores to compare")
    compare.add_argument(
        "--other-gate",
        choices=COMPARED,
        help="another gate's scores in OTHER (default: --gate's): two gates of one check, e.g. rubric against rubric_qdep",
    )
    compare.add_argument("--threshold", type=float, help="also show the share of each kind admitted at score >= this")
    compare.set_defaults(handler=gate_compare_cmd)

    cross = commands.add_parser(
        "cross-grade",
        help="every grader (conf/grader) on the stream pairs that runs "
        "graded: scores, admissions by writer backbone, agreement",
    )
    cross.add_argument(
        "items",
        nargs="+",
        metavar="RUN_OR_OVERRIDE",
        help="run folders (with decisions.jsonl, metrics.json and .hydra/), then any Hydra "
        "overrides, e.g. cache_dir=...",
    )
    cross.add_argument("--graders", default="smollm2,gemma3", help="conf/grader names, comma-separated")
    cross.add_argument("--out", default="cross_grade", help="folder for cross_grade.{md,csv}")
    cross.set_defaults(handler=cross_grade_cmd)

    quality = commands.add_parser(
        "gate-quality",
        help="BERTScore of each answer a run's gate judged against its "
        "stream question's reference: <run>/quality.jsonl",
    )
    quality.add_argument("runs", nargs="+", metavar="RUN_DIR", help="finished run folders (decisions.jsonl, .hydra/)")
    quality.set_defaults(handler=gate_quality_cmd)
