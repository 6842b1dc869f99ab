"""The pooled gate-check AUC and its interval over seed pairs (ms.gates.check_pooled): every resample's AUC
is computed at once from counts between seed pairs, and must equal the Mann-Whitney AUC of the rows drawn."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ms.common.stats import SEED
from ms.gates.check_auc import auc
from ms.gates.check_corruptions import GOOD
from ms.gates.check_pooled import PAIR_RESAMPLES, Scored, _by_pair, _PairCounts, compare, pooled_auc


def _rows(rng: np.random.Generator, pairs: int, fewest_bad: int = 0) -> list[Scored]:
    """Scores on a coarse grid (many ties), pairs of uneven size, and (fewest_bad 0) some pairs with no
    corrupted row."""
    rows = []
    for i in range(pairs):
        pair = ("riddle", f"r{i:02d}")
        rows += [Scored(pair, GOOD, float(rng.integers(0, 6))) for _ in range(rng.integers(1, 3))]
        rows += [Scored(pair, "swapped", float(rng.integers(0, 5))) for _ in range(rng.integers(fewest_bad, 4))]
    return rows


def _drawn_auc(by_pair: dict, pairs: list, index) -> float:
    """The AUC of the rows of the drawn pairs, each drawn pair's rows repeated as often as it is drawn."""
    drawn = [r for i in index for r in by_pair[pairs[i]]]
    good = [r.score for r in drawn if r.kind == GOOD]
    bad = [r.score for r in drawn if r.kind == "swapped"]
    return float(auc(good, bad)) if good and bad else np.nan


def test_the_counts_give_the_mann_whitney_auc_of_any_draw_of_pairs_to_the_last_bit():
    rng = np.random.default_rng(3)
    by_pair = _by_pair(_rows(rng, 15))
    pairs = sorted(by_pair)
    counts = _PairCounts.of(by_pair, pairs, ("swapped",))
    draws = rng.integers(0, len(pairs), (200, len(pairs)))
    weights = (draws[..., None] == np.arange(len(pairs))).sum(axis=-2)
    expected = np.array([_drawn_auc(by_pair, pairs, index) for index in draws])
    np.testing.assert_array_equal(counts.auc(weights), expected)


def test_the_interval_is_the_bootstrap_of_the_drawn_rows_auc():
    """The same draws (scipy's bootstrap with the project's seed) and the same AUC of each as one Mann-Whitney
    U per resample: equal bounds."""
    rows = _rows(np.random.default_rng(4), 12)
    by_pair = _by_pair(rows)
    pairs = sorted(by_pair)
    direct = stats.bootstrap(
        (np.arange(len(pairs)),),
        lambda index: _drawn_auc(by_pair, pairs, index),
        n_resamples=PAIR_RESAMPLES,
        method="percentile",
        random_state=SEED,
        vectorized=False,
    ).confidence_interval
    point, lo, hi = pooled_auc(rows, ("swapped",))
    assert point == _drawn_auc(by_pair, pairs, range(len(pairs)))
    assert (lo, hi) == (direct.low, direct.high)


def test_the_pooled_auc_interval_resamples_seed_pairs_not_answers():
    """A seed pair's corruptions share its question: copying each of them eight times adds no evidence. Drawn by
    seed pair, the interval stays as it was; drawn answer by answer, it would narrow."""
    rng = np.random.default_rng(0)
    good, swapped = rng.normal(1.0, 1.0, 12), rng.normal(0.0, 1.0, 12)
    once = [Scored(("riddle", str(i)), GOOD, g) for i, g in enumerate(good)]
    eight = list(once)
    once += [Scored(("riddle", str(i)), "swapped", b) for i, b in enumerate(swapped)]
    eight += [Scored(("riddle", str(i)), "swapped", b) for i, b in enumerate(swapped) for _ in range(8)]
    point, lo, hi = pooled_auc(once, ("swapped",))
    assert pooled_auc(eight, ("swapped",)) == pytest.approx((point, lo, hi))
    assert lo < point < hi


def test_a_comparison_is_the_difference_of_the_two_aucs_on_the_same_draws():
    rng = np.random.default_rng(5)
    base = _rows(rng, 10, fewest_bad=1)
    other = [r._replace(score=r.score + (2.0 if r.kind == GOOD else 0.0)) for r in base]  # goods raised
    difference, lo, hi, n = compare(base, other, ("swapped",))
    assert n == 10
    assert difference == pytest.approx(pooled_auc(other, ("swapped",))[0] - pooled_auc(base, ("swapped",))[0])
    assert 0 < lo <= difference <= hi
