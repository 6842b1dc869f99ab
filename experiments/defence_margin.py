"""How the margins of gate=rubric_qdep and gate=rubric_genre were chosen: the test's score (the question-dependence
d of ms/gates/question_dependence.py, or the genre test's g of ms/gates/genre.py) of good pairs, of another question's answer and of the development praise families (ms/gates/check_praise.py;
never the held-out one), on seed pairs the gate check does not judge (each agent's seed pairs after its
first 8), and the share of each kind a margin lets through, with Youden's J of good against the development
families. Markdown on stdout; the scores go through the response cache like every call.

    python experiments/defence_margin.py [--test question|genre] [--pairs 3] [OVERRIDE ...]   # e.g. backbone=qwen2.5-0.5b
"""

from __future__ import annotations

import argparse
from statistics import median

from ms.agents import PromptTemplate, agents_from
from ms.cli.compose import compose_checked
from ms.data import load_splits
from ms.data.plain_praise import Praised, templated
from ms.gates.check_praise import DEVELOPMENT
from ms.gates.genre import GenreTest
from ms.gates.question_dependence import QuestionTest
from ms.gates.rubrics import rubric_for
from ms.gates.settings import RubricQdepSettings
from ms.llm.backbones import Backbones, build_backbones

CHECKED = 8  # the gate check's pairs (--per-agent 8): the held-out check judges them, so they tune nothing
MARGINS = (-0.2, -0.1, -0.05, 0.0, 0.02, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", choices=("question", "genre"), default="question", help="which test's score")
    parser.add_argument("--pairs", type=int, default=3, help="seed pairs per agent after the check's first 8")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = compose_checked(args.overrides)
    settings = RubricQdepSettings.of(cfg.gate)
    agents = agents_from(cfg.agents)
    splits = load_splits(cfg.data, agents)
    catalog = Backbones(cfg.backbone, cfg.cache_dir, cfg.use_cache)
    lm = build_backbones(catalog, [])[catalog.resolve(None)]
    questions = {a: [e.question for e in s.seed] for a, s in splits.items()}
    template = PromptTemplate(**cfg.prompt)
    if args.test == "genre":
        test = GenreTest(lambda a: lm, agents, template, 0.0)
    else:
        test = QuestionTest(lambda a: lm, agents, template, questions, settings.others, 0.0, 0)
    items: list[tuple[str, str, str]] = []
    kinds: list[str] = []
    for agent, split in splits.items():
        praised = Praised.of(agent, rubric_for(agents[agent], cfg.pool.mode))
        pairs = split.seed[CHECKED : CHECKED + args.pairs]
        for j, e in enumerate(pairs):
            other = pairs[(j + 1) % len(pairs)].answer if len(pairs) > 1 else None
            copies = [("good", e.answer), *((("other_question", other),) if other else ())]
            copies += [(kind, templated(kind, e.answer, praised, cfg.seed, e.id)) for kind in DEVELOPMENT]
            for kind, answer in copies:
                items.append((agent, e.question, answer))
                kinds.append(kind)
    measured = [m.d for m in test.measure(items)]
    by_kind: dict[str, list[float]] = {}
    for kind, d in zip(kinds, measured):
        if d is not None:
            by_kind.setdefault(kind, []).append(d)
    names = list(by_kind)
    contrasts = f"m = {settings.others}" if args.test == "question" else f"{test.over}"
    print(
        f"{args.test} test, backbone {cfg.backbone.name}, {contrasts}, seed pairs {CHECKED + 1}-{CHECKED + args.pairs}"
    )
    print("medians: " + ", ".join(f"{k} {median(v):+.3f}" for k, v in by_kind.items()))
    print("| margin | " + " | ".join(f"{k} (n={len(by_kind[k])})" for k in names) + " | J (good vs development) |")
    print("|---" * (len(names) + 2) + "|")
    for margin in MARGINS:
        shares = {k: sum(d > margin for d in v) / len(v) for k, v in by_kind.items()}
        development = [d for k in DEVELOPMENT for d in by_kind.get(k, [])]
        j = shares.get("good", 0.0) - sum(d > margin for d in development) / max(len(development), 1)
        print(f"| {margin:g} | " + " | ".join(f"{shares[k]:.2f}" for k in names) + f" | {j:.2f} |")


if __name__ == "__main__":
    main()
