"""Every memory a run's questions could have retrieved, with its text where one can be had.

From the run's pool file where it kept one. Published copies (results/*/runs/) keep none, so there
the texts are rebuilt without a model: the seed pairs by seeding a scratch pool from the run's data
and config exactly as the run seeded its own (checked against the data fingerprint metrics.json
recorded, and against memories.csv's ids where it exists), the stream's pairs from decisions.jsonl
(each admitted pair's `memory_id`). Memories that left the pool file after the run (`ms-data forget`)
are described the same way, from memories.csv and decisions.jsonl, and marked with why they left. What
cannot be rebuilt (another run's memories in a shared pool, a memory policy's summaries, a data folder
that is gone) is said, memory by memory."""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ms.agents import seed_memories
from ms.common.errors import UserError
from ms.config.files import DECISIONS_FILE, POOL_FILENAME
from ms.config.schema import DataConfig
from ms.data import load_splits
from ms.loop.cell import data_fingerprint
from ms.pool import Pool
from ms.report.common.render import id_span
from ms.report.common.runs import Run
from ms.report.common.saved_config import SavedConfig
from ms.report.common.writers import (
    Writer,
    decisions_of,
    pool_copy,
    read_writers,
    writers_of,
    writers_source,
)

REPO = Path(__file__).resolve().parents[3]  # a relative data.dir is the repository's (runs start there)


@dataclass
class Memories:
    """memory id -> its record (JSON-ready), where the texts came from, and why some are missing."""

    records: dict[int, dict]
    source: str
    missing: list[str] = field(default_factory=list)
    writers: dict[int, Writer] = field(default_factory=dict)  # for the sharing matrix


def _data_dir(data: dict) -> Optional[Path]:
    """The run's data folder: as recorded, else (relative) under the current folder, else the repository."""
    recorded = Path(str(data.get("dir") or "data"))
    for candidate in [recorded] if recorded.is_absolute() else [Path.cwd() / recorded, REPO / recorded]:
        if candidate.is_dir():
            return candidate
    return None


def rebuild_seeds(run: Run) -> tuple[dict[int, dict], Optional[str]]:
    """The seed pairs the run's pool began with, by id, and None; or {} and why they cannot be rebuilt."""
    saved = SavedConfig.of(run.path)
    data = saved.data
    if data is None:
        return {}, "the run's .hydra/config.yaml names no data"
    if data.get("hf"):
        return {}, f"its data came from a dataset ({data['hf'].get('name')}), which is not read here"
    folder = _data_dir(data)
    if folder is None:
        hint = f" (made by: {data['created_by']})" if data.get("created_by") else ""
        return {}, f"its data folder {data.get('dir')} is not on this machine{hint}"
    known = set(DataConfig.__dataclass_fields__) - {"created_by"}  # only a hint, and it may interpolate ${data.dir}
    try:
        cfg = OmegaConf.merge(
            OmegaConf.structured(DataConfig), {**{k: v for k, v in data.items() if k in known}, "dir": str(folder)}
        )
        agents = saved.run_agents()
        splits = load_splits(cfg, agents)
    except (OSError, ValueError, UserError, OmegaConfBaseException) as error:
        return {}, f"its data cannot be read from {folder}: {error}"
    if run.data and data_fingerprint(splits) != run.data:
        return {}, f"the data in {folder} is not what the run read (its fingerprint in metrics.json differs)"
    mode = saved.pool.mode or run.record.pool
    items = [row for a, s in splits.items() for row in seed_memories(agents[a], s.seed, mode)]
    with tempfile.TemporaryDirectory() as tmp, Pool(Path(tmp) / POOL_FILENAME) as pool:
        ids = pool.add(items, step=0)  # as the run seeded its own pool (ms.loop.pipeline: seed_pool)
    seeded = run.written.stream.seeded
    if seeded is not None and seeded != sum(i is not None for i in ids):
        return {}, (
            f"seeding from {folder} adds {sum(i is not None for i in ids)} memories, the run added "
            f"{seeded} (its pool was shared, or already held seeds)"
        )
    return {i: item for i, item in zip(ids, items) if i is not None}, None


def _pool_records(path: Path) -> dict[int, dict]:
    with pool_copy(path) as conn:
        return {int(r["id"]): dict(r) for r in conn.execute("SELECT * FROM memories")}


def _record(w: Optional[Writer], row: Optional[dict]) -> dict:
    """What the site shows of one memory; `row` holds whatever else is known (texts, step, score)."""
    row = row or {}
    texts = {"question": row["question"], "answer": row["answer"]} if row.get("question") is not None else {}
    out = {
        **{key: getattr(w, key) if w else row.get(key) for key in ("agent", "domain", "origin", "backbone", "run_id")},
        "writing_run": w.run if w else None,
        "step": row.get("added_step"),
        "score": row.get("score"),
        "scope": row.get("scope"),
        **texts,
        "pool_utility": {"mean": row.get("utility"), "n": row["utility_n"]} if row.get("utility_n") else None,
        "consolidated": True if row.get("consolidated") else None,
        "retired_step": row.get("retired_step"),  # retired for its measured utility (memory.retire_below)
        "forgotten": w.forgotten if w else None,
        "poisoner": True if w is not None and w.poisoner else None,  # the site says so instead of naming a backbone
    }
    return {k: v for k, v in out.items() if v is not None}


def _gone_texts(
    run: Run, gone: list[int], writers: dict[int, Writer], stream: dict[int, dict]
) -> tuple[dict[int, dict], list[str]]:
    """The texts of memories that left the pool file: the stream's from decisions.jsonl, the seeds rebuilt
    from the run's data (checked against who the run's files say wrote each); and what stays missing."""
    texts = {i: stream[i] for i in gone if i in stream}
    seeds = [i for i in gone if i not in texts and writers[i].origin == "seed"]
    missing = []
    if seeds:
        rebuilt, why = rebuild_seeds(run)
        wrong = [i for i in seeds if i in rebuilt and rebuilt[i]["agent"] != writers[i].agent]
        if why or wrong:
            missing.append(
                f"seed texts of memories no longer in the pool: "
                f"{why or f'the rebuilt seeds are numbered otherwise (id {wrong[0]})'}"
            )
        else:
            texts |= {i: {**rebuilt[i], "added_step": 0} for i in seeds if i in rebuilt}
    return texts, missing


def run_memories(run: Run) -> Memories:
    """Every memory of the run's pool (or, without one, that its records name), texts where they can be had."""
    backbone = run.record.backbone
    writers = read_writers(run.path, backbone) or {}
    source = writers_source(run.path)
    decisions = [d for d in decisions_of(run.path) if d.get("memory_id") is not None]
    stream = {
        int(d["memory_id"]): {
            "question": d.get("question"),
            "answer": d.get("answer"),
            "agent": d.get("writer") or d.get("agent"),
            "asked_by": d.get("agent"),
            "added_step": d.get("step"),
            "score": d.get("score"),
            "origin": "stream",
            "scope": d.get("scope"),
        }
        for d in decisions
    }
    if source is not None and source.name == POOL_FILENAME:
        rows = _pool_records(source)
        gone = sorted(set(writers) - set(rows))  # read_writers adds only those the run's files record as gone
        texts, missing = _gone_texts(run, gone, writers, stream) if gone else ({}, [])
        records = {i: _record(writers.get(i), rows.get(i) or texts.get(i)) for i in sorted({*rows, *gone})}
        where = f"texts from the run's pool file ({source.name})"
        if gone:
            told = [
                f"{n} from {how}"
                for n, how in (
                    (sum(i in stream for i in texts), DECISIONS_FILE),
                    (sum(i not in stream for i in texts), "the run's data, rebuilt"),
                )
                if n
            ]
            where += f"; {len(gone)} memories no longer in it, marked as removed (texts: {', '.join(told) or 'none'})"
            untold = [i for i in gone if "question" not in records[i]]
            if untold:
                missing.append(
                    f"{len(untold)} memories no longer in the pool have no text in the run's files "
                    f"(ids {id_span(untold)})"
                )
        return Memories(records, where, missing, writers)
    seeds, why = rebuild_seeds(run)
    missing = [f"seed texts: {why}"] if why else []
    saved = SavedConfig.of(run.path)
    if writers:
        for i, item in list(seeds.items()):  # memories.csv must agree with the rebuilt numbering
            w = writers.get(i)
            if w is None or w.origin != "seed" or w.agent != item["agent"]:
                seeds, missing = {}, [f"seed texts: memories.csv numbers the seeds otherwise (id {i})"]
                break
    else:  # no writers table: who wrote each memory is what the rebuild and decisions.jsonl say
        domain = saved.agent_domains()
        # A poisoner's pair is stored in the domain of the agent whose question it answered.
        rows = [{"id": i, "agent": s["agent"], "domain": s["domain"], "origin": "seed"} for i, s in seeds.items()]
        rows += [
            {"id": i, "agent": s["agent"], "domain": domain.get(s["asked_by"]) or "", "origin": "stream"}
            for i, s in stream.items()
        ]
        writers = writers_of(rows, run.path, saved, backbone)
    rows = {**{i: {**s, "added_step": 0} for i, s in seeds.items()}, **stream}
    ids = sorted(set(writers) | set(rows))
    records = {i: _record(writers.get(i), rows.get(i)) for i in ids}
    unknown = [i for i in ids if "question" not in records[i]]
    if unknown:
        missing.append(f"{len(unknown)} memories have no text in the run's files (ids {id_span(unknown)})")
    parts = [
        p
        for p, ok in (
            ("seed texts rebuilt from the run's data and config", seeds),
            (f"stream texts from {DECISIONS_FILE}", stream),
        )
        if ok
    ]
    return Memories(records, "; ".join(parts) or "no texts: the run kept no pool file", missing, writers)
