"""The foundations every layer uses, below ms.config and free of torch: `errors` (errors a person
can act on, and how the command-line tools report them), `stats` (the uncertainty behind every
number ms prints: means with bootstrap CIs, paired comparisons and their verdicts) and `sections` (how
a typed section of metrics.json keeps the keys its vintage wrote)."""
