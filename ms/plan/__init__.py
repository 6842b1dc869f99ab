"""Plan mode (+plan=true): what a run or an ms-data command would call, how many tokens and what it would
cost, counted without loading a model (planner: a run's plan, walked as the run walks it; calls: what one call
costs and which row it goes into; rows: what a plan counts, per role and
backbone, and their total; gate: the gate's calls; tokens: the token estimate; measured: rates measured
in a finished run; data: ms-data's plans; flags and table: the command-line flags and the printed table)."""
