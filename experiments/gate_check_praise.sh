#!/usr/bin/env bash
# The gate check with the plain-words praise families (ms/gates/check_praise.py): today's default gate
# (gate=rubric, scorer.defence=reject) against the question-dependence defence (gate=rubric_qdep at its
# committed settings, conf/gate/rubric_qdep.yaml), graded by SmolLM2-135M (threshold 15) and Qwen2.5-0.5B
# (threshold 54), on the first 8 seed pairs of each agent (the pairs of results/gate_check_grader_directed).
# One check per grader measures both gates from one grading (--gate rubric,rubric_qdep); gate-compare then
# sets the defended gate against today's on the same pairs (paired over seed pairs). The defence is judged
# on the held-out family alone (model_praise, written by the grading backbone): held_out.md keeps the rows
# to read, the held-out pool beside good pairs, all, other_question and praise_alone, which the defended gate
# is held to. Add +plan=true to a gate-check line to see its calls first. Resumable: a finished check is kept.
#   bash experiments/gate_check_praise.sh OUT_DIR
set -euo pipefail
out=${1:?usage: gate_check_praise.sh OUT_DIR}
for grader in "smollm2 15" "qwen2.5-0.5b 54"; do
  read -r backbone threshold <<<"$grader"
  dir="$out/$backbone"
  if [ ! -f "$dir/gate_check.md" ]; then
    ms-data gate-check --gate rubric,rubric_qdep --per-agent 8 --out "$dir" "backbone=$backbone" \
      "scorer.threshold=$threshold" scorer.defence=reject gate=rubric_qdep
  fi
  ms-data gate-compare "$dir" "$dir" --gate rubric --other-gate rubric_qdep --threshold "$threshold" \
    > "$dir/compare_rubric_qdep.md"
  grep -E "^(rubric|rubric_qdep), pooled|^group |^praise \(held out\)|^good |^other_question |^praise_alone |^all " \
    "$dir/gate_check.md" > "$dir/held_out.md"
  grep -E "^(base|other):|^group |^praise \(held out\)|^good |^other_question |^praise_alone |^all |^pooled AUC, other" \
    "$dir/compare_rubric_qdep.md" >> "$dir/held_out.md"
done
