"""Data hygiene: duplicate questions within and across splits, test questions that leak from the
seed or stream, empty answers and broken forms, and a clean variant without the leaked tests.

Questions are compared after normalizing case, quotes, punctuation and spacing (exact
duplicates), and by the Jaccard similarity of their character trigrams (near duplicates: the same
item with a word or two changed, a truncated first word, a stray space). Trigrams work the same for
English and Chinese, where the packaged MiniLM sees mostly unknown tokens.
"""

import json
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from .load import SPLITS, Example, form_problem

# Near duplicates: questions with trigram Jaccard >= NEAR_QUESTION whose answers also have
# Jaccard >= NEAR_ANSWER; where an answer is missing (stream items), the question alone must reach
# NEAR_QUESTION_ALONE. The answer keeps apart puns built on one question pattern ("Why was the equal
# sign so happy?" / "... so humble?"), and lets reworded riddles with one answer meet.
NEAR_QUESTION, NEAR_ANSWER, NEAR_QUESTION_ALONE = 0.5, 0.5, 0.7
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "，": ",", "？": "?", "！": "!"})


def normalize(text: str) -> str:
    """Case, quotes, punctuation and spacing folded away; letters, digits and CJK kept."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def _trigrams(text: str) -> frozenset[str]:
    padded = f" {text} "
    return frozenset(padded[i : i + 3] for i in range(max(len(padded) - 2, 1)))


@dataclass(frozen=True)
class _Item:
    example: Example
    where: str
    key: str  # normalized question
    grams: frozenset  # of the question
    answer_grams: frozenset | None  # None: no answer

    def brief(self) -> dict:
        return {"id": self.example.id, "agent": self.example.agent, "split": self.example.split, "where": self.where}


def _items(data: dict[str, list[Example]], where: dict[str, str] | None) -> list[_Item]:
    items = []
    for examples in data.values():
        for e in examples:
            if e.split not in SPLITS:
                raise ValueError(
                    f"{e.id}: hygiene needs every example's split (seed, stream or test), "
                    f"got {e.split!r}; frame them first with ms.data.with_splits"
                )
            key, answer = normalize(e.question), normalize(e.answer)
            items.append(
                _Item(e, (where or {}).get(e.id, e.id), key, _trigrams(key), _trigrams(answer) if answer else None)
            )
    return items


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b)


def _pairs(items: list[_Item]) -> list[tuple[str, float, _Item, _Item]]:
    """(exact | near, question similarity, a, b) for every pair of duplicate questions, a first in
    `items`."""
    found = []
    by_key: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        by_key[item.key].append(item)
    for group in by_key.values():
        found += [("exact", 1.0, a, b) for a, b in combinations(group, 2)]
    # Jaccard >= t needs the smaller set to hold at least t of the larger: sorting by size bounds
    # the inner loop.
    order = sorted(range(len(items)), key=lambda i: len(items[i].grams))
    for pos, i in enumerate(order):
        a = items[i]
        for j in order[pos + 1 :]:
            b = items[j]
            if len(a.grams) < NEAR_QUESTION * len(b.grams):
                break
            if a.key == b.key:
                continue
            score = _jaccard(a.grams, b.grams)
            if a.answer_grams is None or b.answer_grams is None:
                near = score >= NEAR_QUESTION_ALONE
            else:
                near = score >= NEAR_QUESTION and _jaccard(a.answer_grams, b.answer_grams) >= NEAR_ANSWER
            if near:
                found.append(("near", round(score, 3), *((a, b) if i < j else (b, a))))
    return found


def hygiene_report(data: dict[str, list[Example]], where: dict[str, str] | None = None) -> dict:
    """Everything worth knowing before trusting a test score on `data` (every example must carry
    its split). `where` maps ids to "file:line" for the listings."""
    items = _items(data, where)
    position = {id(item): n for n, item in enumerate(items)}
    pairs = sorted(_pairs(items), key=lambda p: (position[id(p[2])], position[id(p[3])]))

    by_splits: dict[str, Counter] = defaultdict(Counter)
    for kind, _, a, b in pairs:
        splits = "-".join(sorted((a.example.split, b.example.split), key=SPLITS.index))
        by_splits[splits][kind] += 1
        by_splits[splits]["across agents"] += a.example.agent != b.example.agent

    leaks: dict[str, dict[str, dict]] = defaultdict(dict)  # agent -> test id -> entry
    repeated: dict[str, set[str]] = defaultdict(set)
    for kind, score, a, b in pairs:
        if a.example.split == b.example.split == "test":
            # A test question asked twice weighs twice; the clean variant keeps the first copy.
            if kind == "exact" and a.example.agent == b.example.agent:
                repeated[b.example.agent].add(b.example.id)
            continue
        for test, other in ((a, b), (b, a)):
            if test.example.split != "test":
                continue
            entry = leaks[test.example.agent].setdefault(
                test.example.id, {**test.brief(), "question": test.example.question, "matches": []}
            )
            entry["matches"].append({**other.brief(), "kind": kind, "similarity": score})

    agents = list(data)
    report = {
        "near_rule": {"question": NEAR_QUESTION, "answer": NEAR_ANSWER, "question_alone": NEAR_QUESTION_ALONE},
        "items": {a: dict(Counter(e.split for e in data[a])) for a in agents},
        "duplicates": {
            "exact": sum(p[0] == "exact" for p in pairs),
            "near": sum(p[0] == "near" for p in pairs),
            "by_splits": {k: dict(v) for k, v in sorted(by_splits.items())},
            "pairs": [
                {"kind": kind, "similarity": score, "a": a.brief(), "b": b.brief()} for kind, score, a, b in pairs
            ],
        },
        "leaks": {},
        "repeated_tests": {a: len(repeated[a]) for a in agents if repeated[a]},
        "empty_answers": {},
        "form_failures": {},
        "kept_tests": {},
    }
    for agent in agents:
        tests = [e for e in data[agent] if e.split == "test"]
        leaked = leaks.get(agent, {})
        if leaked:
            report["leaks"][agent] = {
                "test": len(tests),
                "leaked": len(leaked),
                "in_seed": sum(any(m["split"] == "seed" for m in x["matches"]) for x in leaked.values()),
                "in_stream": sum(any(m["split"] == "stream" for m in x["matches"]) for x in leaked.values()),
                "items": list(leaked.values()),
            }
        empty = Counter(e.split for e in data[agent] if not e.answer.strip())
        if empty:
            report["empty_answers"][agent] = dict(empty)
        broken = [
            {"id": e.id, "where": (where or {}).get(e.id, e.id), "problem": problem}
            for e in data[agent]
            if e.answer.strip() and (problem := form_problem(e))
        ]
        if broken:
            report["form_failures"][agent] = broken
        dropped = set(leaked) | repeated[agent]
        report["kept_tests"][agent] = {
            "test": len(tests),
            "leaked": len(leaked),
            "repeated": len(repeated[agent] - set(leaked)),
            "kept": sum(e.id not in dropped for e in tests),
        }
    return report


def drop_leaked_tests(data: dict[str, list[Example]], report: dict) -> dict[str, list[Example]]:
    """The clean variant: every test item that leaks from seed or stream, or repeats an earlier test
    item, removed; seed and stream untouched, so the pool grows exactly as on the leaky data."""
    dropped = {x["id"] for agent in report["leaks"].values() for x in agent["items"]}
    dropped |= {
        p["b"]["id"]
        for p in report["duplicates"]["pairs"]
        if p["kind"] == "exact" and p["a"]["split"] == p["b"]["split"] == "test" and p["a"]["agent"] == p["b"]["agent"]
    }
    return {agent: [e for e in examples if e.id not in dropped] for agent, examples in data.items()}


def format_hygiene(report: dict, title: str = "") -> str:
    """The report's figures in a few lines per topic (the JSON holds every pair and item)."""
    dup = report["duplicates"]
    rule = report["near_rule"]
    lines = [
        f"hygiene{' of ' + title if title else ''}: {dup['exact']} exact and {dup['near']} near duplicate "
        f"question pairs (near: trigram Jaccard of questions >= {rule['question']} and of answers >= "
        f"{rule['answer']}, or of questions alone >= {rule['question_alone']} where an answer is missing)"
    ]
    for splits, counts in dup["by_splits"].items():
        lines.append(
            f"  {splits:<14} exact {counts.get('exact', 0):>4}  near {counts.get('near', 0):>4}  "
            f"across agents {counts.get('across agents', 0):>4}"
        )
    lines.append(
        f"{'agent':<11} {'test':>5} {'leaked':>7} {'in seed':>8} {'in stream':>10} {'repeated':>9} "
        f"{'kept':>5} {'empty answers':>22} {'form failures':>14}"
    )
    for agent, kept in report["kept_tests"].items():
        leak = report["leaks"].get(agent, {})
        empty = ", ".join(f"{s} {n}" for s, n in report["empty_answers"].get(agent, {}).items()) or "0"
        lines.append(
            f"{agent:<11} {kept['test']:>5} {kept['leaked']:>7} {leak.get('in_seed', 0):>8} "
            f"{leak.get('in_stream', 0):>10} {kept['repeated']:>9} {kept['kept']:>5} {empty:>22} "
            f"{len(report['form_failures'].get(agent, [])):>14}"
        )
    return "\n".join(lines)


def write_hygiene(report: dict, folder: str | Path) -> Path:
    path = Path(folder) / "hygiene.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
