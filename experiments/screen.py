"""The admission screen: for each mechanism, what its stream wrote and what its gate admitted, scored by
BERTScore F1 against the stream questions' references (each run's quality.jsonl, from `ms-data
gate-quality RUN`). Markdown on stdout.

    python experiments/screen.py NAME=RUN [NAME=RUN ...] \
        [--regrade NAME=RUN,CROSS_GRADE_CSV,GRADER,THRESHOLD ...] [--utility-lower NAME=RUN ...]

The first NAME=RUN is the baseline every other row is compared with. --regrade is a mechanism that only
changes the grader: RUN's answers admitted where `ms-data cross-grade`'s score_GRADER column reaches
THRESHOLD (the csv's rows are RUN's decisions in order). --utility-lower is the stricter utility test
(gate.decide_on=lower) applied to a utility-gated RUN's recorded probe deltas, at its utility_threshold:
what the lower bound would have admitted of the same answers. Per row: answers written, admitted (share), the
mean F1 of all written, admitted and rejected answers (95% BCa CIs over answers), admitted minus rejected
(does the gate choose?) and admitted minus the baseline's admitted (does the mechanism admit better
answers?), both as differences of independent means with 95% bootstrap CIs (scipy.stats.bootstrap).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from scipy import stats

from ms.common.stats import CONFIDENCE, RESAMPLES, SEED, mean_ci
from ms.config.files import DECISIONS_FILE, QUALITY_FILE
from ms.report.common.runs import read_jsonl


def answers(run: Path) -> list[dict]:
    path = run / QUALITY_FILE
    if not path.is_file():
        raise SystemExit(f"{path}: not found; run `ms-data gate-quality {run}` first")
    return [r for r in read_jsonl(path) if r.get("F1") is not None]


def regraded(spec: str) -> tuple[str, list[dict]]:
    name, _, rest = spec.partition("=")
    try:
        run, table, grader, threshold = rest.split(",")
    except ValueError:
        raise SystemExit(f"--regrade {spec!r}: write NAME=RUN,CROSS_GRADE_CSV,GRADER,THRESHOLD") from None
    records = read_jsonl(Path(run) / QUALITY_FILE)
    with open(table, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(records):
        raise SystemExit(f"{table}: {len(rows)} pairs, but {run}'s {QUALITY_FILE} has {len(records)} decisions")
    out = []
    for record, row in zip(records, rows):
        if row["agent"] != record["agent"]:
            raise SystemExit(
                f"{table}: its pairs are not {run}'s decisions in order ({row['agent']} at a {record['agent']})"
            )
        score = row.get(f"score_{grader}")
        if score is None:
            raise SystemExit(f"{table}: no column score_{grader}")
        out.append({**record, "accepted": score != "" and float(score) >= float(threshold)})
    return name, [r for r in out if r.get("F1") is not None]


def utility_lower(spec: str) -> tuple[str, list[dict]]:
    from omegaconf import OmegaConf

    from ms.gates.replay import Utility
    from ms.gates.utility import utility_verdict

    name, _, run = spec.partition("=")
    threshold = float(OmegaConf.load(Path(run) / ".hydra" / "config.yaml").gate.utility_threshold)
    records = read_jsonl(Path(run) / QUALITY_FILE)
    decisions = read_jsonl(Path(run) / DECISIONS_FILE)
    if len(decisions) != len(records):
        raise SystemExit(f"{run}: {len(decisions)} decisions but {len(records)} rows in {QUALITY_FILE}")
    out = []
    for record, decision in zip(records, decisions):
        if decision.get("utility") is None:  # decided before any measurement (gate=both's rubric refusal)
            out.append(record)
            continue
        verdict = utility_verdict(Utility(**decision["utility"]), threshold, "lower")[0]
        out.append({**record, "accepted": decision["accepted"] and verdict})
    return name, [r for r in out if r.get("F1") is not None]


def difference(a: list[float], b: list[float]) -> str:
    if len(a) < 2 or len(b) < 2:
        return "–"
    ci = stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        random_state=SEED,
    ).confidence_interval
    return f"{np.mean(a) - np.mean(b):+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN; the first is the baseline")
    parser.add_argument("--regrade", action="append", default=[])
    parser.add_argument("--utility-lower", action="append", default=[])
    args = parser.parse_args()
    rows = []
    for spec in args.runs:
        name, sep, run = spec.partition("=")
        if not sep:
            raise SystemExit(f"{spec!r}: write NAME=RUN")
        rows.append((name, answers(Path(run))))
    rows += [regraded(spec) for spec in args.regrade]
    rows += [utility_lower(spec) for spec in args.utility_lower]
    base = [r["F1"] for r in rows[0][1] if r["accepted"]]
    print(
        "| mechanism | written | admitted | F1 written | F1 admitted | F1 rejected | admitted - rejected "
        f"| admitted - {rows[0][0]}'s admitted |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, records in rows:
        admitted = [r["F1"] for r in records if r["accepted"]]
        rejected = [r["F1"] for r in records if not r["accepted"]]
        written = [r["F1"] for r in records]
        print(
            f"| {name} | {len(written)} | {len(admitted)} ({len(admitted) / len(written):.0%}) | "
            f"{mean_ci(written).text(3)} | {mean_ci(admitted).text(3)} | {mean_ci(rejected).text(3)} | "
            f"{difference(admitted, rejected)} | {difference(admitted, base)} |"
        )


if __name__ == "__main__":
    main()
