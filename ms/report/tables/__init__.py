"""Tables 1-2 beside the paper's numbers (paper, paper_tables.yaml, tables), the ablation, the claims
(claims, claim_files) and the pages of runs (pages: runs.md, summary.md's runs, its records)."""
