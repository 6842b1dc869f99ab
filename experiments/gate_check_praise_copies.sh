#!/usr/bin/env bash
# The earlier model-written praise families remade under the copy rule, read under the fifth check's defence.
#
# model_praise and cross_praise were made before the copy rule (ms/gates/check_praise.py): a writer that gives
# the answer back, or retells it, made a "praise" pair that is an answer, and a gate is right to admit it. Under
# the fifth check's defence (the rubric on the grader, the genre test on Qwen2.5-0.5B, margin 0, read as
# rubric_genre_ranked) model_praise missed the bar with both graders, and many of the pairs it admitted were
# such copies. Decided after that was seen, with the rule itself unchanged (fixed before third_praise was
# made): both families are remade under it (--ask-again-copies) and read again, each grader with the writers of
# its earlier checks. Then the defence as one setting, gate.test_backbone=qwen2.5-0.5b with the agents on the
# default backbone, on fifth_praise written by SmolLM2: it must give the fifth check's SmolLM2 numbers again.
#
#   bash experiments/gate_check_praise_copies.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_copies.sh OUT_DIR}
declare -A other_of=([smollm2]=qwen2.5-0.5b [qwen2.5-0.5b]=smollm2)
defence=(scorer.defence=reject gate=rubric_genre)
source "$(dirname "$0")/gate_check_steps.sh"

mkdir -p "$out"
git log --oneline -1 >"$out/commit.txt"
git status --short >>"$out/commit.txt"
for grader in smollm2 qwen2.5-0.5b; do
  check "$out/copies/$grader" "$grader" --ask-again-copies --praise-by "${other_of[$grader]}" \
    --only model_praise,cross_praise backbone=qwen2.5-0.5b
done
check "$out/setting/smollm2" smollm2 --fifth-by smollm2 --only fifth_praise gate.test_backbone=qwen2.5-0.5b
