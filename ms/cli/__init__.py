"""The command-line entry points: run (ms-run and `python -m ms`: the Hydra task), data (ms-data),
plan (ms-run ... +plan=true), compose (every job of a command composed and checked before Hydra
starts). ms-report is ms.report."""
