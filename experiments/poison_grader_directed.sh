#!/usr/bin/env bash
# The poisoning study's grader-directed kinds against riddle in the Single pool (conf/experiment/poison_offline),
# under the rubric gate without a defence (scorer.defence=none, the default before reject) and with reject, each with its own clean cell (poison=none).
# From an empty response cache the clean cell of each gate is made first; the poisoned cells replay what
# they share with it. Resumable: re-run the same command.
#   bash experiments/poison_grader_directed.sh SWEEP_DIR
set -euo pipefail
out=${1:?usage: poison_grader_directed.sh SWEEP_DIR}
kinds=none,self_assessment,answer_plus_assessment,grader_instruction
ms-run -m experiment=poison_offline gate=rubric scorer.defence=none "poison=$kinds" "hydra.sweep.dir=$out/rubric"
ms-run -m experiment=poison_offline gate=rubric scorer.defence=reject "poison=$kinds" "hydra.sweep.dir=$out/reject"
