"""The k = 0 evaluation a sharing matrix's gains are measured against: the run whose test questions
pair with a k > 0 run's, one question at a time."""

from dataclasses import dataclass
from typing import Optional, Sequence

from ms.report.common.runs import Item, Run
from ms.report.common.saved_config import SavedConfig

# What a k = 0 evaluation must share with the run for its per-question values to be the baseline:
# the test questions, the prompt wording, the agents and the metric's settings (k = 0 reads no pool).
BASELINE_KEYS = ("data", "prompt", "agents", "eval.model", "eval.num_layers", "eval.lang")
# data.agents only picks which agents run; each agent's questions are split on their own, so a k = 0 run
# of all agents pairs with a run of some of them (one process of experiment=sharing_postgres).
IGNORED = {"data": ("agents",)}


@dataclass(frozen=True)
class Baseline:
    run: Run
    values: dict[Item, float]  # per test question, at k = 0
    mismatched: int  # questions with the same id whose text or reference differ: left unpaired


def _setting(saved: SavedConfig, dotted: str):
    value = saved.setting(dotted)
    if isinstance(value, dict) and dotted in IGNORED:
        value = {k: v for k, v in value.items() if k not in IGNORED[dotted]}
    return value


def find_baseline(run: Run, runs: Sequence[Run], metric: str, fill: int) -> Optional[Baseline]:
    """The k = 0 run whose questions pair with `run`'s at `fill`: same backbone and BASELINE_KEYS; of
    several, one with the same seed, then pool, then the most recently finished. Its last fill is used:
    at k = 0 nothing is retrieved, so every fill is the same evaluation."""
    mine = SavedConfig.of(run.path)
    candidates = []
    for other in runs:
        if other.cell[1] != 0 or other.record.backbone != run.record.backbone or other.predictions is None:
            continue
        theirs = SavedConfig.of(other.path)
        if all(_setting(mine, key) == _setting(theirs, key) for key in BASELINE_KEYS):
            candidates.append(other)
    if not candidates:
        return None
    best = max(candidates, key=lambda r: (r.seed == run.seed, r.record.pool == run.record.pool, r.finished, r.name))
    rows = best.predictions.get(best.last_fill, {})
    values, mismatched = {}, 0
    for item, row in run.predictions.get(fill, {}).items():
        base = rows.get(item)
        if base is None or base.get(metric) is None:
            continue
        if (base.get("question"), base.get("reference")) != (row.get("question"), row.get("reference")):
            mismatched += 1  # the same id names another question: not a pair
            continue
        values[item] = float(base[metric])
    return Baseline(best, values, mismatched)
