#!/usr/bin/env bash
# The fifth check's defence judged blind on a sixth held-out praise family.
#
# The defence (the rubric on the grader with scorer.defence=reject, then the genre test scored on Qwen2.5-0.5B,
# margin 0, read as rubric_genre_ranked) met the bar on fifth_praise with both graders, and read afterwards on
# the four earlier families it missed on model_praise, Qwen2.5-0.5B's praise in the first wordings. sixth_praise
# is new wordings, made after all of that was read and before any check reads them, so this is the defence's
# second blind read. The defence is one setting now (gate.test_backbone), with the agents on the default backbone.
#
#   1. sixth_praise written by Qwen2.5-0.5B (--sixth-by qwen2.5-0.5b), the writer whose praise the defence missed,
#      read once by each grader: SmolLM2 at 15 and Qwen2.5-0.5B at 54;
#   2. the same wordings written by Gemma 3 270M (--sixth-by gemma3), a base model, read as in step 1.
# Each grader's check is compared with today's default (the rubric) by gate-compare.
#
#   bash experiments/gate_check_praise_sixth.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_sixth.sh OUT_DIR}
defence=(scorer.defence=reject gate=rubric_genre gate.test_backbone=qwen2.5-0.5b)
source "$(dirname "$0")/gate_check_steps.sh"

blind_read --sixth-by sixth_praise sixth
