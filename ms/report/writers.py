"""Who wrote each memory a run retrieved, read from the run's pool file or from `memories.csv`, the
small table experiments/publish.sh exports beside a published run (results/ keeps no pool files)
with `python -m ms.report.export RUN_DIR OUT_CSV`."""

from __future__ import annotations

import csv
import shutil
import sqlite3
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from ms.config.files import POOL_FILENAME, WRITERS_FILE
from ms.errors import UserError

WRITER_COLUMNS = ("id", "agent", "domain", "origin", "backbone")
UNWRITTEN = ("seed", "imported")  # origins no backbone wrote: pairs that came with the data


@dataclass(frozen=True)
class Writer:
    agent: str
    domain: str
    origin: str
    backbone: str  # the backbone that wrote it, or its origin for the data's own pairs


def run_config(run_dir: Path) -> dict:
    """The run's composed config (.hydra/config.yaml); {} for a folder without one."""
    path = run_dir / ".hydra" / "config.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}


def _backbones(config: dict, default: str) -> dict[str, str]:
    """agent -> the backbone it ran on: its own `agents.<name>.backbone`, else the run's."""
    fallback = str((config.get("backbone") or {}).get("name") or default)
    entries = config.get("agents") if isinstance(config.get("agents"), dict) else {}
    return defaultdict(lambda: fallback, {a: str(e["backbone"]) for a, e in entries.items()
                                          if isinstance(e, dict) and e.get("backbone")})


def _backbone(row: dict, backbones: dict[str, str]) -> str:
    # Pools from before memories recorded their backbone hold NULL there (as do seeds in newer
    # ones): a generated memory was then written by its agent's backbone in the run that admitted it.
    if row.get("backbone"):
        return str(row["backbone"])
    return row["origin"] if row["origin"] in UNWRITTEN else backbones[row["agent"]]


def _pool_rows(path: Path) -> list[dict]:
    # Read a copy: opening a WAL-mode file, even read-only, leaves -shm and -wal files beside it, and
    # a run folder is evidence the report must not change. The -wal holds commits not yet in the file.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / POOL_FILENAME
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        try:
            conn = sqlite3.connect(copy)
            try:
                conn.row_factory = sqlite3.Row
                columns = {r["name"] for r in conn.execute("PRAGMA table_info(memories)")}
                if not columns:
                    raise UserError(f"{path} holds no memories table: it is not an ms pool file")
                backbone = "backbone" if "backbone" in columns else "NULL AS backbone"
                return [dict(r) for r in conn.execute(f"SELECT id, agent, domain, origin, {backbone} FROM memories")]
            finally:
                conn.close()
        except sqlite3.DatabaseError as error:
            raise UserError(f"cannot read the pool {path} ({error}): restore it, or remove it to draw no "
                            f"sharing matrix for this run") from error


def _csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in WRITER_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise UserError(f"{path} lacks the column(s) {', '.join(missing)}; a writers table has "
                            f"{', '.join(WRITER_COLUMNS)}")
        rows = list(reader)
    for line, row in enumerate(rows, 2):
        try:
            row["id"] = int(row["id"])
        except ValueError:
            raise UserError(f"{path} line {line}: id {row['id']!r} is not a memory id (an integer)") from None
    return rows


def writers_source(run_dir: Path) -> Optional[Path]:
    """Where the run's memories are recorded: its pool file (in its folder, or `pool.path` when it
    shared one), else the exported memories.csv; None where there is neither."""
    shared = (run_config(run_dir).get("pool") or {}).get("path")
    candidates = [run_dir / POOL_FILENAME, *([Path(shared), run_dir / shared] if shared else []),
                  run_dir / WRITERS_FILE]
    return next((p for p in candidates if p.is_file()), None)


def read_writers(run_dir: Path, run_backbone: str = "") -> Optional[dict[int, Writer]]:
    """memory id -> who wrote it, for every memory the run's pool holds; None where no source exists.
    `run_backbone` stands in where the run's config names none."""
    source = writers_source(run_dir)
    if source is None:
        return None
    rows = _csv_rows(source) if source.name == WRITERS_FILE else _pool_rows(source)
    backbones = _backbones(run_config(run_dir), run_backbone)
    return {int(r["id"]): Writer(r["agent"], r["domain"], r["origin"], _backbone(r, backbones)) for r in rows}


def export_writers(run_dir: Path, out: Path) -> int:
    """Write the run's writers table (WRITER_COLUMNS, backbones resolved) to `out`; returns its rows."""
    writers = read_writers(run_dir)
    if writers is None:
        raise UserError(f"{run_dir} holds no {POOL_FILENAME} (nor names one by pool.path): no writers to export")
    with out.open("w", newline="", encoding="utf-8") as f:
        table = csv.writer(f)
        table.writerow(WRITER_COLUMNS)
        table.writerows((i, w.agent, w.domain, w.origin, w.backbone) for i, w in sorted(writers.items()))
    return len(writers)
