"""What every metric is (`Metric`), and what the run and plan mode hand it: a micro-batch of test rows
(`EvalBatch`) and plan mode's planner (`MetricPlan`). Metric classes are looked up by the keys they
write (`metric_of_key`), which is how ms-report names what a run recorded."""

from abc import ABC
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Protocol, Sequence


@dataclass
class EvalBatch:
    """One micro-batch of test questions at one fill: `rows` (the prediction rows, each holding
    agent, test_id, question, reference, retrieved and, where some metric needs them, answer),
    `prompts` (the chat each agent saw), and `on_backbones(role, call)`: `call(lm, indices)` once per
    backbone the rows' agents run on, with the indices of its rows; results in row order."""

    rows: list[dict]
    prompts: Sequence[list]
    on_backbones: Callable[[str, Callable[[Any, list[int]], list]], list]


class MetricPlan(Protocol):
    """What plan mode (ms.plan.planner) offers a metric that works out its calls for one test question."""

    def agent_can(self, agent: str, what: str) -> bool:
        """Whether `agent`'s backbone can do `what` ("scores_text")."""

    def score_reference(self, agent: str, example: Any, prompt: float, k: float) -> None:
        """One scored request: the reference of `example` given the agent's prompt (`prompt` tokens, `k`
        memories in it), under role evaluate; looked up in the response cache where it can be."""


class Metric(ABC):
    """A metric: built from the `eval` section, it fills its keys into each test question's row."""

    name: ClassVar[str]
    keys: ClassVar[tuple[str, ...]]  # what it writes into a prediction row, and metrics.json summarizes
    labels: ClassVar[dict[str, str]] = {}  # key -> how titles and axes name it (default: the key)
    words: ClassVar[dict[str, str]] = {}  # key -> what it is, in words (claims.md)
    explained: ClassVar[dict[str, str]] = {}  # key -> a table's note on it where the paper has no such number
    higher_is_better: ClassVar[bool] = True
    unit: ClassVar[str] = ""  # how a run's printed table says its values' unit ("in nats per token")
    claim_key: ClassVar[Optional[str]] = None  # the key ms-report's claims are tested on, if any
    needs_answers: ClassVar[bool] = False  # whether the run generates each test question's answer for it
    needs: ClassVar[tuple[str, ...]] = ()  # what an agent's backbone must do for its rows ("scores_text")
    needs_words: ClassVar[str] = ""  # ... in words, for the errors
    # metrics.json keeps `describe()` under this key (None where the run did not use the metric).
    record_key: ClassVar[Optional[str]] = None

    @classmethod
    def build(cls, cfg) -> "Metric":
        """The metric of a run; `cfg` is the `eval` section."""
        return cls()

    def score_batch(self, batch: EvalBatch) -> None:
        """Fill its keys into one micro-batch's rows (where it scores with the agents' backbones)."""

    def score_fill(self, rows: list[dict]) -> None:
        """Fill its keys into every row of one fill, once every micro-batch is done."""

    def requests(self, scores_text: Sequence[bool]) -> int:
        """The LM requests it makes for test questions whose backbones score given text as given."""
        return 0

    def describe(self) -> Optional[dict]:
        """What produced its numbers, for metrics.json (under `record_key`)."""
        return None

    @classmethod
    def encoders(cls, cfg) -> dict[str, Optional[str]]:
        """role -> the transformers encoder it runs under the `eval` section `cfg` (None: the packaged
        one), for the run's provenance and cell record."""
        return {}

    @classmethod
    def planned_calls(cls, plan: MetricPlan, agent: str, example: Any, prompt: float, k: float) -> None:
        """Its LLM calls for one test question of `agent` (beyond the generated answer), added to `plan`."""

    @classmethod
    def label(cls, key: str) -> str:
        return cls.labels.get(key, key)


def metric_of_key(key: str) -> Optional[type[Metric]]:
    """The registered metric that writes `key`, or None (a metric this process does not know)."""
    from ms.config.parts import METRICS

    for name in METRICS:
        cls = METRICS.load(name)
        if key in cls.keys:
            return cls
    return None


def metric_keys(names: Sequence[str]) -> list[str]:
    """The keys the metrics `names` write, in the registry's order (so the order of eval.metrics
    does not reorder a run's summaries)."""
    from ms.config.parts import METRICS

    return [key for name in METRICS if name in names for key in METRICS.load(name).keys]
