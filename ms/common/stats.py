"""Uncertainty for every number ms prints: a mean with its n and a 95% bootstrap CI over test
questions, and a paired comparison (two conditions on the same test questions) with a CI, a
p-value and a verdict. Resampling is scipy.stats' own (bootstrap, permutation_test).
"""

import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 0.05
RESAMPLES = 9999
SEED = 0  # fixed, so the same inputs always print the same interval
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
# Below 3 values a bootstrap interval is no more than the span of the values (at n = 2 every
# resample's mean lies between them), which reads as a CI and is not one: none is given.
MIN_CI_N = 3
TOO_SMALL = f"n<{MIN_CI_N}, too small"  # where a CI would stand: n was too small for one


def interval_text(lo: Optional[float], hi: Optional[float], n: int, digits: int = 3, signed: bool = False) -> str:
    """' [lo, hi]'; ' (n<3, too small)' where n was too small for one; '' where there is
    no interval for another reason (a mean read from metrics.json, without its values)."""
    if lo is not None and hi is not None:
        sign = "+" if signed else ""
        return f" [{lo:{sign}.{digits}f}, {hi:{sign}.{digits}f}]"
    return f" ({TOO_SMALL})" if 0 < n < MIN_CI_N else ""


@dataclass(frozen=True)
class Estimate:
    """A mean over n values and its 95% CI; lo and hi are None where n < MIN_CI_N."""

    mean: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    n: int

    def text(self, digits: int = 3, signed: bool = False) -> str:
        """Compact: '0.412 [0.380, 0.444] n=20', or '0.412 (n<3, too small) n=2'; a difference
        `signed`: '+0.012 [-0.003, +0.019] n=20'."""
        if self.mean is None:
            return "–"
        sign = "+" if signed else ""
        return f"{self.mean:{sign}.{digits}f}{interval_text(self.lo, self.hi, self.n, digits, signed)} n={self.n}"


def bootstrap_ci(
    samples: Sequence, statistic, methods: Sequence[str] = ("BCa",), n_resamples: int = RESAMPLES, **options: Any
) -> tuple[float, float]:
    """The 95% interval of `statistic` over `samples` resampled (scipy.stats.bootstrap, with `options`), with
    the project's seed, by the first of `methods` whose bounds are finite: BCa is undefined on some small
    skewed samples, where percentile comes next. Its warnings are silenced: BCa warns on skewed samples, and
    a perfect separation makes every resample the same; the interval is still reported."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in methods:
            ci = stats.bootstrap(
                tuple(samples),
                statistic,
                confidence_level=CONFIDENCE,
                n_resamples=n_resamples,
                method=method,
                random_state=SEED,
                **options,
            ).confidence_interval
            if math.isfinite(ci.low) and math.isfinite(ci.high):
                break
    return float(ci.low), float(ci.high)


def _interval(values: np.ndarray) -> tuple[Optional[float], Optional[float]]:
    if len(values) < MIN_CI_N:
        return None, None
    if np.ptp(values) == 0:  # every resample has the same mean: the interval is that point
        return float(values[0]), float(values[0])
    return bootstrap_ci((values,), np.mean, methods=("BCa", "percentile"))


def paired_statistic_ci(samples: Sequence[np.ndarray], statistic) -> tuple[float, float]:
    """The 95% BCa interval of `statistic(*samples, axis=-1)` (vectorized), the samples resampled together
    (one index per question): for statistics of several paired series, such as a ratio of mean differences
    or a rank correlation."""
    return bootstrap_ci(samples, statistic, paired=True, vectorized=True)


def mean_ci(values: Sequence[float]) -> Estimate:
    """The mean of the values with a 95% bootstrap CI (BCa; percentile where BCa is undefined); no CI
    below MIN_CI_N values."""
    array = np.asarray([v for v in values if v is not None], dtype=float)
    if not len(array):
        return Estimate(None, None, None, 0)
    lo, hi = _interval(array)
    return Estimate(float(array.mean()), lo, hi, len(array))


@dataclass(frozen=True)
class Paired:
    """mean(a - b) over the same n items, its 95% CI, a two-sided p-value, and the verdict on
    'a beats b' (higher is better)."""

    estimate: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    p: Optional[float]
    n: int
    verdict: str


def verdict(lo: Optional[float], hi: Optional[float], p: Optional[float], alpha: float = ALPHA) -> str:
    """'a beats b' is supported when the difference is significantly above 0, contradicted when it
    is significantly below 0, and inconclusive otherwise (including when there is too little data)."""
    if p is None or lo is None or hi is None or p >= alpha:
        return INCONCLUSIVE
    if lo > 0:
        return SUPPORTED
    if hi < 0:
        return CONTRADICTED
    return INCONCLUSIVE  # p and the interval disagree at the margin: do not claim either way


def paired(a: Sequence[float], b: Sequence[float]) -> Paired:
    """Compare two conditions measured on the same items (a[i] and b[i] belong to item i). The CI
    is a bootstrap of the mean difference; the p-value is a sign-flip permutation test on it."""
    if len(a) != len(b):
        raise ValueError(f"paired comparison needs the same items on both sides: {len(a)} vs {len(b)}")
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(diff)
    if n == 0:
        return Paired(None, None, None, None, 0, INCONCLUSIVE)
    lo, hi = _interval(diff)
    p = None
    if n >= 2:
        if np.all(diff == 0):
            p = 1.0
        else:
            result = stats.permutation_test(
                (np.asarray(a, float), np.asarray(b, float)),
                lambda x, y, axis: np.mean(x - y, axis=axis),
                permutation_type="samples",
                n_resamples=RESAMPLES,
                alternative="two-sided",
                random_state=SEED,
                vectorized=True,
            )
            p = float(result.pvalue)
    return Paired(float(diff.mean()), lo, hi, p, n, verdict(lo, hi, p))
