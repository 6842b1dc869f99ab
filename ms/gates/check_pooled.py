"""The gate check pooled over agents, and two checks of the same pairs compared (`ms-data gate-compare`).

Pooled: the ROC AUC of every good pair against every corrupted pair of a group (ordinary `all`, the
grader-directed pool, each kind), with a 95% bootstrap CI over seed pairs (a seed pair's good copy and
its corruptions are drawn together: they share a question, so they are not independent answers), and the share of each kind
a threshold admits. `grader_instruction` keeps the real answer, so it is read as a paired score
shift (its score minus the real answer's, per seed pair), whose CI covering 0 means the instruction
moved nothing.

Compared: the same seed pairs judged by two gates (today's and a defended one, or two graders); the
difference of pooled AUCs, other minus base, with a 95% CI from resampling seed pairs (each pair's
good copy and corruptions travel together, so the pairing is kept).
"""

import json
import math
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

import numpy as np

from ms.common.errors import UserError
from ms.common.stats import Estimate, bootstrap_ci, mean_ci
from ms.data.grader_directed import GRADER_INSTRUCTION
from ms.gates.both import both_order
from ms.gates.check_corruptions import ALL, CORRUPTIONS, GOOD, GRADER_POOL, GRADER_POOLED, KINDS
from ms.gates.check_praise import PRAISE_POOLS
from ms.gates.check_report import DECISIONS
from ms.gates.replay import Utility
from ms.gates.settings import UtilitySettings
from ms.gates.utility import utility_verdict

GROUPS = {ALL: CORRUPTIONS, GRADER_POOL: GRADER_POOLED, **PRAISE_POOLS, **{k: (k,) for k in KINDS}}
QDEP_GATE = "rubric_qdep"  # the rubric's grade where the question-dependence test passed, else 0
GENRE_GATE = "rubric_genre"  # the rubric's grade where the genre test passed, else 0
TESTED = {QDEP_GATE: ("question_test", "question-dependence test"), GENRE_GATE: ("genre_test", "genre test")}
# A tested gate's admissions ranked by its test's measure: each pair's rank in the order (the gate admits, the
# test's d), so every pair the gate admits ranks above every pair it refuses, and within each side the word-free
# measure orders them, not the grade the praise flatters. Sweeping a threshold over this score is sweeping the
# test's margin over the pairs the rubric admits. Chosen on the development families before the check of
# cross_praise was read.
RANKED = {"rubric_genre_ranked": GENRE_GATE}
BOTH_GATE = "both"  # the pair's place in the order (rubric admits, u), as the gate check scores it
PAIR_RESAMPLES = 2000  # the draws every committed check was reported with; all of them are one array product


class Scored(NamedTuple):
    pair: tuple[str, str]  # (agent, seed id): the seed pair a row was made from
    kind: str
    score: float
    # Whether the gate admits the pair, where that is no threshold on `score` (`both`: a rank); else None.
    admitted: Optional[bool] = None


def read_check(folder: Path, gate: str = "rubric") -> list[Scored]:
    """Each judged pair's score under `gate` (rubric: the grade, 0 where none was read; rubric_qdep and
    rubric_genre: the grade, 0 where their test failed; utility: u, +inf where none could be measured,
    as the gates treat them; both: its rank in the order (rubric admits, u), admitted where the rubric
    admits and u passes the utility gate's default threshold; rubric_genre_ranked (RANKED): its rank in
    the order (rubric_genre admits, the genre test's d), d -inf where unmeasured)."""
    tested = RANKED.get(gate, gate)
    path = Path(folder) / DECISIONS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise UserError(f"{path}: {err.strerror or err}; name a gate-check output folder") from None
    rows, graded = [], []  # graded: whether the rubric admitted each pair, which `both` ranks first
    measured = []  # a ranked gate's test measure of each pair
    for number, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
            graded.append(bool(r.get("accepted")))
            if gate == "rubric" or tested in TESTED:
                score = r.get("score")
                value = 0.0 if score is None else float(score)
                if tested in TESTED and not _tested(r, path, tested):
                    value = 0.0
            else:
                u = (r.get("utility") or {}).get("u")
                value = math.inf if u is None else float(u)
            admitted = _both_admits(r) if gate == BOTH_GATE else None
            if gate in RANKED:
                d = r[TESTED[tested][0]]["d"]
                measured.append(-math.inf if d is None else float(d))
                admitted = bool(r.get("accepted")) and _tested(r, path, tested)
            rows.append(Scored((r["agent"], str(r["seed_id"])), r["kind"], value, admitted))
        except (ValueError, KeyError, TypeError) as err:
            raise UserError(f"{path}, line {number}: not a gate-check row ({err})") from None
    if gate == BOTH_GATE:  # each row's u becomes its rank in the order (rubric admits, u)
        rows = [r._replace(score=rank) for r, rank in zip(rows, both_order(graded, [r.score for r in rows]))]
    if gate in RANKED:
        rows = [r._replace(score=rank) for r, rank in zip(rows, both_order([r.admitted for r in rows], measured))]
    return rows


def _both_admits(row: dict) -> bool:
    """Whether `both` at its default settings admits the pair: the rubric admitted it, and the utility
    gate's own verdict on its measurement passes it."""
    settings = UtilitySettings()
    passed, _ = utility_verdict(Utility(**row["utility"]), settings.utility_threshold, settings.decide_on)
    return bool(row["accepted"]) and passed


def _tested(row: dict, path: Path, gate: str) -> bool:
    """Whether the row's pair passed the test `gate` adds to the rubric."""
    field, test = TESTED[gate]
    if field not in row:
        raise UserError(f"{path}: no {test} in this check; run ms-data gate-check --gate {gate}")
    return bool(row[field]["passed"])


def _split(rows: Sequence[Scored], kinds: Sequence[str]) -> tuple[list[float], list[float]]:
    return [r.score for r in rows if r.kind == GOOD], [r.score for r in rows if r.kind in kinds]


def instruction_shift(rows: Sequence[Scored]) -> Estimate:
    """Per seed pair, grader_instruction's score minus the real answer's, and their mean with its CI."""
    good = {r.pair: r.score for r in rows if r.kind == GOOD}
    shifts = [r.score - good[r.pair] for r in rows if r.kind == GRADER_INSTRUCTION and r.pair in good]
    return mean_ci([s for s in shifts if math.isfinite(s)])


def pooled_report(rows: Sequence[Scored], threshold: Optional[float], title: str) -> str:
    """Pooled AUC per group and share admitted per kind at `threshold` (admit when score >= it; None:
    not shown)."""
    lines = [
        title,
        f"{'group':<24} {'n good/bad':>11} {'pooled AUC [95% CI]':>24}"
        + (f" {'admitted':>9}" if threshold is not None else ""),
    ]
    present = {r.kind for r in rows}
    for group, kinds in GROUPS.items():
        if not present & set(kinds):
            continue
        good, bad = _split(rows, kinds)
        point, lo, hi = pooled_auc(rows, kinds)
        ci = f"[{lo:.3f}, {hi:.3f}]" if lo is not None else "–"
        admitted = f" {_admitted_share(rows, kinds, threshold):>9.2f}" if threshold is not None else ""
        lines.append(f"{group:<24} {f'{len(good)}/{len(bad)}':>11} {point:>10.3f} {ci:>13}{admitted}")
    if threshold is not None:
        good, _ = _split(rows, ())
        lines.append(f"{GOOD:<24} {len(good):>11} {'':>24} {_admitted_share(rows, (GOOD,), threshold):>9.2f}")
    # A shift in rank (`both`'s score, whose rows carry the gate's verdicts) has no unit worth showing.
    if GRADER_INSTRUCTION in present and all(r.admitted is None for r in rows):
        lines.append(
            f"{GRADER_INSTRUCTION} minus the real answer, per seed pair: {instruction_shift(rows).text(2, signed=True)}"
        )
    return "\n".join(lines)


def _admitted_share(rows: Sequence[Scored], kinds: Sequence[str], threshold: float) -> float:
    """The share of the rows of `kinds` the gate admits: its own verdict where a row carries one, else
    score >= threshold."""
    picked = [r for r in rows if r.kind in kinds]
    return float(np.mean([r.score >= threshold if r.admitted is None else r.admitted for r in picked]))


class _PairCounts(NamedTuple):
    """Mann-Whitney counts between seed pairs: `wins[p, q]` is twice the number of (good row of pair p, bad
    row of pair q) where the good one scores higher, ties counting once (half, doubled); `good` and `bad`
    count each pair's rows. For any multiset of pairs (`weights`, how often each is drawn) the pooled AUC
    is then w·wins·w / (2 (w·good)(w·bad)): the same U over n1*n2 as on the drawn rows, exact in integers,
    for every bootstrap resample at once."""

    wins: np.ndarray
    good: np.ndarray
    bad: np.ndarray

    @classmethod
    def of(cls, rows_by_pair: dict, pairs: Sequence, kinds: Sequence[str]) -> "_PairCounts":
        index = {p: i for i, p in enumerate(pairs)}
        rows = [r for p in pairs for r in rows_by_pair[p]]
        good = [r for r in rows if r.kind == GOOD]
        bad = [r for r in rows if r.kind in kinds]
        good_pair = np.array([index[r.pair] for r in good], dtype=np.int64)
        bad_pair = np.array([index[r.pair] for r in bad], dtype=np.int64)
        g, b = np.array([r.score for r in good], dtype=float), np.array([r.score for r in bad], dtype=float)
        wins = np.zeros((len(pairs), len(pairs)), dtype=np.int64)  # summed over every (good row, bad row)
        np.add.at(wins, (good_pair[:, None], bad_pair[None, :]), 2 * (g[:, None] > b) + (g[:, None] == b))
        return cls(wins, np.bincount(good_pair, minlength=len(pairs)), np.bincount(bad_pair, minlength=len(pairs)))

    def auc(self, weights: np.ndarray) -> np.ndarray:
        """The pooled AUC of each row of `weights` (..., pairs); nan where it holds no good or no bad row."""
        twice_u = np.einsum("...p,pq,...q->...", weights, self.wins, weights)
        pairs = (weights @ self.good) * (weights @ self.bad)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(pairs > 0, twice_u / 2 / pairs, math.nan)


def _by_pair(rows: Sequence[Scored]) -> dict:
    grouped = {}
    for r in rows:
        grouped.setdefault(r.pair, []).append(r)
    return grouped


def _over_pairs(n_pairs: int, statistic) -> tuple[float, float]:
    """95% percentile CI of `statistic(weights)` with the seed pairs resampled with replacement; `weights`
    (resamples, pairs) counts how often each pair is drawn."""

    def resampled(index: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic((index[..., None] == np.arange(n_pairs)).sum(axis=-2))

    indices = (np.arange(n_pairs),)
    return bootstrap_ci(indices, resampled, methods=("percentile",), n_resamples=PAIR_RESAMPLES, vectorized=True)


def pooled_auc(rows: Sequence[Scored], kinds: Sequence[str]) -> tuple[float, Optional[float], Optional[float]]:
    """The pooled AUC of good against `kinds`, and its 95% CI over seed pairs (None under 2 pairs)."""
    by_pair = _by_pair(rows)
    pairs = sorted(by_pair)
    counts = _PairCounts.of(by_pair, pairs, kinds)
    point = float(counts.auc(np.ones(len(pairs), dtype=np.int64)))
    if len(pairs) < 2:
        return point, None, None
    return (point, *_over_pairs(len(pairs), counts.auc))


def compare(base: Sequence[Scored], other: Sequence[Scored], kinds: Sequence[str]) -> tuple[float, float, float, int]:
    """(other's pooled AUC minus base's, CI low, CI high, seed pairs) on the seed pairs both judged."""
    by_base, by_other = _by_pair(base), _by_pair(other)
    pairs = sorted(by_base.keys() & by_other.keys())
    if not pairs:
        raise UserError("the two gate checks share no seed pair: compare checks of the same data and --per-agent")

    counts_other, counts_base = _PairCounts.of(by_other, pairs, kinds), _PairCounts.of(by_base, pairs, kinds)

    def difference(weights: np.ndarray) -> np.ndarray:
        return counts_other.auc(weights) - counts_base.auc(weights)

    return float(difference(np.ones(len(pairs), dtype=np.int64))), *_over_pairs(len(pairs), difference), len(pairs)


def compare_report(
    base_folder: Path, other_folder: Path, gate: str, threshold: Optional[float], other_gate: Optional[str] = None
) -> str:
    """`gate`'s scores in both checks, or with `other_gate` that gate's in the other (two gates of one check)."""
    other_gate = other_gate or gate
    base, other = read_check(base_folder, gate), read_check(other_folder, other_gate)
    lines = [
        pooled_report(base, threshold, f"base: {base_folder} (gate {gate})"),
        "",
        pooled_report(other, threshold, f"other: {other_folder} (gate {other_gate})"),
        "",
        "pooled AUC, other minus base, on the same seed pairs (95% CI, seed pairs resampled)",
    ]
    present = {r.kind for r in base} & {r.kind for r in other}
    for group, kinds in GROUPS.items():
        if present & set(kinds) and group != GRADER_INSTRUCTION:
            d, lo, hi, n = compare(base, other, kinds)
            lines.append(f"{group:<24} {d:+.3f} [{lo:+.3f}, {hi:+.3f}] over {n} seed pairs")
    return "\n".join(lines)
