"""experiments/mechanism.py: the share of the gap closed, and its refusal of runs under other backbone
settings."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mechanism", REPO / "experiments" / "mechanism.py")
mechanism = importlib.util.module_from_spec(spec)
sys.modules["mechanism"] = mechanism
spec.loader.exec_module(mechanism)


def test_gap_share_is_the_ratio_of_mean_differences_with_an_interval_around_it():
    rng = np.random.default_rng(0)
    r = rng.normal(-3.0, 0.3, 120)
    ref = r + 0.10 + rng.normal(0, 0.02, 120)
    m = r + 0.05 + rng.normal(0, 0.02, 120)
    share, lo, hi = mechanism.gap_share(m, r, ref)
    assert share == pytest.approx((m.mean() - r.mean()) / (ref.mean() - r.mean()))
    assert 0.4 < share < 0.6
    assert lo < share < hi and hi - lo < 0.2


def run(folder: Path, dtype: str, values: dict[int, list[float]]) -> Path:
    folder.mkdir(parents=True)
    cell = {"data_sha256": "d", "config": {"backbone.name": "smollm2", "backbone.dtype": dtype, "gate.name": "rubric"}}
    metrics = {
        "complete": True,
        "run": {"backbone": "smollm2", "k": 3, "pool": "domain"},
        "fills": {str(fill): {"overall": {}, "per_agent": {"sonnet": {}}} for fill in values},
        "cell": cell,
        "stream": {"accepted": {"sonnet": 2}},
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    rows = [
        {"agent": "sonnet", "test_id": i, "fill": fill, "ref_logprob": v}
        for fill, vs in values.items()
        for i, v in enumerate(vs)
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_the_measures_print_and_runs_under_another_dtype_are_refused(tmp_path, monkeypatch, capsys):
    m = run(tmp_path / "m", "auto", {27: [-3.0, -2.9, -3.1, -3.0], 100: [-2.9, -2.8, -3.0, -2.95]})
    r = run(tmp_path / "r", "auto", {100: [-3.0, -2.9, -3.1, -3.05]})
    ref = run(tmp_path / "ref", "auto", {100: [-2.8, -2.7, -2.9, -2.85]})
    monkeypatch.setattr(sys, "argv", ["mechanism.py", str(m), "--rubric", str(r), "--reference", str(ref)])
    mechanism.main()
    out = capsys.readouterr().out
    assert "| M - R | 4 | +0.100" in out
    assert "(2 admitted)" in out
    assert "| (c) fill 100 vs 27 | 4 |" in out
    assert "| share of the gap closed | 4 | +0.50" in out

    bf16 = run(tmp_path / "bf16", "bfloat16", {100: [-3.0, -2.9, -3.1, -3.05]})
    monkeypatch.setattr(sys, "argv", ["mechanism.py", str(m), "--rubric", str(bf16), "--reference", str(ref)])
    with pytest.raises(SystemExit, match="backbone.dtype"):
        mechanism.main()
