"""Export who wrote each memory of a run's pool, the table a published run keeps instead of its pool:

    python -m ms.report.export RUN_DIR OUT_CSV

(A module of its own: the ms.report package imports ms.report.common.writers, which `python -m` would then
run a second time.)"""

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from ms.common.errors import report_user_errors
from ms.report.common.writers import WRITERS_FILE, export_writers


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ms.report.export", description=f"Write who wrote each memory of a run's pool ({WRITERS_FILE})."
    )
    parser.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="a run folder (its pool.sqlite, or pool.path; pool/backend=postgres: MS_POOL_DSN's database)",
    )
    parser.add_argument("out", type=Path, metavar="OUT_CSV")
    args = parser.parse_args(argv)

    def export() -> int:
        export_writers(args.run_dir, args.out)
        return 0

    return report_user_errors("ms.report.export", export)


if __name__ == "__main__":
    sys.exit(main())
