"""The loop and its run record: `pipeline` runs seed -> stream -> evaluate over the parts that
`compose_run` (the composition root, the one place that reads the root config) built, putting its
questions to the agents and evaluating at each fill through `answering`; beside them
what a run needs around the loop: `validation` (the checks before it starts), `schedule` (its order,
shared with plan mode), `run_folder` (its folder), `cell` (the sweep cell a folder holds),
`printout` (what it prints) and `provenance` (its reproducibility record)."""
