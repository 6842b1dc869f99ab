"""eval.metrics=[ref_logprob]: the reference answer's mean log-probability per token given exactly
the prompt the agent saw (EPR and LLM-R's demonstration utility), in nats per token: one forward pass
on the agent's backbone, no decoding. Measured only where that backbone scores given text (absent
from the other agents' rows, never 0)."""

from typing import Any, Sequence

from ms.config.schema import REF_LOGPROB
from ms.metrics.base import EvalBatch, Metric, MetricPlan


class RefLogprob(Metric):
    name = REF_LOGPROB
    keys = (REF_LOGPROB,)
    labels = {REF_LOGPROB: "ref log-prob (nats/token)"}
    words = {REF_LOGPROB: "the reference answer's mean log-prob per token given the agent's prompt, in nats"}
    explained = {
        REF_LOGPROB: "mean log-probability per token of the reference answer given the agent's prompt, "
        "in nats (higher is better)"
    }
    claim_key = REF_LOGPROB  # the cheap, sensitive one (ARCHITECTURE.md, "Metrics")
    needs = ("scores_text",)
    needs_words = "score given text"
    unit = "in nats per token"

    def score_batch(self, batch: EvalBatch) -> None:
        """(mean log-prob per token, tokens) of each reference given its prompt, on its agent's backbone."""

        def score(lm, idx: list[int]) -> list:
            if not lm.scores_text:
                return [None] * len(idx)
            scored = lm.loglikelihood(
                [lm.chat_context(batch.prompts[i]) for i in idx], [batch.rows[i]["reference"] for i in idx]
            )
            return [(total / n, n) for total, n in scored]

        for row, scored in zip(batch.rows, batch.on_backbones("evaluate", score)):
            if scored is not None:
                row[REF_LOGPROB], row["ref_tokens"] = scored

    def requests(self, scores_text: Sequence[bool]) -> int:
        return sum(scores_text)

    @classmethod
    def planned_calls(cls, plan: MetricPlan, agent: str, example: Any, prompt: float, k: float) -> None:
        if plan.agent_can(agent, "scores_text"):
            plan.score_reference(agent, example, prompt, k)
