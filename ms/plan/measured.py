"""Plan mode from a finished run (`+plan_from=RUN_DIR`): the share of stream pairs that run's gate
admitted, in place of the rate the plan otherwise assumes, and its backends' seconds per token, which
turn the plan's tokens into a rough wall time for local backbones.

Each rate is printed with what it was measured on (the stream pairs the gate judged; the calls and
tokens each backbone was timed on), and `plan_from_warnings` adds one line for each reason to distrust
it: too few pairs or calls to measure it, or the run's settings differing from the planned run's in
one the rate depends on (the keys are named). A measured rate is only as good as the named run is like the
planned one; the machine, which no run records, is the one difference left unchecked.
"""

import json
import math
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from ms.common.errors import UserError
from ms.config.added import before
from ms.config.files import USAGE_FILE
from ms.llm.usage import upgraded_usage
from ms.loop.cell import stored
from ms.loop.provenance_record import CellRecord
from ms.loop.run_folder import completed
from ms.loop.schedule import stream_k

# An admission rate measured on fewer judged stream pairs than this is printed with a warning. The share
# p of n pairs has a standard error of sqrt(p(1 - p) / n), up to 0.5 / sqrt(n): 0.09 at n = 30, so even
# there its 95% interval is about +-0.18 wide, as wide as the gap between the 0.85 the plan assumes at
# threshold 15 and the 0.4 to 0.65 the committed offline runs measured. Below that a measured rate is no
# surer a guide than the assumption (at 4 pairs, 0 admitted still allows anything up to 0.49).
MIN_JUDGED = 30
# Seconds per token timed on fewer backend calls than this are printed with a warning: a run's one-off
# costs (the engine's first batches, its allocations) and part-full batches weigh on a few calls as they
# do not on hundreds. 100 calls are six full batches at the offline backbones' batch_size of 16; the
# committed figure4_offline run timed 835, and a 4-pair test run 28.
MIN_TIMED_CALLS = 100

# The settings each measured rate depends on, as keys of a run's flattened settings (ms.loop.cell; `*`
# stands for an agent's name). `agents` is the set of agents the run asked, `stream_k` the memories a
# stream question is shown (k where stream_k is unset). The admission rate follows from who answers the
# stream and with what in the prompt, and from who judges the answers and how strictly.
RATE_SETTINGS = (
    "agents",
    "agents.*.backbone",
    "agents.*.rubric",
    "backbone.name",
    "backbone.model",
    "backbone.gguf_file",
    "backbone.gguf_package",
    "backbone.engine",
    "backbone.prompt_format",
    "backbone.generation.max_new_tokens",
    "backbone.generation.temperature",
    "stream_k",
    "pool.mode",
    "retriever.name",
    "retriever.learn",
    "memory.policy",
    "memory.question",
    "stream.answers",
    "poison.name",
    "gate.*",
    "scorer.threshold",
    "scorer.backbone",
    "scorer.read",
)
# The seconds per token follow from which model runs on which engine and how (batching, precision,
# device), and from how the roles that read rather than write use it (the grader, the labels).
TIMING_SETTINGS = (
    "agents.*.backbone",
    "backbone.name",
    "backbone.model",
    "backbone.gguf_file",
    "backbone.gguf_package",
    "backbone.engine",
    "backbone.device",
    "backbone.dtype",
    "backbone.batch_size",
    "backbone.max_length",
    "backbone.prompt_logprobs",
    "scorer.backbone",
    "scorer.read",
    "train.backbone",
    "train.label_method",
)
# A run with neither a cell record nor a saved config: the few settings its `run` record keeps.
FROM_RUN_RECORD = {
    "backbone": "backbone.name",
    "k": "k",
    "pool": "pool.mode",
    "memory": "memory.policy",
    "gate": "gate.name",
    "rate": "gate.rate",
    "match": "gate.match",
    "utility_threshold": "gate.utility_threshold",
    "utility_probes": "gate.probes",
    "utility_decide_on": "gate.decide_on",
    "stream_answers": "stream.answers",
}


class Measured(NamedTuple):
    """An admission rate read from a finished run, with how it was read and what it was measured on."""

    rate: float
    said: str
    run: Path
    judged: int = 0  # the stream pairs the rate is a share of
    settings: Optional[dict] = None  # the run's flattened settings (ms.loop.cell), None where none is recorded


def source_settings(run: Path, metrics: Mapping) -> Optional[dict]:
    """The settings the finished run in `run` ran with, flattened: its cell record, else the config Hydra
    saved beside it, else the little its `run` record keeps; `agents` the agents it asked. None where
    none of them is there."""
    record = metrics.get("run") or {}
    settings, _, _ = stored(run, CellRecord.from_json(metrics.get("cell")))
    if settings is None and record:
        settings = {key: record[name] for name, key in FROM_RUN_RECORD.items() if name in record}
        if "stream_retriever" in record:  # "dense (learned)": the stream's retriever, and whether it learned
            settings["retriever.name"] = str(record["stream_retriever"]).split(" ")[0]
        if record.get("label_method"):
            settings["train.label_method"] = record["label_method"]
        settings.setdefault("gate.name", before("gate.name"))
        settings.setdefault("stream.answers", before("stream.answers"))
    if settings is not None and record.get("agents"):
        settings = {**settings, "agents": sorted(record["agents"])}
    return settings


def planned_settings(settings: Mapping[str, Any], agents: Sequence[str]) -> dict:
    """The planned run's settings (`settings`: its cell identity, ms.loop.cell.identity) as `source_settings`
    gives a finished run's."""
    return {**settings, "agents": sorted(agents)}


def measured(run: Path) -> Measured:
    """The share of stream pairs the finished run in `run` admitted (its metrics.json)."""
    metrics = completed(run)
    if metrics is None:
        raise UserError(
            f"invalid setting plan_from={run}: no finished run there (a metrics.json with "
            f'"complete": true); name the folder of a finished run'
        )
    stream = metrics.get("stream") or {}
    accepted, rejected = (sum((stream.get(key) or {}).values()) for key in ("accepted", "rejected"))
    judged = accepted + rejected
    if not judged:
        raise UserError(
            f"invalid setting plan_from={run}: that run's gate judged no stream pair (k=0 skips "
            f"the stream); name a run that streamed"
        )
    settings = source_settings(run, metrics)
    gate = (settings or {}).get("gate.name")
    threshold = f", scorer.threshold={settings['scorer.threshold']}" if "scorer.threshold" in (settings or {}) else ""
    under = f" (gate={gate}{threshold})" if gate else ""
    rate = accepted / judged
    said = (
        f"{rate:.2f} of stream pairs admitted, measured: the finished run {run} admitted "
        f"{accepted} of the {judged} stream pairs its gate judged{under}"
    )
    return Measured(rate, said, run, judged, settings)


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of the share hits / n (sound at small n and at 0 or n hits)."""
    p, shrink = hits / n, 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
    return max(0.0, centre - half), min(1.0, centre + half)


def _stream_k(settings: Mapping) -> Any:
    return stream_k(settings.get("k"), settings.get("stream_k")) if "k" in settings else settings.get("stream_k")


def _shown(value: Any) -> str:
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return text if len(text) <= 32 else text[:29] + "..."


def differing(planned: Mapping, source: Mapping, patterns: Sequence[str]) -> list[str]:
    """'key (its value there, its value here)' for each key matching `patterns` that both hold and
    that differs: where the finished run (`source`) ran otherwise than the planned run would."""
    # stream_k as the run used it: k where it is unset, and then named k, the setting that was given
    k_given = planned.get("stream_k") is None and source.get("stream_k") is None
    planned, source = ({**s, "stream_k": _stream_k(s)} if "k" in s or "stream_k" in s else s for s in (planned, source))
    return [
        f"{'k' if key == 'stream_k' and k_given else key} ({_shown(source[key])} there, {_shown(planned[key])} here)"
        for key in sorted(planned.keys() & source.keys())
        if any(fnmatch(key, p) for p in patterns) and planned[key] != source[key]
    ]


class _Timing(NamedTuple):
    seconds: float
    used: dict  # backbone -> (calls, tokens) it was timed on in the finished run
    unmeasured: set


def _per_token(usage: Optional[dict]) -> Optional[float]:
    tokens = usage and usage["prompt_tokens"] + usage["completion_tokens"]
    return usage["backend_seconds"] / tokens if tokens and usage["backend_seconds"] else None


def _timing(rows: Sequence, run: Path, local: Callable[[str], bool]) -> Optional[_Timing]:
    try:
        raw = json.loads((run / USAGE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    usage = upgraded_usage(raw, ((completed(run) or {}).get("run") or {}).get("backbone", ""))
    seconds, used, unmeasured = 0.0, {}, set()
    for r in rows:
        if not r.calls or not local(r.backbone):
            continue
        entry = (usage or {"backbones": {}})["backbones"].get(r.backbone)
        # Per role where the run measured the role (scoring reads a prompt, answering decodes), else the backbone's.
        rate = entry and (_per_token(entry["roles"].get(r.role)) or _per_token(entry["total"]))
        if not rate:
            unmeasured.add(r.backbone)
            continue
        seconds += rate * (r.billed["prompt_tokens"] + r.billed["completion_tokens"])
        total = entry["total"]
        used[r.backbone] = (total["calls"], total["prompt_tokens"] + total["completion_tokens"])
    return _Timing(seconds, used, unmeasured) if used else None


def wall_time(rows: Sequence, run: Path, local: Callable[[str], bool]) -> Optional[str]:
    """A note estimating the backend time of `rows` (ms.plan.rows.Row) on the local backbones (`local(name)`)
    from the seconds per token the run's llm_usage.json recorded; None where it recorded none."""
    timing = _timing(rows, run, local)
    if timing is None:
        return None
    took = f"{timing.seconds:,.0f} s" if timing.seconds < 90 else f"{timing.seconds / 60:,.0f} min"
    timed_on = "; ".join(
        f"{name}: {calls:,} calls, {tokens:,} tokens" for name, (calls, tokens) in sorted(timing.used.items())
    )
    return (
        f"wall time: ~{took} of backend time on {', '.join(sorted(timing.used))}: the backend seconds "
        f"per token in {run / USAGE_FILE} (timed on {timed_on}; per role where it has the role) times this "
        f"plan's tokens the cache will not answer (an upper bound where cached is unknown); rough: the tokens "
        f"are estimates, and loading models, memory train's steps and BERTScore are left out"
        + (f"; {', '.join(sorted(timing.unmeasured))}: not measured there" if timing.unmeasured else "")
    )


def plan_from_warnings(accept: Measured, planned: Mapping, rows: Sequence, local: Callable[[str], bool]) -> list[str]:
    """One line for each reason to distrust what the finished run `accept.run` measured, as it stands
    for the planned run (`planned`: its settings, as `planned_settings` gives them): too few judged
    pairs or timed calls, or settings that differ in a key the rate depends on (named)."""
    said = []
    if accept.judged < MIN_JUDGED:
        lo, hi = wilson(round(accept.rate * accept.judged), accept.judged)
        said.append(
            f"warning: the admission rate is measured on only {accept.judged} judged stream pairs (fewer "
            f"than {MIN_JUDGED}): its 95% interval is {lo:.2f} to {hi:.2f}; a run that judged more pairs "
            f"measures it better"
        )
    if accept.settings is None:
        said.append(
            f"warning: {accept.run} records no settings (no cell record in its metrics.json, no "
            f".hydra/config.yaml, no run record): whether it ran as this run would is not checked"
        )
    elif keys := differing(planned, accept.settings, RATE_SETTINGS):
        said.append(f"warning: the admission rate was measured under other settings than this run's: {', '.join(keys)}")
    timing = _timing(rows, accept.run, local)
    if timing is None:
        return said
    few = [f"{name} ({calls} calls)" for name, (calls, _) in sorted(timing.used.items()) if calls < MIN_TIMED_CALLS]
    if few:
        said.append(
            f"warning: the wall time's seconds per token are timed on few calls (fewer than "
            f"{MIN_TIMED_CALLS}): {', '.join(few)}; one-off costs and part-full batches weigh on them"
        )
    if accept.settings is not None and (keys := differing(planned, accept.settings, TIMING_SETTINGS)):
        said.append(
            f"warning: the wall time's seconds per token were measured under other settings than this "
            f"run's: {', '.join(keys)}"
        )
    return said
