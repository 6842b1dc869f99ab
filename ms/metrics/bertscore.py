"""eval.metrics=[bertscore]: BERTScore P, R and F1 of each generated answer against its reference
(ms.metrics.evaluate.BERTScore; the paper's metric). Needs the answers, so the run generates them."""

from typing import Optional

from ms.metrics.base import Metric
from ms.metrics.evaluate import BERTSCORE_KEYS, BERTScore


class BERTScoreMetric(Metric):
    name = "bertscore"
    keys = BERTSCORE_KEYS
    labels = {key: f"BERTScore {key}" for key in BERTSCORE_KEYS}
    words = {"P": "BERTScore precision", "R": "BERTScore recall", "F1": "BERTScore F1"}
    claim_key = "P"  # the headline metric (ARCHITECTURE.md, "Metrics"): the paper's code reported precision
    needs_answers = True
    record_key = "bertscore"

    def __init__(self, scorer: BERTScore):
        self.scorer = scorer

    @classmethod
    def build(cls, cfg) -> "BERTScoreMetric":
        return cls(BERTScore(cfg))

    def score_fill(self, rows: list[dict]) -> None:
        """Every answer of the fill at once: the scorer batches them itself."""
        scores = self.scorer.score([r["answer"] for r in rows], [r["reference"] for r in rows])
        for row, (p, r, f) in zip(rows, scores):
            row.update(P=p, R=r, F1=f)

    def describe(self) -> dict:
        return self.scorer.describe()

    @classmethod
    def encoders(cls, cfg) -> dict[str, Optional[str]]:
        return {"bertscore": cfg.model}
