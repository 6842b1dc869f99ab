"""How well a gate's scores separate good pairs from corrupted ones: the per-agent ROC AUC (good above
corrupted) with a 95% bootstrap CI, over all corruptions and per kind, and the Youden threshold."""

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats

from ms.common.stats import bootstrap_ci
from ms.gates.check_corruptions import ALL, CORRUPTIONS, GOOD, GRADER_DIRECTED, GRADER_POOL, GRADER_POOLED


def auc(good: Sequence[float], bad: Sequence[float], axis: int = -1) -> np.ndarray:
    """P(a good pair outscores a corrupted one), ties counting half: the Mann-Whitney U over n1*n2."""
    good, bad = np.asarray(good, float), np.asarray(bad, float)
    u = stats.mannwhitneyu(good, bad, axis=axis, alternative="two-sided").statistic
    return u / (good.shape[axis] * bad.shape[axis])


def auc_with_ci(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float | None, float | None]:
    point = float(auc(good, bad))
    if len(good) < 2 or len(bad) < 2:
        return point, None, None
    # Percentile: a perfect separation makes every resample 1.0, where BCa degenerates.
    samples = (np.asarray(good, float), np.asarray(bad, float))
    return (point, *bootstrap_ci(samples, auc, methods=("percentile",), vectorized=True))


@dataclass
class Separation:
    """Good against one corruption (or all of them) for one agent under one gate."""

    auc: float
    lo: float | None
    hi: float | None
    n_good: int
    n_corrupted: int
    mean_corrupted: float | None

    @property
    def near_chance(self) -> bool:
        """The CI covers 0.5 (no CI: too few pairs to tell)."""
        return self.lo is None or self.lo <= 0.5 <= self.hi


@dataclass
class AgentAUC:
    agent: str
    missing: int  # pairs the gate read no score for, counted as its missing_score
    mean_good: float | None
    by_kind: dict[str, Separation]  # ALL and each corruption present

    @property
    def overall(self) -> Separation:
        return self.by_kind[ALL]


def _mean(values: Sequence[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def kind_groups(by_kind: dict[str, list]) -> dict[str, list]:
    """ALL (the ordinary corruptions), each of them, and where present the grader-directed pool and kinds."""
    groups = {
        ALL: [v for kind in CORRUPTIONS for v in by_kind.get(kind, [])],
        **{kind: by_kind[kind] for kind in CORRUPTIONS if kind in by_kind},
    }
    if any(kind in by_kind for kind in GRADER_POOLED):
        groups[GRADER_POOL] = [v for kind in GRADER_POOLED for v in by_kind.get(kind, [])]
    groups.update({kind: by_kind[kind] for kind in GRADER_DIRECTED if kind in by_kind})
    return groups


def summarize(rows: Sequence[tuple[str, str, Optional[float]]], missing_as: float = 0.0) -> list[AgentAUC]:
    """rows: (agent, kind, score); a missing score counts as `missing_as`."""
    out = []
    for agent in dict.fromkeys(a for a, _, _ in rows):
        by_kind: dict[str, list[float]] = {}
        for a, kind, score in rows:
            if a == agent:
                by_kind.setdefault(kind, []).append(missing_as if score is None else float(score))
        good = by_kind.get(GOOD, [])
        groups = kind_groups(by_kind)
        separations = {
            kind: Separation(*auc_with_ci(good, bad), len(good), len(bad), _mean(bad)) for kind, bad in groups.items()
        }
        out.append(AgentAUC(agent, sum(s is None for a, _, s in rows if a == agent), _mean(good), separations))
    return out


def mean_auc(agents: Sequence[AgentAUC], kind: str) -> float | None:
    """The mean over agents of the AUC against `kind` (ALL or a corruption)."""
    values = [r.by_kind[kind].auc for r in agents if kind in r.by_kind]
    return float(np.mean(values)) if values else None


def youden_threshold(good: Sequence[float], bad: Sequence[float]) -> tuple[float, float]:
    """(t, J): the threshold with the largest Youden's J = P(good admitted) - P(corrupted admitted)
    for a gate that admits when score > t, trying 0 and every score seen (closest to 0 on a tie)."""
    good, bad = np.asarray(good, float), np.asarray(bad, float)
    tried = sorted({0.0, *good[np.isfinite(good)], *bad[np.isfinite(bad)]}, key=abs)
    j = [float((good > t).mean() - (bad > t).mean()) for t in tried]
    best = int(np.argmax(j))
    return tried[best], j[best]
