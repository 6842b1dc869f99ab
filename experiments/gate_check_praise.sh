#!/usr/bin/env bash
# The gate check with the plain-words praise families (ms/gates/check_praise.py): today's default gate
# (gate=rubric, scorer.defence=reject) against a word-free defence at its committed settings (DEFENCE:
# rubric_qdep, conf/gate/rubric_qdep.yaml, by default; or both or rubric_genre), graded by SmolLM2-135M
# (threshold 15) and Qwen2.5-0.5B (threshold 54), or by the graders named after DEFENCE, on the first 8 seed
# pairs of each agent (the pairs of results/gate_check_grader_directed).
# One check per grader measures both gates from one grading (--gate rubric,DEFENCE); gate-compare then sets
# the defended gate against today's on the same pairs (paired over seed pairs). The defence is judged on the
# held-out families alone (model_praise, written by the grading backbone, and cross_praise, written by the
# other grader's family in wordings of its own: --praise-by): held_out.md keeps the rows to read, the held-out
# pools beside good pairs, all, other_question and praise_alone, which the defended gate is held to. For rubric_genre, its admissions ranked by the test's measure (rubric_genre_ranked) are compared too.
# With THIRD_BY=BACKBONE set, that backbone writes a third held-out family too (third_praise: --third-by).
# Add +plan=true to a gate-check line to see its calls first. Resumable: a finished check is kept.
#   [THIRD_BY=gemma3] bash experiments/gate_check_praise.sh OUT_DIR [DEFENCE [GRADER...]]
set -euo pipefail
out=${1:?usage: gate_check_praise.sh OUT_DIR [DEFENCE [GRADER...]]}
defence=${2:-rubric_qdep}
graders=("${@:3}")
[ ${#graders[@]} -gt 0 ] || graders=(smollm2 qwen2.5-0.5b)
declare -A threshold_of=([smollm2]=15 [qwen2.5-0.5b]=54)
declare -A other_of=([smollm2]=qwen2.5-0.5b [qwen2.5-0.5b]=smollm2)
third=(); [ -z "${THIRD_BY:-}" ] || third=(--third-by "$THIRD_BY")
for backbone in "${graders[@]}"; do
  threshold=${threshold_of[$backbone]:?no threshold for grader $backbone (smollm2 or qwen2.5-0.5b)}
  dir="$out/$backbone"
  if [ ! -f "$dir/gate_check.md" ]; then
    ms-data gate-check --gate "rubric,$defence" --per-agent 8 --praise-by "${other_of[$backbone]}" "${third[@]}" --out "$dir" "backbone=$backbone" \
      "scorer.threshold=$threshold" scorer.defence=reject "gate=$defence"
  fi
  ms-data gate-compare "$dir" "$dir" --gate rubric --other-gate "$defence" --threshold "$threshold" \
    > "$dir/compare_$defence.md"
  grep -E "^(rubric|$defence), pooled|^group |^praise \(held out|^good |^other_question |^praise_alone |^all " \
    "$dir/gate_check.md" > "$dir/held_out.md"
  grep -E "^(base|other):|^group |^praise \(held out|^good |^other_question |^praise_alone |^all |^pooled AUC, other" \
    "$dir/compare_$defence.md" >> "$dir/held_out.md"
  if [ "$defence" = rubric_genre ]; then  # and its admissions ranked by the test (ms/gates/check_pooled.py, RANKED)
    ms-data gate-compare "$dir" "$dir" --gate rubric --other-gate rubric_genre_ranked --threshold "$threshold" \
      > "$dir/compare_rubric_genre_ranked.md"
    grep -E "^(base|other):|^group |^praise \(held out|^good |^other_question |^praise_alone |^all |^pooled AUC, other" \
      "$dir/compare_rubric_genre_ranked.md" >> "$dir/held_out.md"
  fi
done
