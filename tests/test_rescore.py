"""ms-rescore (ms.cli.rescore) edits a run's record, not where its numbers come from: rescoring a committed
run with a scorer that replays the answers' scores of its committed rescored copy writes that copy again,
byte for byte (metrics.json and predictions.jsonl). The encoder itself is tested in test_paper_measure."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ms.cli.rescore import rescore_run

REPO = Path(__file__).resolve().parent.parent
RESCORED = sorted(p.parent for p in REPO.glob("results/**/metrics.json") if '"rescored_from"' in p.read_text())


class Replay:
    """The P, R and F1 a committed rescored copy holds, row by row, and the encoder it names."""

    def __init__(self, copy: Path):
        self.rows = [json.loads(line) for line in (copy / "predictions.jsonl").read_text().splitlines()]
        described = json.loads((copy / "metrics.json").read_text())["bertscore"]
        self.described = {key: value for key, value in described.items() if key != "rescored_from"}
        self.cfg = SimpleNamespace(model="mpnet")

    def score(self, answers: list[str], references: list[str]) -> list[tuple[float, float, float]]:
        answered = [row for row in self.rows if "answer" in row]
        assert [row["answer"] for row in answered] == answers
        return [(row["P"], row["R"], row["F1"]) for row in answered]

    def describe(self) -> dict:
        return dict(self.described)


def test_there_are_committed_rescored_runs_whose_source_is_committed():
    assert sum((REPO / _source(copy)).is_dir() for copy in RESCORED) >= 2


@pytest.mark.parametrize("copy", RESCORED, ids=lambda p: str(p.relative_to(REPO / "results")))
def test_rescoring_a_committed_run_writes_its_committed_rescored_copy(copy, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # rescored_from names the source relative to the repository
    source = _source(copy)
    if not source.is_dir():
        pytest.skip(f"{source} is no longer committed under that name")
    rescore_run(source, tmp_path / "copy", Replay(copy))
    for name in ("metrics.json", "predictions.jsonl"):
        assert (tmp_path / "copy" / name).read_bytes() == (copy / name).read_bytes(), name


def _source(copy: Path) -> Path:
    """The run the copy was rescored from, as ms-rescore was given it: relative to the repository."""
    return Path(json.loads((copy / "metrics.json").read_text())["bertscore"]["rescored_from"])
