"""ms-data forget (issue 37, item 3): a writer agent's or a run's memories leave a pool on either
backend, seeds only when asked, with an audit record (schema 5, migrated in place from 4), and no
retriever returns them afterwards, whether it runs in the process that removed them or in another
that held the scope in memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from test_pool import _schema_of, _set_schema, item
from test_snapshots import data_items

from ms.cli.data import main as ms_data
from ms.common.errors import USER_ERROR_EXIT
from ms.pool import SCHEMA_VERSION
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever

# A writer whose memories answer the probe question better than anything else in the scope.
ROGUE = [
    ("What do volcanoes erupt?", "Molten rock called magma, which becomes lava at the surface."),
    ("Why do volcanoes erupt?", "Pressure from gas and magma below the crust pushes molten rock up."),
]
PROBE = "What do volcanoes erupt, and why do volcanoes erupt?"


def rogue_items() -> list[dict]:
    return [
        {"scope": "logic", "agent": "rogue", "domain": "logic", "question": q, "answer": a, "origin": "stream"}
        for q, a in ROGUE
    ]


def forget_args(where, *args: str) -> list[str]:
    """`ms-data forget` on this pool: its file, or the PostgreSQL database by DSN."""
    target = ["--postgres", "--dsn", where.target] if where.backend == "postgres" else [where.target]
    return ["forget", *target, *args]


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder()


def test_forget_an_agent_counts_keeps_seeds_and_records_it(where, capsys):
    with where.open(run_id="r1") as pool:
        pool.add(
            [item(question=f"q{i}") for i in range(3)]
            + [item(question="s", origin="seed")]
            + [item(question="h", agent="haiku")],
            step=1,
        )
        pool.add([item(question="other scope", scope="single")], step=2)
    assert ms_data(forget_args(where, "--agent", "limerick")) == 0
    out = capsys.readouterr().out
    assert "removed 4 memories of agent limerick" in out and "1 seed memories of agent limerick stay" in out
    assert "audit record #1" in out
    with where.open() as pool:
        assert pool.tally(["agent", "origin"]) == {("haiku", "stream"): 1, ("limerick", "seed"): 1}
        [record] = pool.removals()
    assert (record["kind"], record["target"], record["removed"], record["with_seeds"]) == (
        "agent",
        "limerick",
        4,
        False,
    )
    assert record["counts"] == [("literary", "stream", 3), ("single", "stream", 1)]
    assert record["command"].startswith("ms-data forget") and record["command"].endswith("--agent limerick")
    assert len(record["ids"]) == 4
    # With --with-seeds the seed goes too; a second record follows the first.
    assert ms_data(forget_args(where, "--agent", "limerick", "--with-seeds")) == 0
    with where.open() as pool:
        assert pool.count_by("agent") == {"haiku": 1}
        assert [(r["id"], r["removed"], r["with_seeds"]) for r in pool.removals()] == [(1, 4, False), (2, 1, True)]


def test_forget_a_run_by_id_or_folder_within_one_scope(where, tmp_path, capsys):
    folder = tmp_path / "run-a"
    folder.mkdir()
    (folder / "run_id").write_text("a\n")
    with where.open(run_id="a", run_label=str(folder)) as a:
        a.add([item(question="a1"), item(question="a2", scope="single"), item(question="seed", origin="seed")], step=1)
    with where.open(run_id="b") as b:
        b.add([item(question="b1")], step=1)
    assert ms_data(forget_args(where, "--run", str(folder), "--scope", "literary", "--dry-run")) == 0
    assert "would remove 1 memories of run a in scope literary" in capsys.readouterr().out
    with where.open() as pool:
        assert pool.count() == 4 and pool.removals() == []  # a dry run changes and records nothing
    assert ms_data(forget_args(where, "--run", "a", "--scope", "literary")) == 0
    with where.open() as pool:
        assert sorted(m.question for s in pool.scopes() for m in pool.memories(s)) == ["a2", "b1", "seed"]
        assert pool.removals()[0]["scope"] == "literary"


def test_forget_refuses_an_unknown_agent_or_run_by_name(where, capsys):
    with where.open(run_id="a") as pool:
        pool.add([item()], step=1)
    assert ms_data(forget_args(where, "--agent", "limerik")) == USER_ERROR_EXIT
    assert "no memories of that agent" in capsys.readouterr().err
    assert ms_data(forget_args(where, "--run", "nope")) == USER_ERROR_EXIT
    assert "its runs: a" in capsys.readouterr().err
    assert ms_data(forget_args(where)) == USER_ERROR_EXIT  # neither --agent nor --run


def test_a_removed_summary_gives_back_what_it_folded_in(where):
    with where.open() as pool:
        folded = pool.add([item(question=f"h{i}", agent="haiku", tier="short") for i in range(2)], step=1)
        [summary] = pool.add([item(question="summary", origin="summary", sources=folded)], step=2)
        for memory_id in folded:
            pool.set_fields(memory_id, tier="long", consolidated=True)
        done = pool.forget("agent", "limerick", command="test")
        assert (done.ids, done.unfolded) == ([summary], 2)
        assert [(m.tier, m.consolidated) for m in pool.get(folded)] == [("long", False)] * 2


def test_a_schema_4_pool_gains_the_removals_table_in_place(where):
    with where.open(run_id="old") as pool:
        kept, doomed = pool.add([item(question="kept", agent="haiku"), item(question="doomed")], step=1)
    _set_schema(where, 4, "DROP TABLE removals", "ALTER TABLE memories DROP COLUMN retired_step")
    assert _schema_of(where) == 4
    with where.open() as pool:
        assert pool.get([kept])[0].question == "kept"  # ids and rows untouched
        done = pool.forget("agent", "limerick", command="ms-data forget x --agent limerick")
        assert done.ids == [doomed] and done.record_id == 1
        assert pool.add([item(question="new")], step=2)[0] > doomed
    assert _schema_of(where) == SCHEMA_VERSION == 6


def _found(retrievers, k: int = 5) -> list[set[str]]:
    return [{m.agent for m in r.retrieve(PROBE, "logic", k)} for r in retrievers]


def test_no_retrieval_of_a_removed_memory_in_this_process_or_another_that_held_the_scope(where, encoder):
    """The retrievers here hold the scope in memory before the removal; one removal runs in this process
    (ms-data forget in-process, its own connection), the other in a separate process."""
    with where.open() as pool:
        pool.add(data_items(("logic",))[::6] + rogue_items(), step=0)
        pool.add([dict(rogue_items()[0], agent="rogue2", question="What do volcanoes erupt, briefly?")], step=1)
        retrievers = [DenseRetriever(pool, encoder), BM25Retriever(pool)]
        assert all("rogue" in found and "rogue2" in found for found in _found(retrievers))
        assert ms_data(forget_args(where, "--agent", "rogue")) == 0  # this process
        assert all("rogue" not in found and "rogue2" in found for found in _found(retrievers))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
        done = subprocess.run(
            [sys.executable, "-m", "ms.cli.data", *forget_args(where, "--agent", "rogue2")],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "removed 1 memories of agent rogue2" in done.stdout
        for found in _found(retrievers, k=50):  # every memory the scope still holds
            assert not found & {"rogue", "rogue2"}
