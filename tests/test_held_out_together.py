"""experiments/held_out_together.py --across: the held-out families of several checks of one grader pooled
against their shared good pairs, ranked together, and refused where the checks' good pairs differ."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from ms.data.load import write_jsonl
from ms.gates.check_pooled import pooled_auc, read_check
from ms.gates.check_report import DECISIONS

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("held_out_together", REPO / "experiments" / "held_out_together.py")
together = importlib.util.module_from_spec(spec)
sys.modules["held_out_together"] = together
spec.loader.exec_module(together)

GATE = "rubric_genre_ranked"


def _row(pair: int, kind: str, rng: np.random.Generator) -> dict:
    passed = bool(rng.integers(0, 2))
    return {
        "agent": "riddle",
        "seed_id": pair,
        "kind": kind,
        "score": float(rng.integers(0, 40)),
        "accepted": bool(rng.integers(0, 2)),
        "genre_test": {"d": round(float(rng.normal()), 3), "passed": passed},
    }


def _check(folder: Path, good: list[dict], kind: str, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    rows = good + [_row(p, kind, rng) for p in range(12) for _ in range(2)]
    folder.mkdir(parents=True)
    write_jsonl(folder / DECISIONS, rows)
    return folder


def test_each_family_pooled_across_checks_keeps_its_own_auc_and_the_good_pairs_count_once(tmp_path):
    rng = np.random.default_rng(0)
    good = [_row(p, "good", rng) for p in range(12)]
    first = _check(tmp_path / "a", good, "model_praise", 1)
    second = _check(tmp_path / "b", good, "seventh_praise", 2)
    rows = together.scored_across([first, second], GATE)
    assert sum(r.kind == "good" for r in rows) == 12
    for folder, kind in ((first, "model_praise"), (second, "seventh_praise")):
        alone = pooled_auc(read_check(folder, GATE), (kind,))
        assert pooled_auc(rows, (f"{kind} ({folder})",)) == pytest.approx(alone)
    # Against one good set, the pool's AUC is the families' AUCs weighted by their rows (24 each here).
    each = [pooled_auc(rows, (k,))[0] for k in (f"model_praise ({first})", f"seventh_praise ({second})")]
    both = pooled_auc(rows, (f"model_praise ({first})", f"seventh_praise ({second})"))
    assert both[0] == pytest.approx(sum(each) / 2)
    assert both[1] <= both[0] <= both[2]


def test_checks_whose_good_pairs_differ_are_refused_by_name(tmp_path):
    rng = np.random.default_rng(0)
    good = [_row(p, "good", rng) for p in range(12)]
    other = [dict(r, score=r["score"] + 1) for r in good]
    first = _check(tmp_path / "a", good, "model_praise", 1)
    second = _check(tmp_path / "b", other, "model_praise", 2)
    with pytest.raises(SystemExit, match=f"{second}: its good rows differ"):
        together.rows_across([first, second])


def test_a_folder_without_decisions_is_named(tmp_path):
    with pytest.raises(SystemExit, match=f"{tmp_path / DECISIONS}: .*name a gate-check output folder"):
        together.rows_across([tmp_path])


def test_a_line_that_is_not_json_is_named(tmp_path):
    (tmp_path / DECISIONS).write_text('{"kind": "good"}\nnot json\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=f"{tmp_path / DECISIONS} line 2: not JSON"):
        together.rows_across([tmp_path])
