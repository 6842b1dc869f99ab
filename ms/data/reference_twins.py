"""Reference twins: test items whose reference answer is also the answer of a seed or stream item of the
same agent, under another question.

The question checks of ms.data.hygiene cannot see these: the questions differ ("What can be broken,
but is never held?" against a riddle worded otherwise), but the answer is the same text. A pool grown
with the stream's references then holds the test item's reference word for word, so the
reference-written pool is flattered on exactly those items (docs/reading/claims.md says how to list
them and leave them out of the report).

The rule compares references only, after ms.data.hygiene.normalize: equal normalized references at any
length, or character-trigram Jaccard >= TWIN_SIMILARITY where both references are at least
TWIN_MIN_CHARS long. The bounds were fixed before any effect on a result was looked at: short answers
("A promise.") count only when equal, since two different short answers can share most trigrams;
long answers count when nearly all their trigrams are shared (a reworded sentence or two).
"""

from collections import Counter
from pathlib import Path

from .hygiene import _jaccard, _trigrams, normalize
from .load import Example

TWIN_SIMILARITY = 0.8
TWIN_MIN_CHARS = 20


def reference_twins(data: dict[str, list[Example]]) -> list[dict]:
    """One entry per test item with a twin: its id, agent and reference, and every seed or stream item
    of its agent whose reference is its twin (id, split, similarity). Every example must carry its split
    (ms.data.with_splits); items without an answer (unanswered stream items) are never twins."""
    found = []
    for agent, examples in data.items():
        keyed = [(e, normalize(e.answer)) for e in examples if e.answer.strip()]
        pool = [(e, key, _trigrams(key)) for e, key in keyed if e.split in ("seed", "stream")]
        for test, key in ((e, k) for e, k in keyed if e.split == "test"):
            grams = _trigrams(key)
            matches = []
            for other, other_key, other_grams in pool:
                if other_key == key:
                    similarity = 1.0
                elif min(len(key), len(other_key)) >= TWIN_MIN_CHARS:
                    similarity = _jaccard(grams, other_grams)
                    if similarity < TWIN_SIMILARITY:
                        continue
                else:
                    continue
                matches.append({"id": other.id, "split": other.split, "similarity": round(similarity, 3)})
            if matches:
                found.append({"id": test.id, "agent": agent, "reference": test.answer, "twins": matches})
    return found


def format_twins(twins: list[dict], title: str = "") -> str:
    """The rule, the count per agent and split, and one line per test item with its twins."""
    by_split = Counter(m["split"] for t in twins for m in t["twins"])
    lines = [
        f"reference twins{' in ' + title if title else ''}: {len(twins)} test item(s) whose reference is a seed "
        f"or stream reference of the same agent (normalized equal, or trigram Jaccard >= {TWIN_SIMILARITY} "
        f"for references of at least {TWIN_MIN_CHARS} characters); twins in seed {by_split['seed']}, "
        f"in stream {by_split['stream']}"
    ]
    for t in twins:
        others = ", ".join(f"{m['id']} ({m['split']}, {m['similarity']:.2f})" for m in t["twins"])
        reference = " ".join(t["reference"].split())
        lines.append(f"  {t['id']}: {reference[:60]}{'…' if len(reference) > 60 else ''}  <- {others}")
    return "\n".join(lines)


def write_twin_ids(twins: list[dict], path: str | Path) -> Path:
    """The test ids, one per line, under a comment naming the rule: the file --exclude-tests reads."""
    path = Path(path)
    header = f"# reference twins: trigram Jaccard >= {TWIN_SIMILARITY}, references >= {TWIN_MIN_CHARS} chars\n"
    path.write_text(header + "".join(f"{t['id']}\n" for t in twins), encoding="utf-8")
    return path


def read_test_ids(path: str | Path) -> frozenset[str]:
    """Test ids, one per line; blank lines and lines starting with # are skipped. A missing file, or one
    that names no id, is a ValueError naming it (an exclusion that excludes nothing is a mistake)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ValueError(f"--exclude-tests {path}: {err.strerror or err}") from None
    ids = frozenset(s for line in lines if (s := line.strip()) and not s.startswith("#"))
    if not ids:
        raise ValueError(f"--exclude-tests {path}: no test id in it (one id per line; # starts a comment)")
    return ids
