#!/usr/bin/env bash
# Copy a finished sweep's evidence (each cell's metrics, predictions, decisions, usage and config)
# into results/<sweep>/runs, then draw its report from those copies, so anyone can redraw it:
#   bash experiments/publish.sh table1_offline --metric ref_logprob
set -euo pipefail
sweep=$1; shift
src=multirun/$sweep
dst=results/$sweep
[ -d "$src" ] || { echo "no sweep folder $src: run ms-run -m experiment=$sweep first" >&2; exit 2; }
rm -rf "$dst"
for cell in "$src"/*/; do
  [ -f "$cell/metrics.json" ] || { echo "skipping $cell: no metrics.json (unfinished)" >&2; continue; }
  out="$dst/runs/$(basename "$cell")"
  mkdir -p "$out/.hydra"
  for f in metrics.json predictions.jsonl decisions.jsonl llm_usage.json; do
    [ -f "$cell/$f" ] && cp "$cell/$f" "$out/"
  done
  cp "$cell"/.hydra/config.yaml "$cell"/.hydra/overrides.yaml "$out/.hydra/"
done
"${MS_REPORT:-ms-report}" "$dst/runs" --out "$dst" "$@"
