"""Who wrote each memory a run retrieved, and in which run: read from the run's pool file, from
`memories.csv`, the small table experiments/publish.sh exports beside a published run (results/ keeps
no pool files) with `python -m ms.report.export RUN_DIR OUT_CSV`, or from the PostgreSQL server of a
run with pool/backend=postgres (ms.report.common.pool_server). Memories that left the pool file after the run
(`ms-data forget`) are read from the run's own files and marked (ms.report.common.forgotten); a poisoning
writer's memories are labelled as its, not as a backbone's."""

import csv
import json
import logging
import shutil
import sqlite3
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from ms.common.errors import UserError
from ms.config.files import DECISIONS_FILE, METRICS_FILE, POOL_FILENAME, RUN_ID_FILE, WRITERS_FILE
from ms.config.parts import POISONS, POOL_BACKENDS
from ms.loop.run_record import RunRecord
from ms.report.common.forgotten import gone_rows, removal_reasons
from ms.report.common.labels import on_server, option, unrecorded
from ms.report.common.pool_server import server_rows
from ms.report.common.runs import read_jsonl
from ms.report.common.saved_config import SavedConfig

log = logging.getLogger(__name__)

WRITER_COLUMNS = ("id", "agent", "domain", "origin", "backbone")
# Which run admitted each memory: its id, and its folder's name. Optional on reading, as tables
# exported before they were added lack them.
RUN_COLUMNS = ("run_id", "run")
# Why a memory is no longer in the pool (ms.report.common.forgotten); exported only where some memory has left it.
FORGOTTEN_COLUMN = "forgotten"
UNWRITTEN = ("seed", "imported")  # origins no backbone wrote: pairs that came with the data
# What stands for the backbone of a poisoning writer's memories (ms.data.poison): it calls no model, so
# no backbone wrote them, and the run's backbone must not be credited with them.
POISONER = "poisoner"


@dataclass(frozen=True)
class Writer:
    agent: str
    domain: str
    origin: str
    backbone: str  # the backbone that wrote it, or its origin for the data's own pairs
    run_id: Optional[str] = None  # the run that admitted it; None where not recorded
    run: Optional[str] = None  # that run's folder name, where the pool's runs table has it
    forgotten: Optional[str] = None  # why it is no longer in the pool (ms-data forget); None: it is there

    @property
    def poisoner(self) -> bool:
        """Whether a poisoning writer wrote it (read_writers labels its backbone POISONER)."""
        return self.backbone == POISONER


def decisions_of(run_dir: Path) -> list[dict]:
    """The gate's decisions the run recorded (decisions.jsonl); [] for a folder without them."""
    path = run_dir / DECISIONS_FILE
    return read_jsonl(path) if path.is_file() else []


def own_run_id(run_dir: Path) -> Optional[str]:
    """The id the run's memories carry in the pool (the run folder's run_id file); None without one."""
    path = run_dir / RUN_ID_FILE
    return (path.read_text(encoding="utf-8").strip() or None) if path.is_file() else None


def poison_writer(run_dir: Path) -> Optional[str]:
    """The name a poisoning writer's memories are stored under (`poison.writer`), as the run's metrics.json
    records it (else its config); None for a run without a poisoner."""
    path = run_dir / METRICS_FILE
    try:
        recorded = RunRecord.from_metrics(json.loads(path.read_text(encoding="utf-8")), path).poison
    except (OSError, ValueError, AttributeError, KeyError, TypeError, UserError):
        recorded = None
    if recorded is not None and recorded.writer:
        return str(recorded.writer)
    configured = SavedConfig.of(run_dir).poison
    if configured is not None and configured.name not in (None, unrecorded(POISONS)):
        return configured.writer or "poison"
    return None


def _backbone(row: dict, backbones: dict[str, str], poisoner: Optional[str]) -> str:
    # The poisoner's pairs come from the data, not a model; the pool stores no backbone for them, and
    # tables exported before this label existed credited them to the run's backbone.
    if poisoner is not None and row["agent"] == poisoner and row["origin"] not in UNWRITTEN:
        return POISONER
    # Pools from before memories recorded their backbone hold NULL there (as do seeds in newer
    # ones): a generated memory was then written by its agent's backbone in the run that admitted it.
    if row.get("backbone"):
        return str(row["backbone"])
    return row["origin"] if row["origin"] in UNWRITTEN else backbones[row["agent"]]


@contextmanager
def pool_copy(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection (rows as sqlite3.Row) to a copy of the pool file: opening a WAL-mode file, even
    read-only, leaves -shm and -wal files beside it, and a run folder is evidence the report must not
    change. The -wal holds commits not yet in the file, so it is copied too."""
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
                if not conn.execute("PRAGMA table_info(memories)").fetchall():
                    raise UserError(f"{path} holds no memories table: it is not an ms pool file")
                yield conn
            finally:
                conn.close()
        except sqlite3.DatabaseError as error:
            raise UserError(
                f"cannot read the pool {path} ({error}): restore it, or remove it to draw no "
                f"sharing matrix for this run"
            ) from error


def _pool_rows(path: Path) -> tuple[list[dict], dict[int, str]]:
    """The pool file's memories, and why each memory a removal took out of it went (removal_reasons)."""
    with pool_copy(path) as conn:
        columns = {r["name"] for r in conn.execute("PRAGMA table_info(memories)")}
        backbone = "m.backbone" if "backbone" in columns else "NULL AS backbone"
        # Pools of schema 1 recorded no runs (neither the column nor the runs table).
        runs = (
            "m.run_id, r.label AS run FROM memories m LEFT JOIN runs r ON r.run_id = m.run_id"
            if "run_id" in columns
            else "NULL AS run_id, NULL AS run FROM memories m"
        )
        rows = [dict(r) for r in conn.execute(f"SELECT m.id, m.agent, m.domain, m.origin, {backbone}, {runs}")]
        return rows, removal_reasons(conn)


def _with_gone(run_dir: Path, saved: SavedConfig, rows: list[dict], removed: dict[int, str]) -> list[dict]:
    """The pool file's rows and those of the memories that left it since the run (ms.report.common.forgotten)."""
    recorded, table = run_dir / WRITERS_FILE, []
    if recorded.is_file():
        try:
            table = _csv_rows(recorded)
        except UserError as error:  # the pool file is the record here: a bad copy beside it only costs the gone ones
            log.warning("%s; memories no longer in the pool are described without it", error)
    return rows + gone_rows(
        {int(r["id"]) for r in rows},
        table,
        decisions_of(run_dir),
        removed,
        saved.agent_domains().get,
        own_run_id(run_dir),
    )


def _csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in WRITER_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise UserError(
                f"{path} lacks the column(s) {', '.join(missing)}; a writers table has {', '.join(WRITER_COLUMNS)}"
            )
        rows = list(reader)
    for line, row in enumerate(rows, 2):
        try:
            row["id"] = int(row["id"])
        except ValueError:
            raise UserError(f"{path} line {line}: id {row['id']!r} is not a memory id (an integer)") from None
    return rows


def writers_source(run_dir: Path) -> Optional[Path]:
    """Where the run's memories are recorded in files: its pool file (in its folder, or `pool.path`
    when it shared one), else the exported memories.csv; None where there is neither."""
    shared = SavedConfig.of(run_dir).pool.path
    candidates = [
        run_dir / POOL_FILENAME,
        *([Path(shared), run_dir / shared] if shared else []),
        run_dir / WRITERS_FILE,
    ]
    return next((p for p in candidates if p.is_file()), None)


def read_writers(run_dir: Path, run_backbone: str = "") -> Optional[dict[int, Writer]]:
    """memory id -> who wrote it, for every memory the run's pool holds and every one its files record
    that has left the pool since (Writer.forgotten says why); None where no source exists.
    `run_backbone` stands in where the run's config names none."""
    saved = SavedConfig.of(run_dir)
    source = writers_source(run_dir)
    if source is not None and source.name == WRITERS_FILE:
        rows = _csv_rows(source)
    elif source is not None:
        rows = _with_gone(run_dir, saved, *_pool_rows(source))
    elif on_server(option(POOL_BACKENDS, saved)):  # a published memories.csv comes first
        rows = server_rows(run_dir, saved)
    else:
        return None
    return writers_of(rows, run_dir, saved, run_backbone)


def writers_of(rows: list[dict], run_dir: Path, saved: SavedConfig, run_backbone: str) -> dict[int, Writer]:
    """memory id -> who wrote it, from writers rows (as the pool's: id, agent, domain, origin, and where
    known backbone, run_id, run, forgotten), each backbone resolved as the run's files say."""
    backbones = saved.agent_backbones(run_backbone)
    poisoner = poison_writer(run_dir)
    # The runs table records each run's folder as a path; its name is what ms-report calls the run.
    return {
        int(r["id"]): Writer(
            r["agent"],
            r["domain"],
            r["origin"],
            _backbone(r, backbones, poisoner),
            r.get("run_id") or None,
            Path(r["run"]).name if r.get("run") else None,
            r.get(FORGOTTEN_COLUMN) or None,
        )
        for r in rows
    }


def stream_written(run_dir: Path, run_backbone: str = "") -> Optional[tuple[set[int], str]]:
    """The ids of the memories the stream wrote, i.e. every memory but the data's own pairs (UNWRITTEN), and
    where that was read: the writers, else decisions.jsonl's memory_id of each admitted pair (runs that kept
    neither a pool file nor memories.csv; there every other id is a seed). None where there is neither."""
    writers = read_writers(run_dir, run_backbone)
    if writers is not None:
        source = writers_source(run_dir)
        return (
            {i for i, w in writers.items() if w.origin not in UNWRITTEN},
            source.name if source else "the PostgreSQL pool",
        )
    path = run_dir / DECISIONS_FILE
    if not path.is_file():
        return None
    return {int(d["memory_id"]) for d in read_jsonl(path) if d.get("memory_id") is not None}, DECISIONS_FILE


def export_writers(run_dir: Path, out: Path) -> int:
    """Write the run's writers table (WRITER_COLUMNS, backbones resolved) to `out`; returns its rows."""
    writers = read_writers(run_dir)
    if writers is None:
        raise UserError(
            f"{run_dir} holds no {POOL_FILENAME} (nor names one by pool.path, nor kept its pool on "
            f"PostgreSQL): no writers to export"
        )
    # Memories that left the pool after the run keep their row, with why, so that a published copy still
    # says who wrote what the run retrieved (the column only where some memory left).
    gone = any(w.forgotten for w in writers.values())
    with out.open("w", newline="", encoding="utf-8") as f:
        table = csv.writer(f)
        table.writerow(WRITER_COLUMNS + RUN_COLUMNS + ((FORGOTTEN_COLUMN,) if gone else ()))
        table.writerows(
            (
                i,
                *(getattr(w, column) for column in WRITER_COLUMNS[1:]),  # agent, domain, origin, backbone
                w.run_id or "",
                w.run or "",
                *((w.forgotten or "",) if gone else ()),
            )
            for i, w in sorted(writers.items())
        )
    return len(writers)
