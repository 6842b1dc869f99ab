"""What a gate admits, against the references (`ms-data gate-quality`, quality.md), and how much of each
top k the stream wrote (stream_share.md), on small hand-made run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ms.cli.data import main as data_main
from ms.common.errors import UserError
from ms.metrics.evaluate import BERTScore, EvalConfig
from ms.report.cli import main as report_main
from ms.report.common.runs import find_runs
from ms.report.common.writers import stream_written
from ms.report.sharing.stream_share import ALL, question_counts, stream_share
from ms.report.usage.gate_quality import match, quality_records

DOMAIN = {"riddle": "logic", "pun": "logic"}
# (agent, id, question, reference, split); the empty reference is a stream question without one, as
# in the authors' data.
EXAMPLES = [
    ("riddle", "r-seed", "What has keys but opens no lock?", "A piano.", "seed"),
    ("riddle", "r-1", "What gets wetter the more it dries?", "A towel.", "stream"),
    ("riddle", "r-2", "What has a neck but no head?", "", "stream"),
    ("riddle", "r-test", "What has hands but cannot clap?", "A clock.", "test"),
    ("pun", "p-seed", "Make a pun about bakers.", "Bakers knead the dough.", "seed"),
    ("pun", "p-1", "Make a pun about time.", "Time flies like an arrow; fruit flies like a banana.", "stream"),
    ("pun", "p-test", "Make a pun about fish.", "Something smells fishy.", "test"),
]
# (agent, question, answer, accepted, memory_id): what the gate judged, in stream order.
DECISIONS = [
    ("riddle", "What gets wetter the more it dries?", "A bath towel gets wetter as it dries.", True, 10),
    ("pun", "Make a pun about time.", "Time is money, so I spent it.", False, None),
    ("riddle", "What has a neck but no head?", "A bottle.", True, 11),
]


def write_jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def make_data(folder: Path) -> Path:
    folder.mkdir()
    for agent in DOMAIN:
        write_jsonl(
            folder / f"{agent}.jsonl",
            [
                {"id": i, "agent": a, "domain": DOMAIN[a], "question": q, "answer": r, "split": s}
                for a, i, q, r, s in EXAMPLES
                if a == agent
            ],
        )
    return folder


def make_run(folder: Path, data: Path, decisions=DECISIONS, question: str = "query") -> Path:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "data": {"dir": str(data), "agents": list(DOMAIN)},
                "memory": {"policy": "plain", "question": question},
                "eval": {"metrics": ["bertscore"], "device": "cpu", "batch_size": 8},
            }
        ),
        encoding="utf-8",
    )
    write_jsonl(
        folder / "decisions.jsonl",
        [
            {
                "agent": a,
                "question": q,
                "answer": x,
                "accepted": ok,
                "step": i // 2 + 1,
                "memory_id": m,
                "scope": "logic",
                "pool_size": 2 + i,
            }
            for i, (a, q, x, ok, m) in enumerate(decisions)
        ],
    )
    return folder


@pytest.fixture(scope="module")
def bertscore():
    return BERTScore(EvalConfig(device="cpu"))


def test_quality_record_matches_a_direct_bertscore_call_and_counts_a_missing_reference(tmp_path, bertscore, capsys):
    run = make_run(tmp_path / "run", make_data(tmp_path / "data"))
    assert data_main(["gate-quality", str(run)]) == 0
    records = [json.loads(line) for line in (run / "quality.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["agent"], r["id"], r["accepted"], r["memory_id"]) for r in records] == [
        ("riddle", "r-1", True, 10),
        ("pun", "p-1", False, None),
        ("riddle", "r-2", True, 11),
    ]
    direct = bertscore.score([DECISIONS[0][2], DECISIONS[1][2]], [EXAMPLES[1][3], EXAMPLES[5][3]])
    for record, (p, r, f1) in zip(records, direct):
        assert record["P"] == pytest.approx(p, abs=1e-6) and record["R"] == pytest.approx(r, abs=1e-6)
        assert record["F1"] == pytest.approx(f1, abs=1e-6)
    assert records[2]["reference"] is None and "F1" not in records[2]  # counted, not scored
    out = capsys.readouterr().out
    assert "3 decisions (2 admitted, 1 rejected); 2 scored, 1 without a reference (riddle 1)" in out


def test_a_decision_that_matches_no_stream_example_fails_naming_file_and_line(tmp_path):
    stray = [DECISIONS[0], ("pun", "Make a pun about cheese.", "Gouda one.", False, None)]
    run = make_run(tmp_path / "run", make_data(tmp_path / "data"), stray)
    with pytest.raises(UserError, match=r"decisions\.jsonl line 2: no stream example of agent 'pun'"):
        quality_records(run)
    assert not (run / "quality.jsonl").exists()


def test_a_stored_prompt_matches_the_question_it_ends_with(tmp_path):
    data = make_data(tmp_path / "data")
    prompt = "Q: What has keys but opens no lock? -> A piano. | | Now, answer the question:What has a neck but no head?"
    with pytest.raises(UserError, match="line 1"):  # the query protocol compares whole questions
        quality_records(make_run(tmp_path / "query", data, [("riddle", prompt, "A bottle.", True, 10)]))
    run = make_run(tmp_path / "prompt", data, [("riddle", prompt, "A bottle.", True, 10)], question="prompt")
    [record], _ = quality_records(run)  # no reference: nothing to score, so no model is loaded
    assert (record["id"], record["question"], record["reference"]) == ("r-2", "What has a neck but no head?", None)


def test_match_prefers_the_longest_question_a_prompt_ends_with():
    class E:
        def __init__(self, question):
            self.question = question

    short, long = E("no head?"), E("What has a neck but no head?")
    assert match("... question:What has a neck but no head?", [short, long], whole_prompt=True) is long
    assert match("no head?", [short, long], whole_prompt=False) is short
    assert match("... no head?", [E("")], whole_prompt=True) is None  # an empty question matches nothing


def make_report_run(folder: Path, memories_csv: bool = False) -> Path:
    """A finished run of two agents at two fills: the stream admitted memories 10 and 11; 1-5 are seeds."""
    make_run(folder, Path("unused"))
    retrieved = {50: {"riddle": [1, 2, 10], "pun": [3, 4, 5]}, 100: {"riddle": [10, 11, 1], "pun": [11, 3, 4]}}
    write_jsonl(
        folder / "predictions.jsonl",
        [
            {
                "agent": a,
                "test_id": f"{a}-test",
                "k": 3,
                "fill": fill,
                "question": "q",
                "reference": "r",
                "retrieved": ids,
                "ref_logprob": -1.0,
            }
            for fill, rows in retrieved.items()
            for a, ids in rows.items()
        ],
    )
    per_agent = {a: {"ref_logprob": -1.0, "n": 1} for a in DOMAIN}
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "complete": True,
                "fills": {f: {"overall": {"ref_logprob": -1.0, "n": 2}, "per_agent": per_agent} for f in ("50", "100")},
                "run": {
                    "backbone": "smollm2",
                    "k": 3,
                    "pool": "domain",
                    "retriever": "dense",
                    "learned": True,
                    "agents": list(DOMAIN),
                    "fills": [50, 100],
                    "seed": 0,
                },
            }
        )
    )
    write_jsonl(
        folder / "quality.jsonl",
        [
            {
                "step": 1,
                "agent": "riddle",
                "accepted": True,
                "memory_id": 10,
                "reference": "A towel.",
                "P": 0.6,
                "R": 0.5,
                "F1": 0.55,
                "bertscore": "MiniLM",
            },
            {
                "step": 1,
                "agent": "pun",
                "accepted": False,
                "memory_id": None,
                "reference": "r",
                "P": 0.2,
                "R": 0.3,
                "F1": 0.25,
                "bertscore": "MiniLM",
            },
            {"step": 2, "agent": "riddle", "accepted": True, "memory_id": 11, "reference": None},
        ],
    )
    if memories_csv:  # the writers say memory 5 was written by the stream too
        rows = [(i, "riddle" if i in (1, 2, 10) else "pun", "seed" if i < 5 else "stream") for i in range(1, 12)]
        (folder / "memories.csv").write_text(
            "id,agent,domain,origin,backbone\n"
            + "".join(f"{i},{a},logic,{o},{'seed' if o == 'seed' else 'smollm2'}\n" for i, a, o in rows),
            encoding="utf-8",
        )
    return folder


def test_stream_share_counts_stream_written_memories_per_fill_and_agent(tmp_path):
    [run], _ = find_runs([make_report_run(tmp_path / "sweep" / "run")])
    ids, source = stream_written(run.path)
    assert (ids, source) == ({10, 11}, "decisions.jsonl")  # no pool file or memories.csv: the admitted ids
    assert question_counts(run, ids) == {
        50: {"riddle": [(1, 3)], "pun": [(0, 3)], ALL: [(1, 3), (0, 3)]},
        100: {"riddle": [(2, 3)], "pun": [(1, 3)], ALL: [(2, 3), (1, 3)]},
    }
    shares = stream_share(run, ids)[100][ALL]
    assert (shares.stream, shares.retrievals, shares.per_question.n) == (3, 6, 2)
    assert shares.per_question.mean == 0.5 and shares.per_question.lo is None  # n < 3: no interval
    [run], _ = find_runs([make_report_run(tmp_path / "other" / "run", memories_csv=True)])
    ids, source = stream_written(run.path)
    assert source == "memories.csv" and ids == {5, 6, 7, 8, 9, 10, 11}  # the writers come first
    assert question_counts(run, ids)[50]["pun"] == [(1, 3)]


def test_a_stream_shares_interval_is_a_bootstrap_over_questions_not_retrievals():
    from ms.common.stats import mean_ci
    from ms.report.sharing.stream_share import share

    counts = [(3, 3)] * 5 + [(0, 3)] * 5 + [(1, 3), (2, 3)]  # 12 questions, 36 retrievals
    s = share(counts)
    assert (s.stream, s.retrievals) == (18, 36) and s.per_question == mean_ci([c / 3 for c, _ in counts])
    # Questions are the unit: three times as many retrievals per question, the same interval
    assert share([(3 * a, 3 * n) for a, n in counts]).per_question == s.per_question
    assert s.per_question.lo < 0.5 < s.per_question.hi and s.text().startswith("50% [")


def test_ms_report_writes_quality_and_stream_share(tmp_path):
    make_report_run(tmp_path / "sweep" / "run")
    out = tmp_path / "report"
    assert report_main([str(tmp_path / "sweep"), "--out", str(out)]) == 0
    quality = (out / "quality.md").read_text(encoding="utf-8")
    assert "| riddle | admitted | 2 | 1 | 0.600 (n<3, too small) n=1 |" in quality
    assert "| all | rejected | 1 | 0 | 0.200 (n<3, too small) n=1 |" in quality
    assert "run,rubric,all,admitted,2,1,1,0.6,,," in (out / "quality.csv").read_text(encoding="utf-8")
    share = (out / "stream_share.md").read_text(encoding="utf-8")
    assert "| riddle | 33% (n<3, too small) (q=1) | 67% (n<3, too small) (q=1) |" in share
    assert "| all | 17% (n<3, too small) (q=2) | 50% (n<3, too small) (q=2) |" in share
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "[quality.md](quality.md)" in summary and "[stream_share.md](stream_share.md)" in summary
    assert "100% fill 50% (n<3, too small) (q=2)" in summary  # beside the growth curve
