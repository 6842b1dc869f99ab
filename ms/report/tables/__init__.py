"""Tables 1-2 beside the paper's numbers, the ablation, the claims, and the pages of runs."""
