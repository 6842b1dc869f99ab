"""The held-out praise families of a gate check read one at a time and all together: the pooled AUC of the good
pairs against each family present, and against every present family as one pool, each with its 95% CI over seed
pairs (ms.gates.check_pooled). The gate check reports each family apart (they were written at different times,
after different reads); this prints the reading of the bar as one pool over the held-out set beside it.

    python experiments/held_out_together.py CHECK_DIR [CHECK_DIR ...] [--gate rubric_genre_ranked]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ms.gates.check_pooled import pooled_auc, read_check
from ms.gates.check_praise import HELD_OUT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", type=Path, help="gate-check output folders")
    parser.add_argument("--gate", default="rubric_genre_ranked", help="the reading of the check (read_check's gate)")
    args = parser.parse_args()
    print(f"| check | held-out pool | n good/bad | pooled AUC [95% CI over seed pairs] ({args.gate}) |")
    print("|---|---|---:|---|")
    for folder in args.checks:
        rows = read_check(folder, args.gate)
        present = [k for k in HELD_OUT if any(r.kind == k for r in rows)]
        pools = [(k, (k,)) for k in present] + ([("all of them together", tuple(present))] if len(present) > 1 else [])
        good = sum(r.kind == "good" for r in rows)
        for name, kinds in pools:
            point, lo, hi = pooled_auc(rows, kinds)
            bad = sum(r.kind in kinds for r in rows)
            print(f"| {folder} | {name} | {good}/{bad} | {point:.3f} [{lo:.3f}, {hi:.3f}] |")


if __name__ == "__main__":
    main()
