"""The paper's own measure: reference twins (ms.data.reference_twins), ms-report --exclude-tests, and the
BERTScore re-scorer (ms-rescore)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_report import make_run
from test_report_claims_verdicts import claim_rows, paired_predictors

from ms.cli.data import main as data_main
from ms.cli.rescore import main as rescore_main
from ms.data import Example
from ms.data.reference_twins import TWIN_MIN_CHARS, read_test_ids, reference_twins, write_twin_ids
from ms.report import main as report_main
from ms.report import write_report

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "results" / "paper" / "table1_bertscore_clean" / "runs"


def ex(id: str, split: str, question: str, answer: str, agent: str = "riddle") -> Example:
    return Example(id, agent, "logic", question, answer, split)


def test_a_planted_twin_is_found_and_distinct_pairs_are_not():
    long_answer = "A promise: you can break it by not keeping your word, yet nobody can hold one in a hand."
    data = {
        "riddle": [
            ex("s1", "stream", "What can be broken, but is never held?", "A promise."),
            ex("s2", "stream", "What has keys but opens no locks?", long_answer),
            ex("s3", "seed", "What gets wetter the more it dries?", "A towel."),
            # the planted twins: reworded questions, the same reference (one exact, one reworded slightly)
            ex("t1", "test", "Name a thing people break though they never hold it.", "a promise"),
            ex("t2", "test", "What do you break by not keeping it?", long_answer.replace("nobody", "no one")),
            # distinct: a different short answer, and a long one that shares only its opening
            ex("t3", "test", "What runs but never walks?", "A river."),
            ex("t4", "test", "What has a neck but no head?", "A bottle: its narrow top is called a neck."),
        ],
        "pun": [ex("p1", "test", "Why was the calendar sad?", "A promise.", agent="pun")],  # other agent
    }
    twins = {t["id"]: t for t in reference_twins(data)}
    assert set(twins) == {"t1", "t2"}
    assert twins["t1"]["twins"] == [{"id": "s1", "split": "stream", "similarity": 1.0}]
    assert [m["id"] for m in twins["t2"]["twins"]] == ["s2"] and twins["t2"]["twins"][0]["similarity"] < 1


def test_short_references_count_only_when_equal():
    short = "A fire hose."  # under TWIN_MIN_CHARS, one letter apart from the stream's
    assert len(short) < TWIN_MIN_CHARS
    data = {"riddle": [ex("s", "stream", "q one", "A fire hoses."), ex("t", "test", "q two", short)]}
    assert reference_twins(data) == []


def test_validate_lists_twins_and_writes_their_ids(tmp_path, capsys):
    rows = [
        {"id": f"riddle-{i:03d}", "agent": "riddle", "domain": "logic", "question": f"Riddle number {i}?", "answer": a}
        for i, a in enumerate(["A promise.", "A towel.", "A river.", "A promise.", "A clock.", "A map."])
    ]
    splits = ["stream", "seed", "stream", "test", "test", "test"]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "riddle.jsonl").write_text("".join(json.dumps({**r, "split": s}) + "\n" for r, s in zip(rows, splits)))
    ids = tmp_path / "twins.txt"
    assert data_main(["validate", "--data-dir", str(folder), "--twins", str(ids)]) == 0
    out = capsys.readouterr().out
    assert "reference twins in" in out and "riddle-003: A promise.  <- riddle-000 (stream, 1.00)" in out
    assert read_test_ids(ids) == {"riddle-003"}


def test_an_exclusion_pairs_only_the_remaining_questions_and_says_how_many_left(tmp_path):
    k0, k3 = paired_predictors(0.2)
    make_run(tmp_path, "k=0", backbone="smollm2", k=0, questions=20, predict=k0)
    make_run(tmp_path, "k=3", backbone="smollm2", k=3, questions=20, predict=k3)
    ids = write_twin_ids([{"id": "sonnet-0"}, {"id": "riddle-4"}, {"id": "riddle-5"}], tmp_path / "x.txt")
    write_report([tmp_path], tmp_path / "all")
    write_report([tmp_path], tmp_path / "kept", exclude_tests=ids)
    full = claim_rows(tmp_path / "all", "a")[("k = 3 against k = 0", "P")]
    kept = claim_rows(tmp_path / "kept", "a")[("k = 3 against k = 0", "P")]
    assert (full["n"], kept["n"]) == ("180", "177")
    assert float(kept["estimate"]) != pytest.approx(float(full["estimate"]), abs=1e-12)
    summary = (tmp_path / "kept" / "summary.md").read_text()
    assert "## Test questions left out" in summary and "3 test ids listed in" in summary
    assert "| k=3 | 100 | 3 | 177 |" in summary


def test_an_exclusion_file_without_ids_is_one_line_and_writes_nothing(tmp_path, capsys):
    make_run(tmp_path / "runs", "k=0", backbone="smollm2", k=0)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing here\n")
    out = tmp_path / "report"
    assert report_main([str(tmp_path / "runs"), "--out", str(out), "--exclude-tests", str(empty)]) == 2
    assert "no test id in it" in capsys.readouterr().err and not out.exists()


@pytest.mark.slow
def test_the_rescorer_reproduces_the_committed_bertscore_of_a_run(tmp_path):
    """Rescoring a committed run's saved answers with the encoder it was scored with gives its P back."""
    run = next(COMMITTED.glob("*k=0"))
    source = tmp_path / "runs" / run.name
    shutil.copytree(run, source)
    # a quarter of the rows keeps the test quick; the committed P of those rows is the target
    rows = [json.loads(line) for line in (source / "predictions.jsonl").read_text().splitlines()][::4]
    (source / "predictions.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert rescore_main([str(tmp_path / "runs"), "--out", str(tmp_path / "again")]) == 0
    again = [
        json.loads(line) for line in (tmp_path / "again" / run.name / "predictions.jsonl").read_text().splitlines()
    ]
    assert len(again) == len(rows) == 68
    for old, new in zip(rows, again):
        assert new["P"] == pytest.approx(old["P"], abs=1e-5) and new["F1"] == pytest.approx(old["F1"], abs=1e-5)
    metrics = json.loads((tmp_path / "again" / run.name / "metrics.json").read_text())
    assert metrics["bertscore"]["rescored_from"] == str(source) and metrics["bertscore"]["num_layers"] == 6
    mean = sum(r["P"] for r in rows) / len(rows)
    assert metrics["fills"]["0"]["overall"]["P"] == pytest.approx(mean, abs=1e-6)
    assert metrics["fills"]["0"]["overall"]["n"]["P"] == 68


def test_a_ref_logprob_only_run_cannot_be_rescored(tmp_path, capsys):
    run = make_run(tmp_path / "runs", "k=0", backbone="smollm2", k=0)
    assert "answer" not in (run / "predictions.jsonl").read_text()
    assert rescore_main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 2
    assert "no generated answers" in capsys.readouterr().err


def test_the_mpnet_pieces_are_joined_in_order_and_a_wrong_piece_is_named(tmp_path, monkeypatch):
    import hashlib

    from ms.common.errors import UserError
    from ms.metrics.mpnet import Piece, join_pieces

    files = {n: tmp_path / f"piece{n}" for n in (1, 2)}
    files[1].write_bytes(b"first half,")
    files[2].write_bytes(b" second half")
    monkeypatch.setattr(Piece, "path", lambda self: files[self.number])
    sha = {n: hashlib.sha256(f.read_bytes()).hexdigest() for n, f in files.items()}
    whole = hashlib.sha256(b"first half, second half").hexdigest()
    join_pieces((Piece(1, sha[1]), Piece(2, sha[2])), tmp_path / "joined", whole)
    assert (tmp_path / "joined").read_bytes() == b"first half, second half"
    with pytest.raises(UserError, match=r"piece 2 .* has SHA-256 .*pip install --force-reinstall"):
        join_pieces((Piece(1, sha[1]), Piece(2, sha[1])), tmp_path / "again", whole)
    with pytest.raises(UserError, match="the joined archive"):
        join_pieces((Piece(1, sha[1]), Piece(2, sha[2])), tmp_path / "third", "0" * 64)
