"""The table a run prints when it ends: per agent, each metric with its 95% CI and n; then what
its LLM calls cost, per role."""

from ms.common.stats import interval_text
from ms.llm.usage import format_usage
from ms.metrics.base import metric_of_key
from ms.metrics.summary_record import SUMMARY_FIELDS


def format_table(metrics: dict) -> str:
    """Per agent, at the last fill: each metric's mean with its 95% CI, and the headline metric's n; the headline metric
    at every fill; the gate's accepted/rejected/unscored counts; and the LLM usage per role."""
    fills = list(metrics["fills"])
    if not fills:  # a stream-only run (eval.enabled=false): what the gate did, and what it cost
        return _stream_only(metrics)
    last = metrics["fills"][fills[-1]]
    present = [m for m in last["overall"] if m not in SUMMARY_FIELDS]  # the metric keys the run recorded
    headline = present[0] if present else None
    stream = metrics["stream"]
    accepted, rejected = stream["accepted"], stream["rejected"]
    unscored = stream.get("unscored_by_agent", {})
    bert = metrics.get("bertscore")
    run = metrics["run"]
    head = (
        f"{'agent':<11}"
        + "".join(f" {m + ' [95% CI]':>24}" for m in present)
        + f" {'n':>3} |"
        + "".join(f" {headline}@{f}%" for f in fills)
        + " | accepted/rejected/unscored"
    )
    lines = [
        f"k={run['k']}, pool={run['pool']}, retriever={run['retriever']}, backbone={run['backbone']}"
        + (f"; BERTScore {bert['model']}, layer {bert['num_layers']}" if bert else "")
        + "".join(f"; {m} {unit}" for m in present if (unit := _unit(m))),
        head,
        "-" * len(head),
    ]
    for name in [*last["per_agent"], "overall"]:

        def at(fill: str) -> dict:
            summary = metrics["fills"][fill]
            return summary["overall"] if name == "overall" else summary["per_agent"][name]

        cell = at(fills[-1])
        counts = (
            [sum(accepted.values()), sum(rejected.values()), sum(unscored.values())]
            if name == "overall"
            else [accepted.get(name, 0), rejected.get(name, 0), unscored.get(name, 0)]
        )
        lines.append(
            f"{name:<11}"
            + "".join(f" {_with_ci(cell, m):>24}" for m in present)
            + f" {_n(cell, headline):>3} |"
            + "".join(f" {at(f).get(headline, float('nan')):{len(headline) + len(f) + 2}.3f}" for f in fills)
            + " | "
            + "/".join(map(str, counts))
        )
    usage = metrics.get("usage") or {}
    if "backbones" in usage:  # runs written before usage was kept per role have no such table
        lines += ["", format_usage(usage)]
    return "\n".join(lines)


def _stream_only(metrics: dict) -> str:
    run, stream = metrics["run"], metrics["stream"]
    counts = [stream["accepted"], stream["rejected"], stream.get("unscored_by_agent", {})]
    agents = list(dict.fromkeys(a for c in counts for a in c))
    lines = [
        f"k={run['k']}, pool={run['pool']}, retriever={run['retriever']}, backbone={run['backbone']}; "
        "stream only (eval.enabled=false): no test question answered",
        f"{'agent':<11} | accepted/rejected/unscored",
    ]
    lines += [f"{a:<11} | " + "/".join(str(c.get(a, 0)) for c in counts) for a in agents]
    lines.append(f"{'overall':<11} | " + "/".join(str(sum(c.values())) for c in counts))
    usage = metrics.get("usage") or {}
    return "\n".join(lines + (["", format_usage(usage)] if "backbones" in usage else []))


def _unit(key: str) -> str:
    """The unit a metric's class names for its values, where it names one (ref_logprob: nats per token)."""
    cls = metric_of_key(key)
    return cls.unit if cls is not None else ""


def _n(cell: dict, metric: str | None) -> int:
    """The values measured of `metric` (n per metric); runs written before that hold one n for all."""
    n = cell["n"]
    return n.get(metric, 0) if isinstance(n, dict) else n


def _with_ci(cell: dict, metric: str) -> str:
    lo, hi = cell.get("ci", {}).get(metric, (None, None))
    return f"{cell[metric]:.3f}" + interval_text(lo, hi, _n(cell, metric))
