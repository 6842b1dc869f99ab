"""Where BERTScore P and ref_logprob disagree about a growing pool, measured per question. Markdown on stdout.

    python experiments/measures_disagree.py RUN [--pool RUN/pool.sqlite] [--first 27] [--last 100]
    python experiments/measures_disagree.py RUN --against RUN0 [--against-pool RUN0/pool.sqlite]
        (RUN at its last fill against RUN0 at its last: a k = 3 run against its k = 0 run, or a Domain-pool
        run against its Single-pool run, each side's shots read from its own pool)

For each test question, between two fills of one run, or between two runs (`--against`: a k = 3 run
against its k = 0 run, say): dP (BERTScore P of the generated answer) and dL
(the reference's mean log-prob per token). Then, each a Spearman correlation over questions with a 95%
BCa interval (scipy.stats.bootstrap, questions resampled in pairs):
- dP against dL: do the two measures move together, question by question?
- dP against the change in the answer's length (words);
- dP against the change in how much of the answer is copied from its retrieved shots (the share of the
  answer's words that occur in the shots' answers; an answer that retrieved nothing, as at k = 0, is
  measured against the shots the other side retrieved for the same question: the overlap it has by chance), and against the change in how much it shares with
  the reference (the share of its words that occur in the reference).
Per agent: the mean dP and dL with their paired CIs, and the share of retrieved shots that changed
between the sides (compared by text, as two runs' pools number their memories apart). Shots' texts come
from each side's pool file (`--pool`, default RUN/pool.sqlite; `--against-pool`, default RUN0/pool.sqlite
where RUN0 has one, else RUN's): a published run folder keeps no pool, so this runs on the run folders.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from ms.common.stats import paired, paired_statistic_ci

WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words; a CJK character counts as a word, since Chinese verse has no spaces."""
    out = []
    for token in WORD.findall(text.casefold()):
        out += list(token) if re.search(r"[\u4e00-\u9fff]", token) else [token]
    return out


def shared(answer: str, other: str) -> float:
    """The share of the answer's words that occur in `other` (0 for an empty answer)."""
    mine = words(answer)
    theirs = set(words(other))
    return sum(w in theirs for w in mine) / len(mine) if mine else 0.0


def _rho(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho along the last axis (one value per resample when the inputs are 2-d)."""
    ra, rb = stats.rankdata(a, axis=axis), stats.rankdata(b, axis=axis)
    ra, rb = ra - ra.mean(axis, keepdims=True), rb - rb.mean(axis, keepdims=True)
    return (ra * rb).sum(axis) / np.sqrt((ra**2).sum(axis) * (rb**2).sum(axis))


def spearman_ci(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """rho and its 95% BCa interval, questions resampled in pairs."""
    return (float(_rho(x, y)), *paired_statistic_ci((x, y), _rho))


FIRST_RUN = -1  # the earlier side's key in `at` when it is another run (--against)


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines() if line.strip()]


def _at(rows: list[dict], fill: int) -> dict:
    """(agent, test_id) -> the row at `fill`."""
    return {(r["agent"], r["test_id"]): r for r in rows if int(r["fill"]) == fill}


def _answers(pool: Path) -> dict[int, str]:
    """memory id -> its answer, from a pool file."""
    db = sqlite3.connect(f"file:{pool}?mode=ro", uri=True)
    return dict(db.execute("SELECT id, answer FROM memories"))


def _own_shots(texts: dict[int, str], row: dict) -> list[str]:
    return [texts.get(i, "") for i in row.get("retrieved") or []]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--pool", type=Path, help="the run's pool file (default RUN/pool.sqlite)")
    parser.add_argument("--first", type=int, help="the earlier fill (default: the run's first)")
    parser.add_argument("--last", type=int, help="the later fill (default: the run's last)")
    parser.add_argument("--against", type=Path, help="another run, at its last fill, as the earlier side")
    parser.add_argument("--against-pool", type=Path, help="RUN0's pool file (default RUN0/pool.sqlite, else RUN's)")
    args = parser.parse_args()
    rows = _rows(args.run)
    fills = sorted({int(r["fill"]) for r in rows})
    last = args.last or fills[-1]
    if args.against:
        other = _rows(args.against)
        first = FIRST_RUN
        at = {first: _at(other, max(int(r["fill"]) for r in other)), last: _at(rows, last)}
        sides = f"`{args.run}` at fill {last} against `{args.against}` at its last fill"
    else:
        first = args.first or fills[0]
        at = {f: _at(rows, f) for f in (first, last)}
        sides = f"`{args.run}`: fill {last} against fill {first}"
    keys = sorted(k for k in set(at[first]) & set(at[last]) if all("P" in at[f][k] for f in (first, last)))
    if len(keys) < 3:
        raise SystemExit(f"{sides}: fewer than 3 questions answered on both sides")
    pool_path = args.pool or args.run / "pool.sqlite"
    first_pool = args.against_pool or (args.against / "pool.sqlite" if args.against else None)
    texts = {last: _answers(pool_path)}
    texts[first] = _answers(first_pool) if first_pool and first_pool.exists() else texts[last]

    def shots(f: int, k) -> list[str]:
        """The answers of the shots question `k` retrieved at `f`, or the other side's where it retrieved none."""
        g = f if at[f][k].get("retrieved") else (last if f == first else first)
        return [texts[g].get(i, "") for i in at[g][k].get("retrieved") or []]

    def copied(f: int) -> np.ndarray:
        """The share of each answer's words found in its shots."""
        return np.array([shared(at[f][k]["answer"], "\n".join(shots(f, k))) for k in keys])

    def series(f: int, measure) -> np.ndarray:
        return np.array([measure(at[f][k]) for k in keys], dtype=float)

    d_p = series(last, lambda r: r["P"]) - series(first, lambda r: r["P"])
    d_l = series(last, lambda r: r["ref_logprob"]) - series(first, lambda r: r["ref_logprob"])
    d_len = series(last, lambda r: len(words(r["answer"]))) - series(first, lambda r: len(words(r["answer"])))
    d_copy = copied(last) - copied(first)
    d_ref = series(last, lambda r: shared(r["answer"], r["reference"])) - series(
        first, lambda r: shared(r["answer"], r["reference"])
    )

    print(f"{sides}, n = {len(keys)} test questions answered on both sides\n")
    print("| association over questions | Spearman rho [95% CI] |")
    print("|---|---|")
    for label, x, y in (
        ("dP against d ref_logprob", d_p, d_l),
        ("dP against the change in answer length (words)", d_p, d_len),
        ("dP against the change in the share copied from the retrieved shots", d_p, d_copy),
        ("dP against the change in the share shared with the reference", d_p, d_ref),
        ("d ref_logprob against the change in the share copied from the shots", d_l, d_copy),
    ):
        r, lo, hi = spearman_ci(x, y)
        print(f"| {label} | {r:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
    print(
        f"\nMeans: dP {d_p.mean():+.4f}, d ref_logprob {d_l.mean():+.4f}, answer length {d_len.mean():+.1f} words, "
        f"share copied from shots {d_copy.mean():+.3f}, share shared with the reference {d_ref.mean():+.3f}\n"
    )
    print("| agent | n | dP [95% CI] | verdict | d ref_logprob [95% CI] | verdict | shots changed |")
    print("|---|---:|---|---|---|---|---:|")
    by_agent = defaultdict(list)
    for i, (agent, _) in enumerate(keys):
        by_agent[agent].append(i)
    for agent, idx in sorted(by_agent.items()):
        p = paired(d_p[idx].tolist(), [0.0] * len(idx))
        lp = paired(d_l[idx].tolist(), [0.0] * len(idx))
        changed = np.mean(
            [
                1
                - len(
                    set(_own_shots(texts[first], at[first][keys[i]])) & set(_own_shots(texts[last], at[last][keys[i]]))
                )
                / max(len(at[last][keys[i]]["retrieved"]), 1)
                for i in idx
            ]
        )
        print(
            f"| {agent} | {len(idx)} | {p.estimate:+.4f} [{p.lo:+.4f}, {p.hi:+.4f}] | {p.verdict} | "
            f"{lp.estimate:+.4f} [{lp.lo:+.4f}, {lp.hi:+.4f}] | {lp.verdict} | {changed:.2f} |"
        )


if __name__ == "__main__":
    main()
