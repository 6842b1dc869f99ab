"""Plan mode (+plan=true): what a run or an ms-data command would call, how many tokens and what it
would cost, counted without loading a model; ARCHITECTURE.md lists the modules."""
