#!/usr/bin/env bash
# The genre-test defence judged blind on a seventh held-out praise family.
#
# The defence (the rubric on the grader with scorer.defence=reject, then the genre test scored on Qwen2.5-0.5B,
# margin 0, read as rubric_genre_ranked) is unchanged since the fifth check. Read on every family at once, one
# check per grader, it misses the bar on model_praise alone. seventh_praise is new wordings, made after all of
# that was read and before any check reads them: the defence's third blind family.
#
#   1. seventh_praise written by Qwen2.5-0.5B (--seventh-by qwen2.5-0.5b), the writer whose praise the defence
#      missed, read once by each grader: SmolLM2 at 15 and Qwen2.5-0.5B at 54;
#   2. the same wordings written by Gemma 3 270M (--seventh-by gemma3), a base model, read as in step 1.
# Each grader's check is compared with today's default (the rubric) by gate-compare.
#
#   bash experiments/gate_check_praise_seventh.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_seventh.sh OUT_DIR}
defence=(scorer.defence=reject gate=rubric_genre gate.test_backbone=qwen2.5-0.5b)
source "$(dirname "$0")/gate_check_steps.sh"

blind_read --seventh-by seventh_praise seventh
