"""What metrics.json keeps of the metrics, typed: each fill's summary (`fills`: ms.metrics.evaluate.summarize's
means, CIs and counts, over all test questions and per agent) and what produced the numbers of a metric
that describes itself (BERTScore's `bertscore`: Metric.describe, under its record_key).

Vintages: runs written before `n` was kept per metric hold one n, the rows of the group; a summary or a
description written by hand (a test's run) may lack keys, which stay out when written back.
"""

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from ms.common.sections import Section, absent_from, read, written

SUMMARY_FIELDS = ("n", "ci")  # a summary's fields that are no metric, written before the metrics' means


@dataclass(frozen=True)
class Scores:
    """One group's summary (all test questions, or one agent's): each metric key's mean, its CI and n."""

    n: Union[int, Mapping[str, int], None] = None  # per metric key; one count in older runs
    ci: Optional[Mapping[str, list]] = None  # metric key -> [lo, hi]
    means: Mapping[str, Optional[float]] = field(default_factory=dict)  # metric key -> its mean, as written
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "Scores":
        means = {key: value for key, value in fields.items() if key not in SUMMARY_FIELDS}
        return cls(fields.get("n"), fields.get("ci"), means, absent_from(fields, SUMMARY_FIELDS))

    def to_json(self) -> dict[str, Any]:
        return {**written(self, SUMMARY_FIELDS), **self.means}

    def mean(self, metric: str) -> Optional[float]:
        return self.means.get(metric)

    def n_of(self, metric: str) -> int:
        """How many test questions measured `metric` (older runs: the group's rows, for every metric)."""
        if isinstance(self.n, Mapping):
            return int(self.n.get(metric, 0))
        return int(self.n or 0)

    @property
    def measured(self) -> list[str]:
        """The metric keys the group holds a value of, in the order written."""
        return [key for key, value in self.means.items() if value is not None]


@dataclass(frozen=True)
class FillSummary:
    overall: Scores
    per_agent: Mapping[str, Scores]  # agent -> its summary, in the order written

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> "FillSummary":
        per_agent = {agent: Scores.from_json(s) for agent, s in (fields.get("per_agent") or {}).items()}
        return cls(Scores.from_json(fields.get("overall") or {}), per_agent)

    def to_json(self) -> dict[str, Any]:
        return {"overall": self.overall.to_json(), "per_agent": {a: s.to_json() for a, s in self.per_agent.items()}}

    def scores(self, agent: Optional[str] = None) -> Scores:
        """The summary over all test questions (agent None), else the agent's (empty where it has none)."""
        return self.overall if agent is None else self.per_agent.get(agent, Scores())


@dataclass(frozen=True)
class BertScoreRecord(Section):
    """What produced a run's BERTScore numbers (metrics.json `bertscore`): the encoder and its layer, and the
    versions that shift its results; `rescored_from`, where ms-data rescore wrote them into a copy of a run."""

    model: Optional[str] = None
    num_layers: Optional[int] = None
    rescaled: Optional[bool] = None
    idf: Optional[bool] = None
    bert_score: Optional[str] = None  # the bert-score package's version
    transformers: Optional[str] = None
    rescored_from: Optional[str] = None  # the run folder rescored; None: scored as the run ran
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, fields: Optional[Mapping[str, Any]]) -> Optional["BertScoreRecord"]:
        return None if fields is None else read(cls, fields)


# record_key -> the type of what a metric describes of itself; a key not here is kept as it was written.
DESCRIPTIONS = {"bertscore": BertScoreRecord}


def description_of(key: str, fields: Any) -> Any:
    """The description a run wrote under `key`, typed where its type is known (DESCRIPTIONS)."""
    return DESCRIPTIONS[key].from_json(fields) if key in DESCRIPTIONS else fields
