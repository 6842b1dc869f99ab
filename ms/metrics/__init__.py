"""What evaluation measures on each test question, one module per metric, each a `Metric`
(ms.metrics.base) registered by name in ms.config.parts.METRICS (`eval.metrics`)."""
