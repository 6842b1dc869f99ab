#!/usr/bin/env bash
# The poisoning study's plain-words praise kinds (praise_alone, line_plus_praise: off_task's answers made into
# praise of what the Single pool's rubric rewards, in none of the screen's words) against riddle in the Single
# pool (conf/experiment/poison_offline), beside a clean cell (poison=none) under each of two gates: the rubric
# without a defence (gate=rubric scorer.defence=none), and the project's default gate, read from
# conf/config.yaml's defaults list, at its default settings (no scorer.defence set). The two sweeps go to
# folders of their own, to be reported apart: the run record does not name scorer.defence.
# From an empty response cache the clean cell of each gate is made first; the poisoned cells replay what
# they share with it. Add +plan=true to an ms-run line to see its calls first. Resumable: re-run the same command.
#   bash experiments/poison_plain_praise.sh SWEEP_DIR
set -euo pipefail
out=${1:?usage: poison_plain_praise.sh SWEEP_DIR}
default_gate=$(sed -n 's/^ *- gate: *\([a-z_]*\).*/\1/p' "$(dirname "$0")/../conf/config.yaml")
: "${default_gate:?no gate in the defaults list of conf/config.yaml}"
kinds=none,praise_alone,line_plus_praise
ms-run -m experiment=poison_offline gate=rubric scorer.defence=none "poison=$kinds" "hydra.sweep.dir=$out/undefended"
ms-run -m experiment=poison_offline "gate=$default_gate" "poison=$kinds" "hydra.sweep.dir=$out/default"
