"""The foundations every layer uses, below ms.config and free of torch: `errors` (errors a person
can act on, and how the command-line tools report them) and `stats` (the uncertainty behind every
number ms prints: means with bootstrap CIs, paired comparisons and their verdicts)."""
