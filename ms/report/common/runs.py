"""Run folders as the pipeline leaves them: what each run was (metrics.json, .hydra/overrides.yaml)
and what it measured on each test question (predictions.jsonl)."""

import json
import logging
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional, Sequence

import yaml

from ms.common.errors import UserError
from ms.config.files import METRICS_FILE, PREDICTIONS_FILE
from ms.config.parts import ACCESS_RULES, GATES, METRICS, POISONS, POLICIES, RETRIEVERS
from ms.loop.cell import stored, with_added
from ms.loop.run_folder import failure
from ms.loop.run_metrics import RunMetrics
from ms.loop.run_record import RunRecord
from ms.loop.stream_record import total
from ms.metrics.base import metric_keys, metric_of_key
from ms.metrics.summary_record import BertScoreRecord
from ms.pool.access.record import AccessRecord
from ms.report.common.labels import answers_words, gate_key, option, pool_words, rank, retriever_key, said, words

log = logging.getLogger(__name__)

Cell = tuple[str, int, str]  # (backbone, k, pool)
Item = tuple[str, str]  # (agent, test_id): one test question, the unit every CI resamples

SEPARATOR = " · "  # between the parts of a condition in words (Run.words)
# The parts of a condition in words, in the order Run.words says them: the names its `omit` takes.
DESCRIBED = ("backbone", "k", "pool", "retriever", "memory", "gate", "answers", "access", "poison", "grader")


def metric_label(metric: str) -> str:
    """How titles and axes name a metric key, as its metric's class says (ms.metrics); a key no
    registered metric writes is named as it is."""
    cls = metric_of_key(metric)
    return cls.label(metric) if cls is not None else metric


def metric_words(metric: str) -> str:
    """What a metric key is, in words, as its metric's class says; else the key itself."""
    cls = metric_of_key(metric)
    return cls.words.get(metric, metric) if cls is not None else metric


def in_known_order(keys: Sequence[str]) -> list[str]:
    """Metric keys, the registered metrics' keys first in the registry's order (the order a run's
    summaries write them in), then any other in the order given."""
    known = metric_keys(list(METRICS))
    return [k for k in known if k in keys] + [k for k in keys if k not in known]


def numbered_jsonl(path: Path, strict: bool = False) -> list[tuple[int, dict]]:
    """(line number, row) for every JSON line of the file. A line that does not parse (a crash mid-write)
    is left out, with a warning; with `strict` it is a UserError naming the line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as err:
                if strict:
                    raise UserError(f"{path} line {n}: not JSON ({err.msg})") from None
                log.warning("%s line %d is not JSON; left out", path, n)
    return rows


def read_jsonl(path: Path) -> list[dict]:
    """Every JSON line of the file, those that do not parse left out (numbered_jsonl)."""
    return [row for _, row in numbered_jsonl(path)]


@dataclass
class Run:
    name: str  # unique and file-name safe: the folder's path under its sweep dir
    path: Path
    metrics: dict
    overrides: list[str]
    finished: float  # metrics.json mtime: the most recent of two otherwise equal runs wins
    # Test ids left out of every table, claim and figure (ms-report --exclude-tests): every per-question
    # value is read through `predictions`, so pairing drops them on both sides of every comparison.
    excluded: frozenset[str] = frozenset()

    @cached_property
    def written(self) -> RunMetrics:
        """Its metrics.json, typed (ms.loop.run_metrics): every section read as attributes."""
        return RunMetrics.from_json(self.metrics, self.path / METRICS_FILE)

    @property
    def record(self) -> RunRecord:
        """What the run was, as its metrics.json records it (`run`), typed (ms.loop.run_record)."""
        return self.written.run

    @property
    def cell(self) -> Cell:
        return self.record.backbone, int(self.record.k), self.record.pool

    @cached_property
    def settings(self) -> Optional[dict]:
        """The run's cell: every setting that can change its numbers, flattened to dotted keys, as the run
        recorded it (metrics.json `cell.config`) or, for a run that predates the record, as Hydra saved it
        beside the run (.hydra/config.yaml), both read by ms.loop.cell.stored. A setting added since runs
        began recording their cell takes the value every earlier run ran with. None where neither is readable."""
        found, _, _ = stored(self.path, self.written.cell)
        return None if found is None else with_added(found)

    @property
    def seed(self):
        """The run field, else its cell's; None for runs from before the seed was recorded."""
        seed = self.record.seed
        return (self.settings or {}).get("seed") if seed is None else seed

    @property
    def memory(self) -> str:
        """The memory policy (runs from before the field existed: as RunRecord.from_metrics says)."""
        return str(option(POLICIES, self.record.memory))

    @property
    def retriever_label(self) -> str:
        """The test questions' retriever, short, and whether memory train learned it ("dense-learned", "bm25"):
        one per condition, as the report groups and orders conditions by it."""
        return retriever_key(self.record)

    @property
    def retriever_words(self) -> str:
        """The test questions' retriever in words: "learned dense retriever", "BM25 retriever"."""
        return words(RETRIEVERS, self.record)

    @property
    def retriever_rank(self) -> tuple:
        """The ablation's order of retrievers (ms.report.common.labels), a frozen one before its learned one."""
        return *rank(RETRIEVERS, self.record.retriever), bool(self.record.learned)

    @property
    def gate(self) -> str:
        """What admitted the stream's pairs, short (gate_key): one per condition, as the report groups,
        orders and pairs conditions by it."""
        return gate_key(self.record.gate, self.record.stream_answers)

    @property
    def gate_words(self) -> str:
        """The gate in words, and what the stream wrote where it was not the model's answers."""
        parts = (words(GATES, self.record.gate), answers_words(self.record.stream_answers))
        return SEPARATOR.join(p for p in parts if p)

    @property
    def access(self) -> Optional[AccessRecord]:
        """The access rule the pool was read under, as the run recorded it (metrics.json `run.access`) or,
        for a run without the field, as its cell names it (its rule and file alone); None where neither names one."""
        if self.record.access is not None:
            return self.record.access
        settings = self.settings or {}
        rule, file = settings.get("access.name"), settings.get("access.file")
        return AccessRecord(rule, file or None) if rule else None

    @property
    def access_key(self) -> str:
        """The access rule, short, and the file it came from: one per condition, as `gate` is."""
        name, file = option(ACCESS_RULES, self.access), self.access.file if self.access else None
        return f"access={name} ({Path(str(file)).name})" if file else str(name)

    def words(self, omit: Sequence[str] = ()) -> str:
        """The run's condition in words, e.g. "smollm2 · k = 3 · Domain pool · learned dense retriever · plain
        memory · rubric gate", without the parts named in `omit` (DESCRIBED: what a comparison varies)."""
        r = self.record
        parts = {
            "backbone": r.backbone,
            "k": f"k = {r.k}",
            "pool": pool_words(r.pool),
            "retriever": self.retriever_words,
            "memory": words(POLICIES, self.memory),
            "gate": words(GATES, r.gate),
            "answers": answers_words(r.stream_answers),
            "access": said(ACCESS_RULES, self.access),
            "poison": said(POISONS, r.poison),
            "grader": None if self.grader == r.backbone else f"graded by {self.grader}",
        }
        assert set(parts) == set(DESCRIBED)
        return SEPARATOR.join(text for part, text in parts.items() if text and part not in omit)

    @property
    def data(self) -> Optional[str]:
        """The fingerprint of the examples the run read (ms.loop.cell); None for runs that predate it."""
        return self.written.cell.data_sha256 if self.written.cell is not None else None

    @property
    def grader(self) -> str:
        """The backbone that graded the stream's pairs; runs record it only where it is not their own."""
        return str(self.record.grader or self.record.backbone)

    @property
    def accepted(self) -> Optional[int]:
        """Stream questions whose answers the gate admitted to the pool; None where not recorded."""
        return total(self.written.stream.accepted)

    @property
    def consolidation(self) -> Optional[dict]:
        return dict(self.written.memory.consolidation or {}) or None

    @property
    def evaluated(self) -> bool:
        """False for a stream-only run (eval.enabled=false): it grew a pool and answered no test question."""
        return self.record.evaluated is not False

    @property
    def fills(self) -> list[int]:
        return sorted(self.written.fills)

    @property
    def last_fill(self) -> int:
        return self.fills[-1]

    @property
    def agents(self) -> list[str]:
        return list(self.written.fills[self.last_fill].per_agent)

    @property
    def measured(self) -> list[str]:
        """The metric keys the run recorded a value of at its last fill (metrics.json), registered ones
        in the registry's order."""
        return in_known_order(self.written.fills[self.last_fill].overall.measured)

    @property
    def scorer(self) -> str:
        """The BERTScore model and layer, as notes name them (runs that skipped BERTScore have none)."""
        b = self.written.bertscore or BertScoreRecord()
        model = "unknown model" if b.model is None else b.model
        return f"{model}, layer {'?' if b.num_layers is None else b.num_layers}"

    @cached_property
    def prediction_rows(self) -> Optional[list[dict]]:
        """predictions.jsonl's rows, every test question included; None for a run without the file."""
        path = self.path / PREDICTIONS_FILE
        return read_jsonl(path) if path.exists() else None

    @cached_property
    def predictions(self) -> Optional[dict[int, dict[Item, dict]]]:
        """fill -> test question -> its prediction row, without the excluded questions; None for a run
        without predictions.jsonl (runs from before it was written). A question written twice at one fill
        keeps its last row."""
        if self.prediction_rows is None:
            return None
        out: dict[int, dict[Item, dict]] = {}
        for row in self.prediction_rows:
            if str(row["test_id"]) not in self.excluded:
                out.setdefault(int(row["fill"]), {})[(row["agent"], str(row["test_id"]))] = row
        return out

    def left_out(self, fill: int) -> Optional[int]:
        """How many of the excluded test questions the run answered at the fill; None without predictions."""
        if self.prediction_rows is None:
            return None
        answered = {(r["agent"], str(r["test_id"])) for r in self.prediction_rows if int(r["fill"]) == fill}
        return len(answered) - len(self.predictions.get(fill, {}))

    def values(self, metric: str, fill: int) -> Optional[dict[Item, float]]:
        """Each test question's value at the fill. A question without the metric key was not measured
        on it and is left out (never counted as 0); None where the run has no predictions.jsonl."""
        if self.predictions is None:
            return None
        rows = self.predictions.get(fill, {})
        return {item: float(row[metric]) for item, row in rows.items() if row.get(metric) is not None}

    def summary(self, metric: str, fill: int, agent: Optional[str] = None) -> tuple[Optional[float], int]:
        """metrics.json's mean and n (for runs without predictions.jsonl); agent None: over all agents.
        n is per metric; runs written before that hold one n, the rows of the cell."""
        scores = self.written.fills[fill].scores(agent)
        return scores.mean(metric), scores.n_of(metric)


@dataclass
class Skipped:
    path: Path
    reason: str


def _read_metrics(folder: Path) -> tuple[Optional[dict], Optional[RunMetrics], str]:
    """A run's metrics as read and typed, or None and why the folder is an incomplete cell."""
    path = folder / METRICS_FILE
    if not path.exists():
        failed = failure(folder)
        return None, None, f"failed: {failed}" if failed else "no metrics.json (still running, or failed)"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        return None, None, f"unreadable metrics.json ({e})"
    # Checked before the file is read as a run's: a file without a run record may say it is not complete.
    if not isinstance(metrics, dict) or metrics.get("complete") is not True:
        return None, None, "metrics.json does not say complete: true"
    try:
        written: Optional[RunMetrics] = RunMetrics.from_json(metrics, path)
    except UserError:  # no run record at all
        written = None
    # a stream-only run (eval.enabled=false) has no fill results, and says so
    if written is None or not written.run.has_cell or not (written.fills or written.run.evaluated is False):
        return None, None, "metrics.json lacks its run fields (backbone, k, pool) or fill results"
    return metrics, written, ""


def _read_overrides(folder: Path) -> list[str]:
    path = folder / ".hydra" / "overrides.yaml"
    return [str(o) for o in yaml.safe_load(path.read_text(encoding="utf-8")) or []] if path.exists() else []


def slug(text: str) -> str:
    return re.sub(r"[^\w.,=+-]", "_", text)


def run_folders(root: Path) -> list[Path]:
    """Every folder under `root` holding metrics.json or a Hydra .hydra folder, through symbolic links
    too (a sweep dir of links to runs kept elsewhere; Path.rglob does not follow them), each named by
    where it was found. A folder reached twice (two links, or a link back up the tree) is walked once."""
    found, walked = [], set()
    for here, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(here)
        if real in walked:
            dirs[:] = []
            continue
        walked.add(real)
        dirs.sort()
        if METRICS_FILE in files or ".hydra" in dirs:
            found.append(Path(here))
        for name in files:  # a link to nothing cannot be followed: said, never silently passed over
            if os.path.islink(os.path.join(here, name)) and not os.path.exists(os.path.join(here, name)):
                log.warning(
                    "%s is a symbolic link to %s, which does not exist: not read",
                    Path(here) / name,
                    os.readlink(os.path.join(here, name)),
                )
    return found


def find_runs(roots: Sequence[Path], excluded: frozenset[str] = frozenset()) -> tuple[list[Run], list[Skipped]]:
    """Every run folder under the roots: one holding metrics.json or a Hydra .hydra folder (run_folders).
    `excluded`: test ids every run leaves out of its per-question values (Run.excluded)."""
    runs, skipped, seen = [], [], set()
    for root in (Path(r).resolve() for r in roots):
        for folder in sorted(run_folders(root)):
            if folder.resolve() in seen:  # the same run under two roots, or through a link and directly
                continue
            seen.add(folder.resolve())
            metrics, written, problem = _read_metrics(folder)
            if metrics is None:
                log.warning("skipped incomplete run %s: %s", folder, problem)
                skipped.append(Skipped(folder, problem))
                continue
            # Sweep folders are named by their overrides, so the relative path says what the run is;
            # the same name under two sweep dirs gets its sweep dir's name in front.
            name = slug("__".join(folder.relative_to(root).parts) or folder.name)
            taken = {r.name for r in runs}
            if name in taken:
                name = slug(f"{root.name}__{name}")
            base, i = name, 2
            while name in taken:
                name, i = f"{base}_{i}", i + 1
            finished = (folder / METRICS_FILE).stat().st_mtime
            run = Run(name, folder, metrics, _read_overrides(folder), finished, excluded)
            vars(run)["written"] = written  # typed once, by the check above: Run.written's cached value
            runs.append(run)
    return runs, skipped
