"""Datasets: schema errors point at file and line, splits are deterministic and per agent, the
paper importer reports malformed lines, and the project's own data keeps its forms."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ms.agents import default_agents
from ms.data import (
    DataConfig,
    DataError,
    Example,
    HFDataConfig,
    form_problem,
    import_paper,
    load_dir,
    load_hf,
    load_jsonl,
    load_splits,
    split_examples,
)

AGENTS = default_agents()

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
PAPER_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "paper_repo"


def row(i: int, agent: str = "sonnet", **changes) -> dict:
    record = {
        "id": f"{agent}-{i:03d}",
        "agent": agent,
        "domain": AGENTS[agent].domain,
        "question": f"Question {i} for {agent}?",
        "answer": f"Answer {i}.",
    }
    record.update(changes)
    return record


def write_jsonl(path: Path, lines: list) -> Path:
    """`lines` holds dicts (written as JSON) or raw strings (written as they are)."""
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines), encoding="utf-8")
    return path


def examples(n: int, agent: str = "sonnet") -> list[Example]:
    return [Example(**row(i, agent)) for i in range(n)]


# ---- loading and validation -------------------------------------------------------------------

BAD_LINES = {
    "malformed JSON": ('{"id": "sonnet-009", "agent": ', "malformed JSON"),
    "missing field": ({k: v for k, v in row(9).items() if k != "answer"}, "missing field(s) answer"),
    "empty answer": (row(9, answer="  "), "field 'answer' is empty"),
    "non-string question": (row(9, question=["a", "list"]), "field 'question' must be a string"),
    "unknown agent": ({**row(9), "agent": "haiku"}, "unknown agent 'haiku'"),
    "domain mismatch": (row(9, domain="plan"), "does not match agent 'sonnet'"),
    "duplicate id": (row(0), "duplicate id 'sonnet-000' (first on line 1)"),
    "unknown field": (row(9, anwser="typo"), "unknown field(s) anwser"),
    "bad split": (row(9, split="train"), "split must be one of"),
}


@pytest.mark.parametrize("bad, message", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_schema_errors_name_file_and_line(tmp_path, bad, message):
    # The blank line 2 must still count, so the bad record is reported on line 4.
    path = write_jsonl(tmp_path / "sonnet.jsonl", [row(0), "", row(1), bad, row(2)])
    with pytest.raises(DataError) as err:
        load_jsonl(path)
    assert f"{path}:4:" in str(err.value)
    assert message in str(err.value)


def test_valid_file_loads_every_line_in_order(tmp_path):
    path = write_jsonl(tmp_path / "sonnet.jsonl", [row(i) for i in range(5)])
    loaded = load_jsonl(path)
    assert [e.id for e in loaded] == [f"sonnet-{i:03d}" for i in range(5)]
    assert loaded[0] == Example(**row(0))


def test_empty_answer_is_allowed_only_for_stream_items(tmp_path):
    path = write_jsonl(tmp_path / "sonnet.jsonl", [row(0, split="seed"), row(1, answer="", split="stream")])
    assert [e.split for e in load_jsonl(path)] == ["seed", "stream"]
    write_jsonl(path, [row(0, split="seed"), row(1, answer="", split="test")])
    with pytest.raises(DataError, match=r"sonnet\.jsonl:2: field 'answer' is empty"):
        load_jsonl(path)


def test_load_dir_rejects_missing_file_and_foreign_agent(tmp_path):
    write_jsonl(tmp_path / "sonnet.jsonl", [row(0), row(1)])
    with pytest.raises(DataError, match=r"limerick\.jsonl: missing"):
        load_dir(tmp_path, ["sonnet", "limerick"])
    write_jsonl(tmp_path / "limerick.jsonl", [row(0, "limerick"), row(1, "sonnet")])
    with pytest.raises(DataError, match=r"limerick\.jsonl:2: agent 'sonnet' in the file of agent 'limerick'"):
        load_dir(tmp_path, ["sonnet", "limerick"])


def test_load_hf_maps_columns_of_a_local_csv(tmp_path):
    path = tmp_path / "jokes.csv"
    path.write_text(
        'prompt,reply\n"Why was six afraid?","Seven ate nine."\n"A pun, please","Lettuce in."\n', encoding="utf-8"
    )
    loaded = load_hf(str(path), question="prompt", answer="reply", agent="pun")
    assert [(e.question, e.answer, e.agent, e.domain) for e in loaded] == [
        ("Why was six afraid?", "Seven ate nine.", "pun", "logic"),
        ("A pun, please", "Lettuce in.", "pun", "logic"),
    ]
    assert len({e.id for e in loaded}) == 2


def test_load_hf_reads_the_agent_from_a_column_of_local_json(tmp_path):
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"q": "Plan a week in Rome.", "a": "Day 1...", "who": "travel"},
            {"q": "A riddle?", "a": "An echo.", "who": "riddle"},
        ],
    )
    loaded = load_hf(str(path), question="q", answer="a", agent_column="who")
    assert [(e.agent, e.domain) for e in loaded] == [("travel", "plan"), ("riddle", "logic")]


def test_load_hf_missing_column_lists_the_columns(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"q": "Q?", "a": "A."}])
    with pytest.raises(DataError, match=r"no column\(s\) question; its columns are: q, a"):
        load_hf(str(path), question="question", answer="a", agent="pun")


def test_load_hf_rejects_empty_cells_with_their_row(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"q": "Q?", "a": "A."}, {"q": "Q2?", "a": ""}])
    with pytest.raises(DataError, match=r"row 2: field 'answer' is empty"):
        load_hf(str(path), question="q", answer="a", agent="pun")


# ---- splits ----------------------------------------------------------------------------------


def ids(part: list[Example]) -> list[str]:
    return [e.id for e in part]


def test_split_is_deterministic_and_depends_on_the_seed():
    data = examples(50)
    first, again = split_examples(data, seed=0), split_examples(list(reversed(data)), seed=0)
    assert (ids(first.seed), ids(first.stream), ids(first.test)) == (
        ids(again.seed),
        ids(again.stream),
        ids(again.test),
    )
    other = split_examples(data, seed=1)
    assert set(ids(first.test)) != set(ids(other.test))


def test_split_parts_are_disjoint_cover_everything_and_follow_the_fractions():
    data = examples(64)
    parts = split_examples(data)
    seed, stream, test = set(ids(parts.seed)), set(ids(parts.stream)), set(ids(parts.test))
    assert not (seed & stream or seed & test or stream & test)
    assert seed | stream | test == set(ids(data))
    assert (len(seed), len(stream), len(test)) == (13, 26, 25)


@pytest.mark.parametrize("fractions", [(0.2, 0.4, 0.3), (0.5, 0.5), (1.2, -0.1, -0.1)])
def test_fractions_must_be_three_non_negative_parts_of_one(fractions):
    with pytest.raises(ValueError, match="summing to 1"):
        split_examples(examples(10), fractions)


def test_examples_with_a_split_keep_it():
    fixed = [Example(**row(i, split="test")) for i in range(10)]
    free = [Example(**row(i)) for i in range(100, 105)]
    parts = split_examples(fixed + free, fractions=(1.0, 0.0, 0.0))
    assert parts.test == fixed and sorted(ids(parts.seed)) == ids(free) and not parts.stream


def test_an_agents_split_ignores_other_agents_files(tmp_path):
    write_jsonl(tmp_path / "sonnet.jsonl", [row(i) for i in range(40)])
    write_jsonl(tmp_path / "pun.jsonl", [row(i, "pun") for i in range(40)])
    cfg = DataConfig(dir=str(tmp_path), agents=["sonnet", "pun"])
    before = load_splits(cfg)["sonnet"]
    write_jsonl(tmp_path / "pun.jsonl", [row(i, "pun") for i in range(7, 90)])
    after = load_splits(cfg)
    assert after["sonnet"] == before
    assert len(after["pun"].test) != len(before.test)


def test_load_splits_takes_a_structured_config_and_caps_each_part(tmp_path):
    write_jsonl(tmp_path / "sonnet.jsonl", [row(i) for i in range(30)])
    cfg = OmegaConf.structured(DataConfig(dir=str(tmp_path), agents=["sonnet"], max_seed=2, max_test=3))
    full = load_splits(DataConfig(dir=str(tmp_path), agents=["sonnet"]))["sonnet"]
    capped = load_splits(cfg)["sonnet"]
    assert capped.seed == full.seed[:2] and capped.test == full.test[:3] and capped.stream == full.stream


def test_load_splits_reads_a_hf_dataset_when_configured(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"q": f"Q{i}?", "a": f"A{i}."} for i in range(10)])
    cfg = DataConfig(hf=HFDataConfig(name=str(path), question="q", answer="a", agent="riddle"))
    splits = load_splits(cfg)
    assert list(splits) == ["riddle"]
    assert [len(p) for p in (splits["riddle"].seed, splits["riddle"].stream, splits["riddle"].test)] == [2, 4, 4]


# ---- importer of the authors' repository -----------------------------------------------------

# Agent blocks, hygiene and the clean variant: tests/test_paper.py.


def test_import_paper_reports_a_malformed_line(tmp_path):
    source = tmp_path / "repo"
    shutil.copytree(PAPER_FIXTURE, source)
    puns = source / "Logic Problem_Solving" / "punsTest.jsonl"
    puns.write_text(puns.read_text(encoding="utf-8") + '{"messages": [{"role": "user"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"punsTest\.jsonl:3: malformed JSON"):
        import_paper(source, tmp_path / "out")


# ---- forms -----------------------------------------------------------------------------------


def test_form_problem_catches_broken_forms():
    sonnet = Example(**row(0, answer="\n".join(["a line"] * 13)))
    limerick = Example(**row(0, "limerick", answer="\n".join(["a line"] * 5)))
    lvshi = Example(**row(0, "wuyanlvshi", answer="\n".join(["春风吹绿柳，"] * 7 + ["春风吹绿柳树，"])))
    assert "13 lines" in form_problem(sonnet)
    assert form_problem(limerick) is None
    assert "8 lines" in form_problem(lvshi)
    assert form_problem(Example(**row(0, "pun", answer="short"))) is None


# ---- the project's own data ------------------------------------------------------------------


def real_examples(agent: str) -> list[Example]:
    path = DATA_DIR / f"{agent}.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} does not exist yet")
    return load_jsonl(path, agent=agent)


@pytest.mark.parametrize("agent", list(AGENTS))
def test_real_data_loads_with_enough_pairs(agent):
    assert len(real_examples(agent)) >= 60


@pytest.mark.parametrize("agent", ["sonnet", "limerick", "wuyanlvshi"])
def test_real_data_keeps_its_form(agent):
    broken = {e.id: problem for e in real_examples(agent) if (problem := form_problem(e))}
    assert not broken


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder(device="cpu")


@pytest.mark.parametrize("agent", list(AGENTS))
def test_real_data_has_no_near_duplicate_questions(agent, encoder):
    data = real_examples(agent)
    # MiniLM's vocabulary maps most Chinese characters to [UNK], so exact repeats are checked apart.
    normalized = Counter(" ".join(e.question.split()).lower() for e in data)
    assert not [q for q, n in normalized.items() if n > 1]
    vectors = encoder.encode([e.question for e in data])
    similarity = vectors @ vectors.T
    similarity.fill_diagonal_(-1.0)
    best = similarity.max(dim=1)
    pairs = {
        (data[i].id, data[int(j)].id, round(float(s), 3))
        for i, (s, j) in enumerate(zip(best.values, best.indices))
        if s > 0.95
    }
    assert not pairs


# ---- ms-data invert ---------------------------------------------------------------------------


def test_read_answers_names_file_and_line(tmp_path):
    from ms.data.invert import read_answers

    path = tmp_path / "answers.jsonl"
    path.write_text('{"answer": "A piano."}\n{"answer": ""}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"answers.jsonl:2: needs a non-empty string 'answer'"):
        read_answers(path, "riddle")
    path.write_text('{"answer": "A piano."}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"answers.jsonl:1: unknown or missing agent"):
        read_answers(path)
    assert read_answers(path, "riddle") == [("answers-1", "riddle", "A piano.")]


@pytest.mark.slow
def test_invert_writes_stream_questions_and_its_usage_with_the_real_model(tmp_path, models_cache, capsys):
    from ms.cli.data import main

    rows = [
        ("r1", "riddle", "An echo: it repeats what you say without a mouth."),
        ("t1", "travel", "Day 1: Louvre in the morning, Seine walk at dusk. Day 2: Versailles by RER C."),
    ]
    answers, out = tmp_path / "answers.jsonl", tmp_path / "stream.jsonl"
    answers.write_text("".join(json.dumps({"id": i, "agent": a, "answer": t}) + "\n" for i, a, t in rows))
    short = "backbone.generation.max_new_tokens=24"  # not the backbone's 96, which SmolLM2 fills repeating itself
    assert main(["invert", str(answers), str(out), f"cache_dir={models_cache}", short]) == 0
    made = [json.loads(line) for line in out.read_text().splitlines()]
    empty = re.search(r"no question came back for (\d+) answer", capsys.readouterr().err)
    assert made and len(made) + (int(empty.group(1)) if empty else 0) == 2
    for example in made:
        assert example["split"] == "stream" and example["question"].strip()
        assert example["answer"] in {r[2] for r in rows} and example["id"].endswith("-inv")
    invert = json.loads((tmp_path / "stream.usage.json").read_text())["backbones"]["smollm2"]["roles"]["invert"]
    assert invert["calls"] + invert["cache_hits"] == 2
