#!/usr/bin/env bash
# The genre test scored on Qwen2.5-0.5B whatever the grader, judged on a fifth held-out praise family.
#
# Over four held-out families the genre test, scored on the grader's own backbone, ranked praise below good
# answers with AUC 0.79-0.85 under SmolLM2 and 0.79-0.92 under Qwen2.5-0.5B: the weak link is SmolLM2 as the
# test's scorer. This defence, fixed here before the fifth family is read, keeps the rubric on the grader and
# scores the genre test on Qwen2.5-0.5B (the test runs on the agents' backbone, so backbone=qwen2.5-0.5b with
# grader=G), margin 0, read as rubric_genre_ranked. The same settings as every earlier genre check otherwise.
#
#   1. fifth_praise, written by SmolLM2 (--fifth-by smollm2), read once by each grader: SmolLM2 at 15 with the
#      test on Qwen2.5-0.5B, and Qwen2.5-0.5B at 54 (its test on itself, as before);
#   2. development and ordinary corruptions (every kind but the held-out ones), SmolLM2 grading with the test
#      on Qwen2.5-0.5B: the issue's other conditions (ordinary corruptions, good pairs admitted, praise alone).
#   3. fifth_praise written by Qwen2.5-0.5B (--fifth-by qwen2.5-0.5b), read once by each grader as in step 1.
#      Added after step 1 was read, for what it showed: SmolLM2-135M wrote little that reads as praise (garbled
#      or off-task text, as Gemma 3 270M did for third_praise), so step 1 tested the defence on little praise.
#      The defence's settings are unchanged; only the writer differs.
# The order is the order of the answers wanted first; nothing of step 2 is read to set anything of step 1.
# Each grader's held-out check is compared with today's default (the rubric) by gate-compare.
#
#   bash experiments/gate_check_praise_fifth.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_fifth.sh OUT_DIR}
kinds=swapped,other_question,truncated,empty,self_assessment,answer_plus_assessment,grader_instruction
kinds+=,praise_alone,line_plus_praise
defence=(backbone=qwen2.5-0.5b scorer.defence=reject gate=rubric_genre)
source "$(dirname "$0")/gate_check_steps.sh"

mkdir -p "$out"
git log --oneline -1 >"$out/commit.txt"
git status --short >>"$out/commit.txt"
for grader in smollm2 qwen2.5-0.5b; do
  check "$out/fifth/$grader" "$grader" --fifth-by smollm2 --only fifth_praise
done
check "$out/development/smollm2" smollm2 --only "$kinds"
for grader in smollm2 qwen2.5-0.5b; do
  check "$out/fifth_by_qwen/$grader" "$grader" --fifth-by qwen2.5-0.5b --only fifth_praise
done
