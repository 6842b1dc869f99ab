"""experiments/size_trend.py picks the right claims.csv rows and the right stream answers."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ms.common.errors import UserError
from ms.report.tables.claim_files import CSV_COLUMNS

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("size_trend", REPO / "experiments" / "size_trend.py")
size_trend = importlib.util.module_from_spec(spec)
sys.modules["size_trend"] = size_trend  # dataclasses look their module up there
spec.loader.exec_module(size_trend)


def claims(folder: Path, rows: list[tuple]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "claims.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for claim, comparison, gate, metric, estimate in rows:
            w.writerow(
                [
                    claim,
                    "text",
                    comparison,
                    "the setting in words",
                    metric,
                    estimate,
                    estimate - 0.01,
                    estimate + 0.01,
                    0.01,
                    180,
                    "5/9",
                    "supported",
                    "x",
                    "y",
                    100,
                    27,
                    gate,
                    gate,
                ]
            )
    return folder


def test_rows_are_picked_by_claim_comparison_metric_and_gate(tmp_path):
    folder = claims(
        tmp_path / "r",
        [
            ("a", "k = 1 against k = 0", "rubric", "ref_logprob", 0.1),
            ("a", "k = 3 against k = 0", "rubric", "P", 0.9),
            ("a", "k = 3 against k = 0", "rubric", "ref_logprob", 0.3),
            ("c", "fill 100% against 27%", "all+reference", "ref_logprob", 0.02),
            ("c", "fill 100% against 27%", "random~rubric", "ref_logprob", -0.5),
            ("c", "fill 100% against 27%", "rubric", "ref_logprob", -0.04),
        ],
    )
    assert size_trend.claim_row(folder, "a", "k = 3 against k = 0").estimate == 0.3
    assert size_trend.claim_row(folder, "c", "fill 100%").estimate == -0.04
    assert size_trend.claim_row(folder, "c", "fill 100%", "all+reference").estimate == 0.02
    assert size_trend.claim_row(folder, "c", "fill 100%", "utility") is None
    with pytest.raises(UserError, match="no claims.csv"):
        size_trend.claim_row(tmp_path / "missing", "a", "k = 3 against k = 0")


def test_stream_quality_counts_every_scored_answer_and_the_admitted_apart(tmp_path):
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    rows = [
        {"accepted": True, "F1": 0.6},
        {"accepted": True, "F1": 0.4},
        {"accepted": False, "F1": 0.1},
        {"accepted": False, "F1": None},
    ]
    (run / "quality.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    every, admitted = size_trend.stream_quality(size_trend.rubric_run(tmp_path))
    assert (every.n, admitted.n) == (3, 2)
    assert every.mean == pytest.approx(1.1 / 3) and admitted.mean == pytest.approx(0.5)


def test_a_family_needs_five_fields():
    assert size_trend.Family.parse("Q|494|a|c|").reference is None
    with pytest.raises(UserError, match="5 fields"):
        size_trend.Family.parse("Q|494|a|c")
