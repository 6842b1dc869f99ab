"""What evaluation measures on each test question, one module per metric, each a `Metric`
(ms.metrics.base) registered by name in ms.config.parts.METRICS (`eval.metrics`): what it needs of a
backbone, how it scores a batch of test rows, whether higher is better, and how the report names it.

- bertscore: P, R and F1 of the generated answers against the references (the paper's metric);
- ref_logprob: the reference answer's mean log-prob per token given the agent's prompt, one forward
  pass and no decoding, on backbones that score given text.
"""
