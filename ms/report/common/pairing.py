"""Which conditions may be paired: their cells (their recorded settings, ms.loop.cell) differ in the keys a
comparison varies and, besides, only in keys that cannot change a paired question's value (NOT_COMPARED).
The seeds that make replicates (REPLICATE_SEEDS) are never a difference."""

from typing import Iterable, Optional, Sequence

from ms.loop.schedule import batches
from ms.report.common.runs import Run

# The seeds that make replicates: runs whose cells differ in these alone are one condition, run again.
# data.split_seed is none of them (another split asks other test questions), nor are train.seed and
# retriever.seed (a sweep over replicates varies `seed`; a run that changed another seed is another setting).
REPLICATE_SEEDS = ("seed",)

# The one list of cell keys that cannot change a paired question's value: a comparison pairs two
# conditions whose cells differ in the keys it varies and, besides those, only in these (and says which).
# A key names itself and every key below it. The record's resume-only keys (inputs, code_sha256, dtypes)
# are not settings, and the report never reads them as such; they are named here so that no one pairs by them.
NOT_COMPARED = {
    # A micro-batch never crosses a fill, so other fills can cut the stream into other batches: they are
    # passed over only where both runs took the same batches, or one grew no pool (same_batches).
    "fills": "which fills were evaluated, where the stream was taken in the same micro-batches",
    "gate.match": "the path of the decisions a random gate matched (the gate it matched is in the run's gate label)",
    "backbone.timeout_s": "an API call's timeout",
    "backbone.max_retries": "an API call's retries",
    "backbone.backoff_s": "the wait between an API call's retries",
    "backbone.max_retry_wait_s": "the longest wait between an API call's retries",
    "backbone.max_concurrency": "API calls in flight at once",
    "backbone.batch_size": "prompts scored or decoded together",
    "eval.batch_size": "answers scored together by BERTScore",
    "eval.metrics": "which metrics were measured (a claim compares a metric both sides measured)",
    "accept_code_change": "whether a resume accepted other code (the numbers are the finished run's)",
    "inputs": "the record's hashes of the files a run read, compared on resume only",
    "code_sha256": "the record's hash of the code, compared on resume only",
    "dtypes": "the record's resolved dtypes, compared on resume only",
}


def under(key: str, names: Iterable[str]) -> bool:
    """Whether the dotted key is one of the names or lies below one (gate.probes is under gate)."""
    return any(key == name or key.startswith(name + ".") for name in names)


def cell_differences(a: Run, b: Run) -> list[str]:
    """The cell keys in which two runs differ, over the keys both cells hold (a key one lacks was added
    after that run: the value it ran with is not known), the replicate seeds left out. A run whose cell
    cannot be read at all (no record, no saved config) shows no differences: its run fields must tell."""
    sa, sb = a.settings or {}, b.settings or {}
    return sorted(k for k in sa.keys() & sb.keys() if sa[k] != sb[k] and not under(k, REPLICATE_SEEDS))


def stream_batches(run: Run) -> Optional[list[tuple[int, int]]]:
    """The stream's micro-batches as the run took them (ms.loop.schedule.batches: its fills and
    micro_batch cut them), as (start, end) positions; [] for a run that grew no pool (k = 0 skips the
    stream), None where the stream's length or the micro-batch size is not recorded."""
    n = run.written.stream.questions
    settings = run.settings or {}
    micro_batch = settings.get("micro_batch")
    if n is not None and int(n) == 0:
        return []
    if n is None or micro_batch is None:
        return None
    return [
        (part.start, part.stop)
        for _, part in batches(int(n), settings.get("fills") or run.fills, int(micro_batch))
        if part is not None
    ]


def same_batches(a: Run, b: Run) -> bool:
    """Whether two runs' fills could change neither's values: one grew no pool, or both took the
    stream in the same micro-batches."""
    sa, sb = stream_batches(a), stream_batches(b)
    return sa == [] or sb == [] or (sa is not None and sa == sb)


def runs_pairable(a: Run, b: Run, varied: Sequence[str] = ()) -> Optional[list[str]]:
    """Where two runs' conditions may be paired by a comparison that varies the keys `varied`: the keys
    outside `varied` in which their cells differ, all of them NOT_COMPARED ones ([] where none). None
    where they may not: their cells differ elsewhere, or in fills that cut the stream into other
    micro-batches, or both recorded the examples they read and those differ."""
    if a.data and b.data and a.data != b.data:
        return None
    other = [k for k in cell_differences(a, b) if not under(k, varied)]
    if "fills" in other and not same_batches(a, b):
        return None
    return other if all(under(k, NOT_COMPARED) for k in other) else None
