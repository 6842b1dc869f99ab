"""The paper's data and protocol: the importer reads the authors' agent blocks, the hygiene report
finds duplicates and leaks, data=paper composes, and protocol=paper stores the whole prompt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_config

from ms.data import (
    DataError,
    Example,
    drop_leaked_tests,
    hygiene_report,
    import_paper,
    load_dir,
    load_splits,
    write_dir,
)
from ms.data.segment import MixedFile, decide

PAPER_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "paper_repo"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The fixture imported once, with its clean variant: (folder, report)."""
    out = tmp_path_factory.mktemp("paper")
    return out, import_paper(PAPER_FIXTURE, out / "data", out / "clean")


# ---- agent blocks ----------------------------------------------------------------------------


def test_the_block_structure_overrides_weak_content_and_lists_its_doubts():
    candidates = ("puzzle", "riddle", "pun")
    truth = ["pun"] * 5 + ["riddle"] * 5 + ["puzzle"] * 5
    evidence = np.array([[3.0 if c == agent else 0.0 for c in candidates] for agent in truth])
    evidence[1] = [40.0, 0.0, 0.0]  # decisive content: an outlier keeps its own agent
    evidence[7] = [0.0, 0.0, 2.0]  # inside the riddle block, the content reads like a pun
    evidence[12] = [0.0, 0.0, 0.0]  # no content evidence at all
    evidence[14] = [0.0, 0.0, 2.5]  # the last puzzle reads like a pun, but the pun block is over
    [decisions] = decide([MixedFile("f", candidates, [f"q{i}" for i in range(15)], evidence)])

    assert [d.agent for d in decisions] == truth[:1] + ["puzzle"] + truth[2:]
    assert decisions[7].unsure and decisions[7].runner_up == "pun" and "content points to pun" in decisions[7].why
    assert decisions[14].agent == "puzzle" and decisions[14].runner_up == "pun"
    assert decisions[12].agent == "puzzle" and not decisions[12].unsure
    assert not any(decisions[i].unsure for i in (0, 2, 3, 6, 8, 11))


def test_a_copy_in_another_file_settles_a_record_at_a_block_edge():
    candidates = ("riddle", "pun")
    edge = np.array([[0.0, 3.0]] * 3 + [[1.0, 0.0]] + [[3.0, 0.0]] * 3)  # row 3: the last pun, reads as riddle
    middle = np.array([[0.0, 3.0]] * 2 + [[1.0, 0.0]] + [[0.0, 3.0]] * 2)  # the same record inside pun
    questions = [f"e{i}" for i in range(7)]
    alone = decide([MixedFile("edge", candidates, questions, edge)])[0]
    assert alone[3].agent == "riddle"
    together = decide(
        [
            MixedFile("edge", candidates, questions, edge),
            MixedFile("middle", candidates, ["m0", "m1", "e3", "m3", "m4"], middle),
        ]
    )
    assert together[0][3].agent == "pun" and together[1][2].agent == "pun"


def test_import_reads_the_fixtures_blocks(imported):
    out, report = imported
    blocks = {name: row.get("blocks") for name, row in report["files"].items()}
    assert blocks["Literal Creation/LiteralPool.jsonl"] == [["wuyanlvshi", 1, 1], ["sonnet", 2, 2], ["limerick", 3, 4]]
    assert blocks["Literal Creation/Literalproblem.jsonl"] == [["limerick", 1, 1], ["wuyanlvshi", 2, 2]]
    assert blocks["plan generation/PlanPool.jsonl"] == [["travel", 1, 1], ["fitness", 2, 2], ["study", 3, 3]]
    assert blocks["Logic Problem_Solving/LogicPool.jsonl"][0] == ["riddle", 1, 1]
    # "Describe the colour of silence." has nothing of a limerick but its place after one.
    silence = [u for u in report["unsure"] if (u["file"], u["line"]) == ("Literal Creation/LiteralPool.jsonl", 4)]
    assert silence and silence[0]["agent"] == "limerick" and silence[0]["runner_up"] not in (None, "limerick")
    assert all(u["runner_up"] and u["runner_up"] != u["agent"] and u["line"] >= 1 for u in report["unsure"])

    counts = report["counts"]  # test file names: lvshi, Limerick, puns, riddles, Puzzle
    assert [counts[a]["test"] for a in ("wuyanlvshi", "limerick", "pun", "riddle", "puzzle")] == [1, 1, 2, 3, 1]
    assert counts["wuyanlvshi"] == {"seed": 1, "stream": 1, "test": 1}
    assert report["onepool_counts"]["sonnet"] == {"seed": 1, "stream": 0, "test": 1}
    assert report["onepool_counts"]["travel"]["stream"] == 1
    assert report["copies_agree"] == {"copies": 2, "same_agent": 2}
    assert any("scores.jsonl" in s for s in report["skipped_files"])

    domain, single = load_dir(out / "data"), load_dir(out / "data" / "onepool")
    records = sum(row["records"] for row in report["files"].values())
    assert sum(map(len, domain.values())) + sum(map(len, single.values())) + report["unassigned"] == records
    saved = json.loads((out / "data" / "import_report.json").read_text())
    assert saved == {k: v for k, v in report.items() if k != "hygiene"}


def test_the_import_command_prints_each_file_and_the_records_it_is_unsure_of(tmp_path, capsys):
    from ms.cli.data import main

    assert main(["import-paper", str(PAPER_FIXTURE), str(tmp_path / "data")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "data" / "import_report.json").read_text())
    assert "Literal Creation/LiteralPool.jsonl" in printed and "limerick 2" in printed
    assert f"imported {report['total']} records into {tmp_path / 'data'}" in printed
    assert f"{len(report['unsure'])} unsure" in printed and "2 of 2 OnePool copies" in printed
    assert "  unsure: Literal Creation/LiteralPool.jsonl:4 -> limerick" in printed


# ---- hygiene -----------------------------------------------------------------------------------


def planted() -> dict[str, list[Example]]:
    def ex(agent, n, split, question, answer="An answer."):
        domain = {"riddle": "logic", "pun": "logic", "sonnet": "literary"}[agent]
        return Example(f"{agent}-{n}", agent, domain, question, answer, split)

    return {
        "riddle": [
            ex("riddle", 1, "seed", "What has keys but can't open a single lock?", "A piano."),
            ex("riddle", 2, "stream", "What gets wetter as it dries?", "A towel."),
            ex("riddle", 3, "stream", "Why is the sky blue at noon?", ""),
            ex("riddle", 4, "test", "What has keys but can’t open a  single lock?", "A piano."),
            ex("riddle", 5, "test", "gets wetter as it dries?", "A towel."),
            ex("riddle", 6, "test", "Where does today come before yesterday?", "The dictionary."),
            ex("riddle", 7, "test", "Where does today come before yesterday?", "The dictionary."),
            ex("riddle", 8, "test", "What has a neck but no head?", "A bottle."),
        ],
        "pun": [
            ex("pun", 1, "seed", "What has keys but can't open a single lock?", "A piano."),
            ex("pun", 2, "test", "Why was the equal sign so happy?", "It found its balance."),
            ex("pun", 3, "seed", "Why was the equal sign so humble?", "It was never less than anyone."),
        ],
        "sonnet": [ex("sonnet", 1, "test", "Write a sonnet on rain.", "Line one\nLine two\nLine three")],
    }


def test_hygiene_finds_planted_duplicates_and_leaks():
    data = planted()
    report = hygiene_report(data)
    leak = report["leaks"]["riddle"]
    assert (leak["leaked"], leak["in_seed"], leak["in_stream"]) == (2, 1, 1)
    kinds = {x["id"]: {m["kind"] for m in x["matches"]} for x in leak["items"]}
    assert kinds == {"riddle-4": {"exact"}, "riddle-5": {"near"}}
    assert "pun" not in report["leaks"]  # one question pattern, another pun: not a duplicate
    assert report["repeated_tests"] == {"riddle": 1}
    assert report["kept_tests"]["riddle"] == {"test": 5, "leaked": 2, "repeated": 1, "kept": 2}
    by_splits = report["duplicates"]["by_splits"]
    assert by_splits["seed-seed"] == {"exact": 1, "across agents": 1}
    assert by_splits["test-test"]["exact"] == 1 and by_splits["stream-test"]["near"] == 1
    assert report["empty_answers"] == {"riddle": {"stream": 1}}
    assert [f["id"] for f in report["form_failures"]["sonnet"]] == ["sonnet-1"]

    clean = drop_leaked_tests(data, report)
    assert [e.id for e in clean["riddle"]] == ["riddle-1", "riddle-2", "riddle-3", "riddle-6", "riddle-8"]
    assert clean["pun"] == data["pun"]
    again = hygiene_report(clean)
    assert not again["leaks"] and not again["repeated_tests"]


def test_ms_data_validate_writes_the_clean_variant(tmp_path, capsys):
    from ms.cli.data import main

    write_dir(tmp_path / "leaky", planted())
    assert (
        main(
            [
                "validate",
                "--data-dir",
                str(tmp_path / "leaky"),
                "--report",
                str(tmp_path),
                "--drop-leaked-tests",
                str(tmp_path / "clean"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "riddle 2/5" in out and "pun 1/1" in out
    clean = load_dir(tmp_path / "clean")
    assert sum(e.split == "test" for e in clean["riddle"]) == 2
    assert json.loads((tmp_path / "hygiene.json").read_text())["leaks"]["riddle"]["leaked"] == 2
    assert not json.loads((tmp_path / "clean" / "hygiene.json").read_text())["leaks"]


def test_import_reports_the_fixtures_leak_and_writes_the_clean_variant(imported):
    out, report = imported
    # "Here is a riddle: what runs but never walks?" is a riddle test item and a pool item.
    leak = report["hygiene"]["."]["leaks"]["riddle"]
    assert leak["leaked"] == 1 and leak["in_seed"] == 1
    assert (out / "data" / "hygiene.json").is_file() and (out / "clean" / "onepool" / "hygiene.json").is_file()
    clean, leaky = load_dir(out / "clean"), load_dir(out / "data")
    assert [sum(e.split == "test" for e in d["riddle"]) for d in (leaky, clean)] == [3, 2]
    assert [e for e in clean["riddle"] if e.split != "test"] == [e for e in leaky["riddle"] if e.split != "test"]


# ---- data=paper and protocol=paper -------------------------------------------------------------


def test_data_paper_composes_and_keeps_the_papers_split(imported, tmp_path):
    from ms.loop.validation import problems

    out, report = imported
    cfg = compose_config(["data=paper"])
    assert cfg.data.dir == ".cache/paper_data"
    assert cfg.data.created_by.startswith("ms-data import-paper ") and cfg.data.created_by.endswith(
        " .cache/paper_data"
    )
    assert compose_config([]).data.dir == "data" and compose_config(["data=ours"]).data.created_by is None

    cfg = compose_config(["data=paper", f"data.dir={out / 'data'}", "data.agents=[riddle,pun,travel]"])
    splits = load_splits(cfg.data)
    for agent, parts in splits.items():
        assert [len(parts.seed), len(parts.stream), len(parts.test)] == list(report["counts"][agent].values())

    missing = compose_config(["data=paper", f"data.dir={tmp_path / 'nowhere'}"])
    with pytest.raises(DataError, match=r"nowhere: no such folder; create it with: ms-data import-paper .*nowhere"):
        load_splits(missing.data)
    assert any("create it with: ms-data import-paper" in p for p in problems(missing))


def test_protocol_paper_wins_over_the_experiment_it_is_combined_with():
    default = compose_config(["experiment=offline"])
    paper = compose_config(["experiment=offline", "protocol=paper"])
    assert (default.train.candidates, default.memory.question, default.prompt.system) == (4, "query", True)
    assert (paper.train.candidates, paper.train.labelled, paper.train.label_method) == (10, 6, "verbalized")
    assert paper.memory.question == "prompt" and paper.prompt.system is False
    assert "{query}" in paper.train.verbalized_prompt and "probability" in paper.train.verbalized_prompt
    assert compose_config(["protocol=ours"]) == compose_config([])


@pytest.mark.slow
def test_protocol_paper_stores_the_whole_prompt_as_the_memorys_question(tmp_path, models_cache):
    from test_pipeline import TINY

    from ms.loop.pipeline import run
    from ms.pool import Pool

    # One stream question, two candidates to label, one fill evaluated by ref_logprob: the stream's
    # memory and memory train's verbalized labels are what this reads.
    # 24 tokens, not TINY's 8: the paper's prompt asks for an answer after the examples, and 8 tokens end
    # before one is given, so nothing would be admitted to read.
    cfg = compose_config(
        [o for o in TINY if not o.startswith("backbone.generation.max_new_tokens=")]
        + [
            "backbone.generation.max_new_tokens=24",
            f"cache_dir={models_cache}",
            "protocol=paper",
            "data.agents=[riddle]",
            "fills=[100]",
            "data.max_stream=1",
            "train.candidates=2",
            "eval.metrics=[ref_logprob]",
        ]
    )
    metrics = run(cfg, tmp_path)
    assert metrics["run"]["label_method"] == "verbalized"
    stream = [m for m in Pool(tmp_path / "pool.sqlite").memories("logic") if m.origin == "stream"]
    assert stream, "scorer.threshold=0 admits every stream answer"
    questions = {e.question for e in load_splits(cfg.data)["riddle"].stream}
    asked = [json.loads(line)["question"] for line in (tmp_path / "decisions.jsonl").open()]
    for memory in stream:
        # The retrieved examples, then the question (the last instruction: an example may itself be
        # an earlier stream memory's whole prompt).
        head, _, query = memory.question.rpartition(
            " | | Now, based on these question and answer, what is the answer of question:"
        )
        assert query in questions and "->" in head
        assert memory.question in asked  # the scorer graded the same text
