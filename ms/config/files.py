"""The names of the files a run folder holds, in one place: the run writes them, ms-report, the
export and the redo logic read them, and each imports the name from here."""

import os
from pathlib import Path
from typing import Optional

METRICS_FILE = "metrics.json"  # the run's summary; "complete": true once it finished
PREDICTIONS_FILE = "predictions.jsonl"  # one row per test question per fill
DECISIONS_FILE = "decisions.jsonl"  # one row per gated stream pair
RETIREMENTS_FILE = "retirements.jsonl"  # one row per memory retired (memory.retire_below), at its step
QUALITY_FILE = "quality.jsonl"  # ms-data gate-quality: each decision's answer scored against its reference
USAGE_FILE = "llm_usage.json"  # LLM calls, tokens and cost per backbone and role
FAILED_FILE = "failed.json"  # why an attempt that had begun stopped; removed when the run is resumed
RUN_ID_FILE = "run_id"  # the run's stable id, which its memories in the pool carry
POOL_FILENAME = "pool.sqlite"  # the run's own pool, unless pool.path names a shared one
WRITERS_FILE = "memories.csv"  # who wrote each memory, exported so results/ can be redrawn without pools


# ---- checks of a file before it is opened (the pool's and the response cache's SQLite files) -------------

SQLITE_HEADER = b"SQLite format 3\x00"


def writable_folder(path: Path) -> Optional[str]:
    """Why files cannot be created in folder `path` (created on first use), or None if they can."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"the folder {existing} is not writable"
    return None


def not_sqlite(path: Path) -> bool:
    """Whether an existing, non-empty file lacks SQLite's header: the damage seen most, checked
    without opening the file as a database (deeper damage is caught when it is opened)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:  # missing (created on first use) or unreadable (reported when opened)
        return False
    return bool(head) and head != SQLITE_HEADER
