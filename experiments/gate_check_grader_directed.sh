#!/usr/bin/env bash
# The rubric gate's check with the grader-directed corruptions, today's gate and each scorer.defence,
# graded by SmolLM2-135M (threshold 15) and Qwen2.5-0.5B (threshold 54), on the first 8 seed pairs of
# each agent (the pairs of results/gate_check_gemma3 and results/gate_check_qwen); then each defence
# against today's gate on the same pairs (ms-data gate-compare). Resumable: a finished check is kept.
#   bash experiments/gate_check_grader_directed.sh OUT_DIR
set -euo pipefail
out=${1:?usage: gate_check_grader_directed.sh OUT_DIR}
for grader in "smollm2 15" "qwen2.5-0.5b 54"; do
  read -r backbone threshold <<<"$grader"
  for defence in none strip reject quote; do
    dir="$out/$backbone/$defence"
    [ -f "$dir/gate_check.md" ] && continue
    ms-data gate-check --gate rubric --per-agent 8 --out "$dir" "backbone=$backbone" \
      "scorer.threshold=$threshold" "scorer.defence=$defence"
  done
  for defence in strip reject quote; do
    ms-data gate-compare "$out/$backbone/none" "$out/$backbone/$defence" --threshold "$threshold" \
      > "$out/$backbone/compare_$defence.md"
  done
done
