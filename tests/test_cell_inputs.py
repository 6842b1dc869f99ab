"""A finished run is reused only if nothing it read has changed (ms.loop.inputs): its rubric files, its
access rule's file, the decisions a matched random gate copies, the model files it loads, and the
code. Each change below is made to a tiny finished run's inputs; the same command is then refused in
one line before any model loads, and no file of the finished run changes."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO, compose_config
from test_cell import TINY, folder_state

from ms.loop import inputs
from ms.loop.cell import input_settings, record
from ms.loop.inputs import changed_inputs, code_sha256, inputs_record

RIDDLE_DOMAIN_RUBRIC = REPO / "conf" / "rubric" / "logic.yaml"


def edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_code_hash_follows_the_source_a_run_executes_and_not_the_report(tmp_path):
    package = tmp_path / "ms"
    shutil.copytree(REPO / "ms", package, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_sha256(package)
    edit(package / "report" / "cli.py", "\n", "\n# a comment in the report\n")
    assert code_sha256(package) == before  # the report reads finished runs: it changes no number
    edit(package / "gates" / "scorer.py", "Add up the points", "Sum the points")
    assert code_sha256(package) != before


def test_a_file_is_hashed_again_only_when_its_size_or_time_moves(tmp_path, monkeypatch):
    rubric = tmp_path / "riddle.yaml"
    shutil.copy(RIDDLE_DOMAIN_RUBRIC, rubric)
    settings = input_settings(compose_config([*TINY, f"agents.riddle.rubric={rubric}"]))
    first = inputs_record(settings)
    assert first["rubric riddle"]["sha256"] and first["rubric riddle"]["path"] == str(rubric.resolve())
    monkeypatch.setattr(inputs, "file_sha256", lambda path: pytest.fail(f"{path} was read again"))
    assert inputs_record(settings, known=first) == first  # same path, size and time: the recorded hash
    monkeypatch.undo()
    edit(rubric, "points", "pts")
    assert changed_inputs(inputs_record(settings, known=first), first) == ["rubric riddle"]


def test_a_record_older_than_the_inputs_resumes_as_before(tmp_path):
    from ms.loop.cell import check_same_cell

    cfg = compose_config(TINY)
    old = record(cfg, "aaa")
    del old["inputs"], old["code_sha256"]
    assert check_same_cell(tmp_path, {"complete": True, "cell": old}, cfg, "aaa") is None


def test_a_run_accepted_for_other_code_resumes_under_that_code_without_the_flag(tmp_path):
    from ms.common.errors import UserError
    from ms.loop.cell import check_same_cell
    from ms.loop.provenance_record import CellRecord

    cfg = compose_config(TINY)
    made = {**record(cfg, "aaa"), "code_sha256": "0" * 64}  # made by other code, accepted for none yet
    with pytest.raises(UserError, match="accept_code_change=true"):
        check_same_cell(tmp_path, {"complete": True, "cell": made}, cfg, "aaa")
    here = check_same_cell(
        tmp_path, {"complete": True, "cell": made}, compose_config([*TINY, "accept_code_change=true"]), "aaa"
    )
    assert here == code_sha256()
    accepted = CellRecord.from_json(made).accepting(here).to_json()
    assert list(accepted) == [*made, "accepted_code"] and accepted["accepted_code"] == [here]
    assert check_same_cell(tmp_path, {"complete": True, "cell": accepted}, cfg, "aaa") is None


@pytest.mark.slow
def test_a_finished_run_is_refused_after_any_file_it_read_changes(tmp_path, ms_run, monkeypatch):
    """The issue's reproduction, one input at a time: a rubric's criterion, the access rule's grants,
    the matched run's decisions, the retriever's encoder weights, and the scorer's prompt in the code."""
    from ms.retrieval.encoder import packaged_model_dir

    package = tmp_path / "ms"  # the code the runs are recorded as made by
    shutil.copytree(REPO / "ms", package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(inputs, "PACKAGE_DIR", package)
    rubric = tmp_path / "logic.yaml"
    shutil.copy(RIDDLE_DOMAIN_RUBRIC, rubric)
    rule = tmp_path / "rule.yaml"
    rule.write_text("grants:\n  limerick: [limerick, seed]\n  riddle: all\n", encoding="utf-8")
    encoder = tmp_path / "encoder"
    shutil.copytree(packaged_model_dir(), encoder)
    run = [
        *TINY,
        f"agents.riddle.rubric={rubric}",
        "access=rule",
        f"access.file={rule}",
        "retriever=dense_frozen",  # the encoder is read all the same; memory train is no input
        f"retriever.encoder={encoder}",
    ]

    code, err = ms_run(*run)
    assert code == 0, err[-20:]
    folder = tmp_path / "run"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert {"rubric logic", "rubric literary", "access.file"} <= set(metrics["cell"]["inputs"])
    assert any(label.startswith("encoder retriever: ") for label in metrics["cell"]["inputs"])
    assert any(label.startswith("model smollm2: ") for label in metrics["cell"]["inputs"])
    before = folder_state(folder)

    def refused(label: str, *extra: str) -> list[str]:
        code, lines = ms_run(*run, *extra)
        assert code == 2 and len(lines) == 1, lines[-20:]
        assert str(folder) in lines[0] and label in lines[0], lines[0]
        assert folder_state(folder) == before
        return lines

    def restored(path, text):
        path.write_text(text, encoding="utf-8")
        assert ms_run(*run)[0] == 0  # the same file again: the same cell, skipped

    text = rubric.read_text(encoding="utf-8")
    edit(rubric, "rewards:", "rewards: only riddles that rhyme;")
    refused("rubric logic")
    restored(rubric, text)

    text = rule.read_text(encoding="utf-8")
    edit(rule, "riddle: all", "riddle: [seed]")
    refused("access.file")
    restored(rule, text)

    [weights] = [p for p in encoder.rglob("*.safetensors")]
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    refused("encoder retriever: ")
    weights.write_bytes(original)

    edit(package / "gates" / "scorer.py", "Add up the points", "Sum the points")
    [line] = refused("the ms package's source")
    assert "accept_code_change=true" in line
    code, _ = ms_run(*run, "accept_code_change=true")  # deliberately: skipped, and the run says so
    assert code == 0
    accepted = json.loads((folder / "metrics.json").read_text())["cell"]["accepted_code"]
    assert accepted == [code_sha256(package)]
    assert ms_run(*run)[0] == 0  # accepted once, for this code: resumes from then on


@pytest.mark.slow
def test_a_matched_random_run_is_refused_after_its_matched_decisions_change(tmp_path, ms_run):
    # One agent's decisions are enough to match; memory train is no part of matching them.
    riddles = ["data.agents=[riddle]", *TINY[1:], "retriever=dense_frozen"]
    code, err = ms_run(*riddles)
    assert code == 0, err[-20:]
    matched = tmp_path / "matched"
    shutil.move(tmp_path / "run", matched)
    control = [*riddles, "gate=random", f"gate.match={matched}"]
    code, err = ms_run(*control)
    assert code == 0, err[-20:]
    before = folder_state(tmp_path / "run")

    with (matched / "decisions.jsonl").open("a", encoding="utf-8") as f:
        f.write("\n")  # the same decisions, another file: the record cannot tell, so it refuses
    code, lines = ms_run(*control)
    assert code == 2 and len(lines) == 1 and "gate.match's decisions" in lines[0], lines
    assert folder_state(tmp_path / "run") == before
