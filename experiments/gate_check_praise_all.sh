#!/usr/bin/env bash
# The conditions for a new default gate, one check per grader: the genre-test defence against every corruption
# kind at once (ordinary, grader-directed, development praise and all five held-out praise families), from one commit.
#
# The defence is the one the fifth check fixed and the sixth read blind (the rubric on the grader with
# scorer.defence=reject, then the genre test scored on Qwen2.5-0.5B, margin 0, read as rubric_genre_ranked).
# The families' writers are the latest reads' (gate_check_praise_copies, _reread, _fifth, _sixth): model_praise
# by Qwen2.5-0.5B, the check's backbone (so backbone=qwen2.5-0.5b: the genre test's scorer either way), and
# cross_praise by the other grader, both under the copy rule (--ask-again-copies); third_praise by Gemma 3,
# fifth_praise by SmolLM2, sixth_praise by Qwen2.5-0.5B. Per grader (SmolLM2 at 15, Qwen2.5-0.5B at 54) one
# gate check, then gate-compare against today's default (the rubric) as it is and ranked.
#
#   bash experiments/gate_check_praise_all.sh OUT_DIR
# Resumable: a step whose gate_check.md exists is skipped.
set -euo pipefail
out=${1:?usage: gate_check_praise_all.sh OUT_DIR}
defence=(backbone=qwen2.5-0.5b scorer.defence=reject gate=rubric_genre gate.test_backbone=qwen2.5-0.5b)
source "$(dirname "$0")/gate_check_steps.sh"
writers=(--third-by gemma3 --fifth-by smollm2 --sixth-by qwen2.5-0.5b)
declare -A other_of=([smollm2]=qwen2.5-0.5b [qwen2.5-0.5b]=smollm2)

mkdir -p "$out"
git log --oneline -1 >"$out/commit.txt"
git status --short >>"$out/commit.txt"
for grader in smollm2 qwen2.5-0.5b; do
  check "$out/$grader" "$grader" --ask-again-copies --praise-by "${other_of[$grader]}" "${writers[@]}"
done
