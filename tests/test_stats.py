"""ms.common.stats on synthetic samples with known answers: intervals narrow as n grows and cover the
mean; paired comparisons find a known effect, no effect, and a reversed effect."""

from __future__ import annotations

import numpy as np
import pytest

from ms.common.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED, Estimate, mean_ci, paired, verdict


def normal(n: int, seed: int = 0, mean: float = 0.5, sd: float = 0.1) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, sd, n)


def test_intervals_shrink_as_n_grows():
    widths = {}
    for n in (25, 400):
        est = mean_ci(normal(n))
        assert est.n == n and est.lo < est.mean < est.hi
        widths[n] = est.hi - est.lo
    # The width goes as 1/sqrt(n): 16 times the data, about a quarter of the width.
    assert widths[400] < widths[25] / 2
    assert widths[400] == pytest.approx(widths[25] / 4, rel=0.5)


def test_interval_covers_the_true_mean_and_matches_the_normal_theory_width():
    est = mean_ci(normal(400, seed=3))
    assert est.lo < 0.5 < est.hi
    assert est.hi - est.lo == pytest.approx(2 * 1.96 * 0.1 / np.sqrt(400), rel=0.2)


def test_fewer_than_three_values_give_no_interval_and_say_so():
    one = mean_ci([0.7])
    assert (one.mean, one.lo, one.hi, one.n) == (0.7, None, None, 1)
    two = mean_ci([0.2, 0.6])  # a bootstrap of two values is their span, [0.2, 0.6]: not a CI
    assert (two.mean, two.lo, two.hi, two.n) == (pytest.approx(0.4), None, None, 2)
    assert two.text() == "0.400 (n<3, too small) n=2" and one.text(1) == "0.7 (n<3, too small) n=1"
    three = mean_ci([0.2, 0.6, 0.5])
    assert three.lo is not None and three.text().startswith("0.433 [")
    empty = mean_ci([])
    assert (empty.mean, empty.lo, empty.hi, empty.n) == (None, None, None, 0)
    assert mean_ci([None, 0.2, None]).n == 1  # None is 'not measured', not a value
    assert paired([0.5], [0.1]).verdict == INCONCLUSIVE and paired([0.5], [0.1]).p is None


def test_a_known_effect_is_supported():
    b = normal(50, seed=1)
    a = b + 0.1 + normal(50, seed=2, mean=0, sd=0.05)
    result = paired(a, b)
    assert result.verdict == SUPPORTED and result.n == 50
    assert result.estimate == pytest.approx(np.mean(a - b)) and 0 < result.lo < 0.1 < result.hi
    assert result.p < 0.01


def test_no_effect_is_inconclusive():
    b = normal(50, seed=1)
    noise = normal(25, seed=2, mean=0, sd=0.05)
    a = b + np.concatenate([noise, -noise])  # differences that average exactly 0
    result = paired(a, b)
    assert result.verdict == INCONCLUSIVE and result.lo < 0 < result.hi and result.p > 0.5


def test_a_reversed_effect_is_contradicted():
    b = normal(50, seed=1)
    a = b - 0.1 + normal(50, seed=2, mean=0, sd=0.05)
    result = paired(a, b)
    assert result.verdict == CONTRADICTED and result.hi < 0 and result.p < 0.01


def test_paired_needs_the_same_items_on_both_sides():
    with pytest.raises(ValueError):
        paired([0.1, 0.2], [0.1])


def test_verdict_needs_both_the_interval_and_p():
    assert verdict(0.01, 0.2, 0.01) == SUPPORTED
    assert verdict(-0.2, -0.01, 0.01) == CONTRADICTED
    assert verdict(0.01, 0.2, 0.2) == INCONCLUSIVE  # p above alpha
    assert verdict(-0.01, 0.2, 0.01) == INCONCLUSIVE  # the interval reaches 0
    assert verdict(None, None, None) == INCONCLUSIVE


def test_a_signed_text_marks_every_side_of_a_difference():
    """poison.md prints changes signed, so a gain and a harm of the same size read apart."""
    assert Estimate(0.012, -0.003, 0.019, 20).text(3, signed=True) == "+0.012 [-0.003, +0.019] n=20"
    assert Estimate(-0.035, -0.067, -0.009, 20).text(3) == "-0.035 [-0.067, -0.009] n=20"
