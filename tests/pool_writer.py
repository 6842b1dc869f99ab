"""A run's writes to its pool, without models: `python tests/pool_writer.py BACKEND TARGET RUN_DIR
BATCHES SIZE` opens the run's pool as ms-run does (ms.loop.run_folder.open_run_pool: a redo first removes
what an interrupted attempt admitted), adds BATCHES batches of SIZE memories, one transaction each,
and prints `batch N` after each commit. A user error is one line on stderr and exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import OmegaConf
from pool_backends import Where

from ms.common.errors import USER_ERROR_EXIT, report_user_errors
from ms.loop.run_folder import open_run_pool


def write(where: Where, run_dir: Path, batches: int, size: int) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)  # as Hydra makes it before the run starts
    with open_run_pool(OmegaConf.create(where.pool_config()), run_dir) as pool:
        for batch in range(batches):
            pool.add(
                [
                    {
                        "scope": "logic",
                        "agent": "pun",
                        "domain": "logic",
                        "question": f"batch {batch} question {i}",
                        "answer": f"answer {i}",
                        "origin": "stream",
                    }
                    for i in range(size)
                ],
                step=batch,
            )
            print(f"batch {batch}", flush=True)
    return 0


if __name__ == "__main__":
    backend, target, run_dir, batches, size = sys.argv[1:]
    code = report_user_errors(
        "pool-writer", lambda: write(Where(backend, target), Path(run_dir), int(batches), int(size))
    )
    sys.exit(USER_ERROR_EXIT if code == USER_ERROR_EXIT else code)
