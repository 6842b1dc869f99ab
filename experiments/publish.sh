#!/usr/bin/env bash
# Copy a finished sweep's evidence (each cell's metrics, predictions, decisions, usage and config,
# and memories.csv: who wrote each memory of its pool, and in which run) into results/<sweep>/runs,
# then draw its report from those copies, so anyone can redraw it:
#   bash experiments/publish.sh table1_offline --metric ref_logprob
# A sweep whose pool is on PostgreSQL (pool/backend=postgres) needs MS_POOL_DSN set to its database.
set -euo pipefail
sweep=$1; shift
report=${MS_REPORT:-ms-report}
# The Python that runs ms-report (a venv's, beside it) exports memories.csv, unless PYTHON names one.
python=${PYTHON:-$(dirname "$(command -v "$report" || echo .)")/python}
[ -x "$python" ] || python=python3
src=multirun/$sweep
dst=results/$sweep
[ -d "$src" ] || { echo "no sweep folder $src: run ms-run -m experiment=$sweep first" >&2; exit 2; }
# The sweep's hand-written README.md (command, data, wall time) survives a re-publish.
readme=$(mktemp); trap 'rm -f "$readme"' EXIT
if [ -f "$dst/README.md" ]; then cp "$dst/README.md" "$readme"; fi
rm -rf "$dst"
for cell in "$src"/*/; do
  [ -f "$cell/metrics.json" ] || { echo "skipping $cell: no metrics.json (unfinished)" >&2; continue; }
  out="$dst/runs/$(basename "$cell")"
  mkdir -p "$out/.hydra"
  # run_id: the id its memories carry, so the sharing matrix can tell its own memories from other runs'.
  for f in metrics.json predictions.jsonl decisions.jsonl retirements.jsonl llm_usage.json run_id; do
    [ -f "$cell/$f" ] && cp "$cell/$f" "$out/"
  done
  cp "$cell"/.hydra/config.yaml "$cell"/.hydra/overrides.yaml "$out/.hydra/"
  # results/ keeps no pool files: the writers table lets the sharing matrices be redrawn from the copy.
  "$python" -m ms.report.export "$cell" "$out/memories.csv" ||
    echo "no memories.csv for $cell: its sharing matrix cannot be redrawn from $dst" >&2
done
"$report" "$dst/runs" --out "$dst" "$@"
if [ -s "$readme" ]; then cp "$readme" "$dst/README.md"; fi
