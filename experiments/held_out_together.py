"""The held-out praise families of a gate check read one at a time and all together: the pooled AUC of the good
pairs against each family present, and against every present family as one pool, each with its 95% CI over seed
pairs (ms.gates.check_pooled). The gate check reports each family apart (they were written at different times,
after different reads); this prints the reading of the bar as one pool over the held-out set beside it.

    python experiments/held_out_together.py CHECK_DIR [CHECK_DIR ...] [--gate rubric_genre_ranked]
    python experiments/held_out_together.py --across CHECK_DIR CHECK_DIR ... [--gate ...]

--across pools the held-out families of several checks of one grader (a family written by two writers counts
once per check), against the good pairs, which must be the same rows in every check: the same grader judged the
same seed pairs. The gate's score is then read from the checks' rows together, so a ranked reading orders them all
at once.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ms.common.errors import UserError
from ms.data.load import write_jsonl
from ms.gates.check_corruptions import GOOD
from ms.gates.check_pooled import Scored, pooled_auc, read_check
from ms.gates.check_praise import HELD_OUT
from ms.gates.check_report import DECISIONS
from ms.report.common.runs import numbered_jsonl


def rows_across(folders: list[Path]) -> list[dict]:
    """The good rows of the first check and the held-out rows of every check, each held-out kind renamed
    "kind (folder)". Stops with the folder named where a check's good rows differ from the first's."""
    first_good, merged = None, []
    for folder in folders:
        try:
            rows = [row for _, row in numbered_jsonl(folder / DECISIONS, strict=True)]
        except OSError as err:
            sys.exit(f"{folder / DECISIONS}: {err.strerror or err}; name a gate-check output folder")
        except UserError as err:
            sys.exit(str(err))
        good = [r for r in rows if r["kind"] == GOOD]
        if first_good is None:
            first_good = good
            merged += good
        elif good != first_good:
            sys.exit(f"{folder}: its good rows differ from {folders[0]}'s: not the same grader and seed pairs")
        merged += [{**r, "kind": f"{r['kind']} ({folder})"} for r in rows if r["kind"] in HELD_OUT]
    return merged


def scored_across(folders: list[Path], gate: str) -> list[Scored]:
    """rows_across's rows scored under `gate` as one check, so that a ranked reading orders them all at once."""
    with tempfile.TemporaryDirectory() as tmp:
        write_jsonl(Path(tmp, DECISIONS), rows_across(folders))
        return read_check(Path(tmp), gate)


def print_pools(label: str, rows: list[Scored], present: list[str]) -> None:
    pools = [(k, (k,)) for k in present] + ([("all of them together", tuple(present))] if len(present) > 1 else [])
    good = sum(r.kind == GOOD for r in rows)
    for name, kinds in pools:
        point, lo, hi = pooled_auc(rows, kinds)
        bad = sum(r.kind in kinds for r in rows)
        print(f"| {label} | {name} | {good}/{bad} | {point:.3f} [{lo:.3f}, {hi:.3f}] |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", type=Path, help="gate-check output folders")
    parser.add_argument("--gate", default="rubric_genre_ranked", help="the reading of the check (read_check's gate)")
    parser.add_argument("--across", action="store_true", help="pool the held-out families of all the checks named")
    args = parser.parse_args()
    print(f"| check | held-out pool | n good/bad | pooled AUC [95% CI over seed pairs] ({args.gate}) |")
    print("|---|---|---:|---|")
    if args.across:
        rows = scored_across(args.checks, args.gate)
        print_pools("the checks together", rows, list(dict.fromkeys(r.kind for r in rows if r.kind != GOOD)))
        return
    for folder in args.checks:
        rows = read_check(folder, args.gate)
        print_pools(str(folder), rows, [k for k in HELD_OUT if any(r.kind == k for r in rows)])


if __name__ == "__main__":
    main()
