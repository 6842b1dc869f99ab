"""`ms-data gate-check|cross-grade|invert ... +plan=true`: what the command would ask of its LLMs,
per role and backbone, printed as `ms-run ... +plan=true` prints a run's (ms.cli.plan), before
anything is spent. The command reads its config and data as it would, then stops: no model loads,
no folder is written, and neither an API key nor a pool DSN is needed.

Calls are counted from the pairs the command builds: gate-check grades each pair once (rubric) and
scores two prompts per probe (utility); cross-grade grades each run's stream pairs once per grader;
invert asks once per answer. Tokens are estimated from the text as ms.plan.planner estimates them, and what
the response cache holds is not looked up (`?`), so costs are upper bounds.
"""

import argparse
from pathlib import Path
from statistics import fmean
from typing import Mapping, Sequence

from ms.common.errors import UserError
from ms.plan.flags import take_plan_flags
from ms.plan.table import format_rows
from ms.plan.tokens import CHARS_PER_TOKEN, PER_MESSAGE, tokens

LEGEND = (
    "calls: requests the command will make (~: an estimate); cached: how many of them the response cache "
    "will answer (?: not looked up; >=: at least, repeats within the command); est. cost: the backbone's "
    "`price` times the tokens of the calls the cache will not answer (<=: at most; -: no price set). "
    "Tokens are estimates (4 characters a token)."
)


def take_plan(args: argparse.Namespace) -> bool:
    """Take `+plan=...` out of the command's Hydra overrides (cross-grade's items): whether plan mode is on."""
    name = "items" if args.command == "cross-grade" else "overrides"
    if not hasattr(args, name):  # a command that calls no model takes no overrides
        return False
    rest, plan, accept = take_plan_flags(getattr(args, name))
    if accept is not None:
        raise UserError(
            f"ms-data {args.command}: plan_accept and plan_from set a run's admission rate; "
            f"this command's plan does not use one"
        )
    setattr(args, name, rest)
    return plan


def _printed(head: str, rows: Sequence, notes: Sequence[str] = ()) -> int:
    print(head)
    print(format_rows(list(rows)))
    print("".join(f"- {note}\n" for note in notes) + LEGEND)
    return 0


def _row(backbones, role: str, name: str | None):
    """An empty row of `role` on backbone `name` of `backbones` (ms.llm.backbones.Backbones), at its price."""
    from ms.llm import price_of
    from ms.plan.rows import Row

    return Row(role, backbones.resolve(name), price_of(backbones.config(name)))


def _score_row(backbones, scorer, graded: Sequence[tuple[object, str, str, str]]):
    """The grader's calls (`scorer`, the scorer's section) on `graded`: (rubric, agent, question, answer)
    each, one call a pair."""
    from ms.plan.gate import grading_tokens, reads_probabilities

    row, probabilities = _row(backbones, "score", scorer.backbone), reads_probabilities(scorer, backbones)
    reply = 0.0 if probabilities else scorer.max_new_tokens
    for rubric, agent, question, answer in graded:
        prompt = grading_tokens(rubric, agent) + tokens(question) + tokens(answer)
        row.add(1, prompt, reply, exact=probabilities, cached_exact=not backbones.use_cache)
    return row


def _utility_rows(settings, checked, jobs: Sequence) -> list:
    """The utility gate's calls on gate-check's pairs: each seed pair's jobs are probed among its
    scope's seed pairs, less those that ask its question or carry one of its jobs' answers
    (ms.gates.check_utility withholds them)."""
    from ms.agents import PromptTemplate
    from ms.gates.settings import UtilitySettings
    from ms.pool import normalize_space, scope_for

    agents, template, shots = checked.agents, PromptTemplate(**settings.prompt), max(1, settings.shots)
    m = UtilitySettings.probes_of(settings.gate)
    scope = {a: scope_for(agents[a].domain, settings.pool_mode) for a in checked.splits}
    seeds: dict[str, list] = {}
    for a, parts in checked.splits.items():
        seeds.setdefault(scope[a], []).extend(parts.seed)
    groups: dict[tuple[str, str], list] = {}
    for j in jobs:
        groups.setdefault((j.agent, j.example.id), []).append(j)
    rows: dict[str, object] = {}
    for (agent, _), group in groups.items():
        answers = {normalize_space(j.answer) for j in group}
        question = normalize_space(group[0].example.question)
        pool = [
            e
            for e in seeds[scope[agent]]
            if normalize_space(e.question) != question and normalize_space(e.answer) not in answers
        ]
        probes = min(m, len(pool))
        pair = fmean(tokens(template.example.format(question=e.question, answer=e.answer)) for e in pool) if pool else 0
        # A probe's prompt: the agent's instruction, the template, its shots, and the probe's pair to score.
        system = tokens(agents[agent].instruction) + PER_MESSAGE if template.system else 0.0
        prompt = system + tokens(template.with_examples.format(examples="", query="")) + (shots + 1) * pair
        name = checked.backbone_of[agent]
        # Two prompts per probe and job; the prompt as retrieved is the same for every job of the pair,
        # so with the cache on only the first job's is computed.
        rows.setdefault(name, _row(settings.backbones, "utility", name)).add(
            2 * probes * len(group),
            prompt + PER_MESSAGE,
            0.0,
            exact=False,
            cached=probes * (len(group) - 1) if settings.backbones.use_cache else 0.0,
            cached_exact=not settings.backbones.use_cache,
        )
    return list(rows.values())


def _merged(rows: Sequence) -> list:
    """One row per role and backbone: the rubric's grading and the question test both count under score."""
    out: dict[tuple[str, str], object] = {}
    for row in rows:
        if (kept := out.setdefault((row.role, row.backbone), row)) is not row:
            kept.merge(row)
    return list(out.values())


def _praise_rows(backbones, checked) -> list:
    """The model-written praise: one sample per seed pair and family on its writer (the check's backbone,
    and --praise-by's for cross_praise), each at its cap."""
    from ms.gates.check_praise import PRAISE_TOKENS

    rows: dict = {}
    for asked in checked.asked:
        writer = checked.writer_of(asked)
        row = rows.setdefault(backbones.resolve(writer), _row(backbones, "answer", writer))
        prompt = sum(tokens(m["content"]) + PER_MESSAGE for m in asked.chat)
        row.add(1, prompt, PRAISE_TOKENS, cached_exact=not backbones.use_cache)
    return list(rows.values())


def _contrast_rows(settings, checked, jobs: Sequence, genre: bool = False) -> list:
    """A contrast test of every job: its answer scored after its question and after its contrasts, each in
    the agent's zero-shot chat, on the agent's backbone (the genre test's own, where it names one): m other questions of its agent (the question-dependence
    test, ms.gates.question_dependence), or the review requests (`genre`: the genre test, ms.gates.genre)."""
    from ms.agents import PromptTemplate, chat
    from ms.gates.genre import GenreTest
    from ms.gates.question_dependence import QuestionTest
    from ms.gates.settings import RubricQdepSettings

    tested, template = RubricQdepSettings.of(settings.gate), PromptTemplate(**settings.prompt)
    if genre:
        test = GenreTest(None, checked.agents, template, 0.0)
    else:
        seeds = {a: [e.question for e in split.seed] for a, split in checked.splits.items()}
        test = QuestionTest(None, checked.agents, template, seeds, tested.others, tested.margin, tested.seed)
    rows: dict[str, object] = {}
    for job in jobs:
        name = checked.genre_backbone_of(job.agent) if genre else checked.backbone_of[job.agent]
        row = rows.setdefault(name, _row(settings.backbones, "score", name))
        for q in (job.example.question, *test.contrasts(job.agent, job.example.question)):
            asked = chat(checked.agents[job.agent], template.render(q), template.system)
            prompt = sum(tokens(m["content"]) + PER_MESSAGE for m in asked)
            row.add(1, prompt + tokens(job.answer), 0.0, cached_exact=not settings.backbones.use_cache)
    return list(rows.values())


def gate_check_plan(settings, checked, out: Path) -> int:
    """`settings`: ms.gates.check.CheckSettings, what the check reads of its config; `checked`:
    ms.gates.check.Checked, the pairs gate-check built from them and the data."""
    from ms.gates.check_corruptions import GOOD, with_model_praise
    from ms.gates.check_praise import ASKS, PRAISE_TOKENS
    from ms.gates.scorer import rubric_for
    from ms.gates.settings import RubricQdepSettings, UtilitySettings

    # The praise the backbone will write stands in at its cap: as many characters as that many tokens.
    capped = "x" * int(PRAISE_TOKENS * CHARS_PER_TOKEN)
    jobs = with_model_praise(checked.jobs, checked.asked, [capped] * len(checked.asked))
    rows = _praise_rows(settings.backbones, checked)
    if checked.rubric:
        mode = settings.pool_mode
        graded = [(rubric_for(checked.agents[j.agent], mode), j.agent, j.example.question, j.answer) for j in jobs]
        rows.append(_score_row(settings.backbones, settings.scorer, graded))
    if checked.utility:
        rows += _utility_rows(settings, checked, jobs)
    if checked.question:
        rows += _contrast_rows(settings, checked, jobs)
    if checked.genre:
        rows += _contrast_rows(settings, checked, jobs, genre=True)
    good = sum(j.kind == GOOD for j in jobs)
    notes = [
        f"{len(jobs)} pairs to judge: {good} seed pairs of {len(checked.splits)} agents and their corrupted copies",
        f"model-written praise: one sample per seed pair at its cap of {PRAISE_TOKENS} tokens; the pairs it makes "
        f"are judged too, and counted at their cap. A family under the copy rule asks again where a reply copies "
        f"its answer, up to {ASKS - 1} more samples per pair, which are not counted",
    ]
    if checked.question:
        notes.append(
            f"question test: every pair's answer scored after its question and after up to "
            f"gate.others={RubricQdepSettings.of(settings.gate).others} other seed questions of its agent"
        )
    if checked.genre:
        from ms.gates.genre import REVIEWS

        notes.append(
            f"genre test: every pair's answer scored after its question and after {len(REVIEWS)} requests to review a reply to it"
        )
    if checked.utility:
        notes.append(
            f"utility: 2 scored prompts per probe, up to gate.probes={UtilitySettings.probes_of(settings.gate)} probes per pair "
            f"among its scope's seed pairs"
        )
    return _printed(f"plan for {out} (nothing is written): ms-data gate-check", _merged(rows), notes)


def cross_grade_plan(pairs: Sequence, graders: Mapping, out: Path) -> int:
    """`pairs`: the runs' graded stream pairs (ms.gates.crossgrade.Pair); `graders`: name -> its settings
    (ms.gates.crossgrade.Grader)."""
    from ms.gates.scorer import load_rubrics

    rubrics = load_rubrics({p.rubric for p in pairs})
    rows = [
        _score_row(backbones, scorer, [(rubrics[p.rubric], p.agent, p.question, p.answer) for p in pairs])
        for backbones, scorer in graders.values()
    ]
    return _printed(
        f"plan for {out} (nothing is written): ms-data cross-grade, {len(pairs)} stream pairs "
        f"graded by {', '.join(graders)}",
        rows,
    )


def invert_plan(backbones, answers: Sequence[tuple[str, str, str]], agents: Mapping, out: str) -> int:
    """`backbones`: ms.llm.backbones.Backbones of the command's `backbone`; `answers`: (id, agent, answer) each,
    as ms.data.invert.read_answers reads them."""
    from ms.data.invert import INVERT_PROMPT

    row = _row(backbones, "invert", None)
    for _, agent, answer in answers:
        prompt = tokens(agents[agent].instruction) + tokens(INVERT_PROMPT.format(answer=answer)) + 2 * PER_MESSAGE
        row.add(1, prompt, backbones.default.generation.max_new_tokens, cached_exact=not backbones.use_cache)
    return _printed(
        f"plan for {out} (nothing is written): ms-data invert, {len(answers)} answers",
        [row],
        ["completion tokens: each question counted at backbone.generation.max_new_tokens, its cap (an upper bound)"],
    )
