"""Each grader on the same pairs (`ms-data cross-grade`; docs/concepts/gates.md, "Do two graders
agree?", lists what it reports): the stream answers one or more runs graded (their decisions.jsonl)
graded again by every grader named (conf/grader: a backbone and its own threshold), so that two model
families can be compared grading their own answers and each other's on identical pairs. A run's own
grader must reproduce the scores the run recorded: the check that the pairs are graded as the run
graded them.
"""

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import yaml
from scipy import stats

from ms.common.errors import UserError
from ms.common.stats import mean_ci
from ms.config.files import DECISIONS_FILE, METRICS_FILE

REPRODUCED = 0.01  # points on 0-100: a re-grade this close to the run's recorded score reproduces it


class Grader(NamedTuple):
    """What cross-grade reads of a grader's composed config (`grader=NAME`); its command (ms.cli.gate_commands)
    takes it from the root config."""

    backbones: Any  # ms.llm.backbones.Backbones of the default `backbone`, and where responses are cached
    scorer: Any  # the scorer's section: the grader's backbone, its threshold, how it reads a score


@dataclass(frozen=True)
class Pair:
    run: str  # the run folder's name
    agent: str
    writer: str  # the backbone that wrote the answer (the agent's, in that run)
    rubric: str
    question: str
    answer: str
    grader: str  # the run's own grader
    score: Optional[float]  # the score the run recorded


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: {err}") from None


def read_pairs(run: Path) -> list[Pair]:
    """The stream pairs a run graded, with the backbone that wrote each and the run's grader."""
    facts = _json(run / METRICS_FILE).get("run") or {}
    default = facts.get("backbone")
    writers = facts.get("agent_backbones") or {}
    config_path = run / ".hydra" / "config.yaml"
    if not config_path.is_file():
        raise UserError(f"{config_path}: not found; cross-grade reads the run's grader from it")
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    grader = (config.get("scorer") or {}).get("backbone") or default
    pairs = []
    with (run / DECISIONS_FILE).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                d = json.loads(line)
                written = (d["agent"], writers.get(d["agent"], default), d["rubric"], d["question"], d["answer"])
                pairs.append(Pair(run.name, *written, grader, d.get("score")))
            except json.JSONDecodeError as err:
                raise UserError(f"{run / DECISIONS_FILE}, line {number}: {err}") from None
            except KeyError as err:
                raise UserError(f"{run / DECISIONS_FILE}, line {number}: no field {err}") from None
    return pairs


def _share(admitted: int, n: int) -> str:
    if not n:
        return "–"
    ci = stats.binomtest(admitted, n).proportion_ci(method="wilson")
    return f"{admitted}/{n} ({admitted / n:.0%} [{ci.low:.0%}, {ci.high:.0%}])"


def summary(pairs: Sequence[Pair], scores: dict[str, list[Optional[float]]], thresholds: dict[str, float]) -> str:
    """Markdown: per grader, each writer backbone's and each agent's mean score and admissions; the
    own-versus-other test; the graders' agreement; and whether each run's own grader reproduced it."""
    graders, writers = list(scores), sorted({p.writer for p in pairs})
    admitted = {g: [s is not None and s >= thresholds[g] for s in scores[g]] for g in graders}
    header = [
        "answers by",
        "n",
        *(f"{g} ({what})" for g in graders for what in ("mean score [95% CI]", f"admitted at {thresholds[g]:g}")),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups = [(f"**{w}**", [i for i, p in enumerate(pairs) if p.writer == w]) for w in writers]
    agents = sorted({(p.writer, p.agent) for p in pairs})
    groups += [(f"{a} ({w})", [i for i, p in enumerate(pairs) if p.agent == a and p.writer == w]) for w, a in agents]
    for name, rows in groups:
        cells = [
            c
            for g in graders
            for c in (
                mean_ci([scores[g][i] for i in rows]).text(digits=1),
                _share(sum(admitted[g][i] for i in rows), len(rows)),
            )
        ]
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    lines.append("")
    for g in graders:
        if g in writers and len(writers) == 2:
            own = [admitted[g][i] for i, p in enumerate(pairs) if p.writer == g]
            other = [admitted[g][i] for i, p in enumerate(pairs) if p.writer != g]
            table = [[sum(own), len(own) - sum(own)], [sum(other), len(other) - sum(other)]]
            p_value = stats.fisher_exact(table).pvalue
            lines.append(
                f"- {g} admits its own family's answers {sum(own)}/{len(own)} and the other's "
                f"{sum(other)}/{len(other)}; Fisher exact p = {p_value:.2g}."
            )
            lines += _same_question(g, pairs, admitted[g])
    for i, a in enumerate(graders):
        for b in graders[i + 1 :]:
            both = [(x, y) for x, y in zip(scores[a], scores[b]) if x is not None and y is not None]
            rho = stats.spearmanr([x for x, _ in both], [y for _, y in both]) if len(both) > 2 else None
            agree = sum(x == y for x, y in zip(admitted[a], admitted[b]))
            lines.append(
                f"- {a} and {b} on the same {len(pairs)} pairs: Spearman's rho = "
                + (f"{rho.statistic:+.2f} (p = {rho.pvalue:.2g}, n = {len(both)})" if rho else "–")
                + f"; the same admission decision on {agree} of {len(pairs)}."
            )
    for g in graders:
        own = [(p.score, s) for p, s in zip(pairs, scores[g]) if p.grader == g]
        if own:
            same = sum(
                x is None and y is None or x is not None and y is not None and abs(x - y) <= REPRODUCED for x, y in own
            )
            lines.append(
                f"- {g} re-graded the {len(own)} pairs of the runs it graded: {same} reproduce the "
                f"recorded score within {REPRODUCED:g}."
            )
    return "\n".join(lines) + "\n"


def _same_question(grader: str, pairs: Sequence[Pair], admitted: Sequence[bool]) -> list[str]:
    """Where both families answered the same question in one run (twin agents), the paired view of
    own-family favour: on how many questions the grader admits only its own family's answer, and on how
    many only the other's (exact McNemar test: a binomial test of those two counts)."""
    by_question: dict[tuple, dict[bool, bool]] = {}
    for p, ok in zip(pairs, admitted):
        by_question.setdefault((p.run, p.rubric, p.question), {})[p.writer == grader] = ok
    both = [d for d in by_question.values() if len(d) == 2]
    if not both:
        return []
    own_only = sum(d[True] and not d[False] for d in both)
    other_only = sum(d[False] and not d[True] for d in both)
    p_value = stats.binomtest(own_only, own_only + other_only).pvalue if own_only + other_only else 1.0
    return [
        f"  - on the {len(both)} questions both families answered, it admits only its own family's answer "
        f"on {own_only} and only the other's on {other_only}; exact McNemar p = {p_value:.2g}."
    ]


def write_scores(path: Path, pairs: Sequence[Pair], scores: dict[str, list[Optional[float]]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        table = csv.writer(f, lineterminator="\n")
        table.writerow(
            ["run", "agent", "writer", "run_grader", "run_score", *(f"score_{g}" for g in scores), "question", "answer"]
        )
        for i, p in enumerate(pairs):
            recorded = "" if p.score is None else p.score
            regraded = ("" if scores[g][i] is None else round(scores[g][i], 4) for g in scores)
            table.writerow([p.run, p.agent, p.writer, p.grader, recorded, *regraded, p.question, p.answer])


def graded_pairs(runs: Sequence[Path]) -> list[Pair]:
    """Every stream pair the runs graded, in run order."""
    for run in runs:
        if not (run / DECISIONS_FILE).is_file():
            raise UserError(f"{run / DECISIONS_FILE}: not found; give run folders whose stream was graded")
    return [p for run in runs for p in read_pairs(run)]


def cross_grade(runs: Sequence[Path], graders: dict[str, Grader], out: Path) -> str:
    """Every grader (name -> its settings, from its composed config `grader=NAME`) on every run's stream
    pairs; cross_grade.{md,csv} in `out`. Returns the markdown."""
    import time

    from ms.gates.scorer import Scorer, load_rubrics
    from ms.llm import build_lm

    pairs = graded_pairs(runs)
    rubrics = load_rubrics({p.rubric for p in pairs})
    scores, thresholds, seconds = {}, {}, {}
    for name, grader in graders.items():
        backbones, scorer = grader
        lm = build_lm(backbones.config(scorer.backbone), backbones.cache_dir, backbones.use_cache)
        started = time.perf_counter()
        decisions = Scorer(lm, rubrics, scorer).score([(p.agent, p.rubric, p.question, p.answer) for p in pairs])
        seconds[name] = time.perf_counter() - started
        scores[name], thresholds[name] = [d.score for d in decisions], scorer.threshold
    out.mkdir(parents=True, exist_ok=True)
    write_scores(out / "cross_grade.csv", pairs, scores)
    text = (
        f"# Cross-grade\n\n{len(pairs)} stream pairs from {', '.join(f'`{r.name}`' for r in runs)}, graded by "
        + ", ".join(f"{g} ({seconds[g]:.0f} s)" for g in scores)
        + ", each at its own threshold (conf/grader).\n\n"
        + summary(pairs, scores, thresholds)
    )
    (out / "cross_grade.md").write_text(text, encoding="utf-8")
    return text
