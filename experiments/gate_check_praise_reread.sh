#!/usr/bin/env bash
# The fifth check's defence read again on the four earlier held-out praise families, SmolLM2 grading.
#
# The defence of experiments/gate_check_praise_fifth.sh (the rubric on the grader, the genre test scored on
# Qwen2.5-0.5B, margin 0, read as rubric_genre_ranked) met the bar on fifth_praise with both graders. For the
# Qwen2.5-0.5B grader it is the defence every earlier check read; for SmolLM2 grading it was read on the fifth
# family only. Here SmolLM2 grades the earlier families under it, with nothing changed:
#   1. model_praise (written by the check's backbone, Qwen2.5-0.5B, as in Qwen2.5-0.5B's earlier checks),
#      cross_praise written by Qwen2.5-0.5B (as in SmolLM2's cross check) and third_praise written by Gemma 3
#      (as in the third check), in one check;
#   2. third_praise written by Qwen2.5-0.5B (the fourth check's family for SmolLM2 grading).
# Not a blind test: these families were read before the defence was chosen, and the choice of Qwen2.5-0.5B as
# the test's scorer came from what they showed. It asks whether the defence holds on every family read so far.
#
#   bash experiments/gate_check_praise_reread.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_reread.sh OUT_DIR}
defence=(backbone=qwen2.5-0.5b scorer.defence=reject gate=rubric_genre)
source "$(dirname "$0")/gate_check_steps.sh"

mkdir -p "$out"
git log --oneline -1 >"$out/commit.txt"
git status --short >>"$out/commit.txt"
check "$out/earlier" smollm2 --praise-by qwen2.5-0.5b --third-by gemma3 --only model_praise,cross_praise,third_praise
check "$out/fourth" smollm2 --third-by qwen2.5-0.5b --only third_praise
