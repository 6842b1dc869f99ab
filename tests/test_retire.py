"""Retirement (memory.retire_below, ms.pool.retirement; issue 48, item 4): a memory the stream wrote whose
measured utility is below the threshold over enough measurements is retired at a step: no retriever, no
short-term store, no memory-train miner and no utility probe returns it again, in this process or after
the pool is reopened, while the pool keeps it (schema 6) and the run records it. Off, nothing changes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import compose_config
from fakes import FakeLM
from test_forget import PROBE, rogue_items
from test_pipeline import TINY
from test_pool import _schema_of, _set_schema, item
from test_snapshots import data_items

from ms.config.schema import MemoryConfig
from ms.pool import SCHEMA_VERSION
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.composite import CompositeRetriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.memory import StmLtmConfig, StmLtmPolicy
from ms.retrieval.random import RandomRetriever


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder()


def retrievers(pool, encoder) -> list:
    return [
        BM25Retriever(pool),
        DenseRetriever(pool, encoder),
        CompositeRetriever(DenseRetriever(pool, encoder), mark=False),
        RandomRetriever(pool),
    ]


def found(retriever, k: int = 50) -> set[int]:
    """Every memory id the retriever returns for the probe question, alone and in a batch."""
    one = {m.id for m in retriever.retrieve(PROBE, "logic", k)}
    [batch] = retriever.retrieve_batch([PROBE], "logic", k)
    return one | {m.id for m in batch}


def test_a_memory_measured_to_hurt_is_retrieved_no_more_stays_in_the_pool_and_stays_retired(where, encoder):
    with where.open(run_id="run") as pool:
        seeds = pool.add(data_items(("logic",))[::6], step=0)
        bad, good = pool.add(rogue_items(), step=1)
        held = retrievers(pool, encoder)  # each holds the scope in memory before the retirement
        assert all({bad, good} <= found(r) for r in held)
        pool.record_utility(
            {
                bad: [-0.3, -0.1],  # hurts, measured twice
                good: [0.2, 0.1],
                seeds[0]: [-0.5, -0.5],  # a seed that measured worse still: seeds are never retired
            }
        )
        [retired] = pool.retire(below=0.0, after=2, step=4, scopes=["logic"])
        assert (retired.memory_id, retired.utility, retired.utility_n, retired.step) == (bad, pytest.approx(-0.2), 2, 4)
        assert (retired.agent, retired.origin, retired.scope) == ("rogue", "stream", "logic")
        for r in held:
            ids = found(r)
            assert bad not in ids and {good, seeds[0]} <= ids, type(r).__name__
        # The pool keeps it, readable by id and counted, with when and why it was retired.
        [kept] = pool.get([bad])
        assert (kept.retired_step, kept.utility, kept.utility_n) == (4, pytest.approx(-0.2), 2)
        assert kept.question == rogue_items()[0]["question"] and bad in pool.ids("logic")
        assert bad in {m.id for m in pool.memories("logic")}
        assert bad not in {m.id for m in pool.memories("logic", include_retired=False)}
        assert pool.retire(below=0.0, after=2, step=5, scopes=["logic"]) == []  # once, at its first step
    with where.open(run_id="run") as reopened:  # a resumed run: a new connection, new snapshots
        assert reopened.get([bad])[0].retired_step == 4
        assert all(bad not in found(r) and good in found(r) for r in retrievers(reopened, encoder))


def test_too_few_measurements_another_scope_or_an_unmeasured_memory_are_not_retired(where):
    with where.open() as pool:
        few, other, unmeasured, summary, imported = pool.add(
            [
                item(question="few"),
                item(question="other", scope="logic", domain="logic"),
                item(question="unmeasured"),
                item(question="summary", origin="summary"),
                item(question="imported", origin="imported"),
            ],
            step=1,
        )
        pool.record_utility({few: [-1.0], other: [-1.0, -1.0], summary: [-0.1, -0.1], imported: [-1.0, -1.0]})
        retired = pool.retire(below=0.0, after=2, step=2, scopes=["literary"])
        assert [r.memory_id for r in retired] == [summary]  # a summary of stream pairs is the stream's too
        pool.record_utility({few: [-1.0]})
        assert [r.memory_id for r in pool.retire(below=0.0, after=2, step=3, scopes=["literary"])] == [few]
        assert all(m.retired_step is None for m in pool.get([other, unmeasured, imported]))


def test_a_schema_5_pool_gains_the_retirement_column_in_place(where):
    with where.open() as pool:
        [kept] = pool.add([item()], step=1)
    _set_schema(where, 5, "ALTER TABLE memories DROP COLUMN retired_step")
    with where.open() as pool:
        assert pool.get([kept])[0].retired_step is None
        pool.record_utility({kept: [-1.0]})
        assert [r.memory_id for r in pool.retire(below=0.0, after=1, step=2, scopes=["literary"])] == [kept]
    assert _schema_of(where) == SCHEMA_VERSION == 6


def test_a_retired_short_term_item_is_neither_retrieved_nor_consolidated(tmp_path, encoder):
    from ms.pool import Pool

    with Pool(tmp_path / "pool.sqlite") as pool:
        policy = StmLtmPolicy(pool, FakeLM(default="Question: q\nAnswer: a"), encoder, StmLtmConfig(threshold=-1.0))
        bad, good = policy.admit([item(question="a cat limerick", score=70), item(question="a dog limerick")], 1)
        pool.record_utility({bad: [-0.5]})
        pool.retire(below=0.0, after=1, step=1, scopes=["literary"])
        [short] = policy.short_term(["a limerick"], "literary")
        assert [m.id for m in short] == [good]
        assert [m.id for m in policy.due(9)[("literary", "limerick")]] == [good]
        done = policy.maybe_consolidate(9)
        assert done.moved == [good] and pool.get([bad])[0].tier == "short"


def test_memory_train_mines_no_retired_memory(tmp_path):
    """The miner is a BM25 retriever over the scope's snapshot: what it may return, a retired memory is not."""
    from ms.pool import Pool

    with Pool(tmp_path / "pool.sqlite") as pool:
        ids = pool.add(data_items(("logic",))[::6] + rogue_items(), step=0)
        miner = BM25Retriever(pool)
        assert ids[-2] in {m.id for m in miner.retrieve(PROBE, "logic", 3, exclude=[ids[-1]])}
        pool.record_utility({ids[-2]: [-1.0]})
        pool.retire(below=0.0, after=1, step=1, scopes=["logic"])
        assert ids[-2] not in {m.id for m in miner.retrieve(PROBE, "logic", 50, exclude=[ids[-1]])}


def loop_stand_in(pool, out, below, after=1, step=3) -> SimpleNamespace:
    """What Experiment.retire reads of the loop: its settings, pool, agents' scopes, folder and step."""
    from collections import Counter

    return SimpleNamespace(
        settings=SimpleNamespace(retire_below=below, retire_after=after),
        pool=pool,
        splits={"limerick": None, "riddle": None},
        scope=lambda agent: {"limerick": "literary", "riddle": "logic"}[agent],
        out=out,
        step=step,
        retired=Counter(),
    )


def test_the_loop_retires_after_each_step_and_records_each_retirement(tmp_path):
    from ms.loop.pipeline import Experiment
    from ms.pool import Pool

    with Pool(tmp_path / "pool.sqlite") as pool:
        hurt, helped = pool.add([item(question="hurts"), item(question="helps")], step=1)
        pool.record_utility({hurt: [-0.2, -0.4], helped: [0.1]})
        off = loop_stand_in(pool, tmp_path, below=None)
        Experiment.retire(off)  # off: nothing read, nothing written
        assert pool.get([hurt])[0].retired_step is None and not (tmp_path / "retirements.jsonl").exists()
        loop = loop_stand_in(pool, tmp_path, below=0.0)
        Experiment.retire(loop)
        [row] = [json.loads(line) for line in (tmp_path / "retirements.jsonl").open()]
        assert row == {
            "memory_id": hurt,
            "scope": "literary",
            "agent": "limerick",
            "origin": "stream",
            "utility": pytest.approx(-0.3),
            "utility_n": 2,
            "step": 3,
            "below": 0.0,
            "after": 1,
        }
        assert loop.retired == {"limerick": 1} and pool.get([hurt])[0].retired_step == 3


def test_the_setting_is_off_by_default_and_a_run_from_before_it_resumes_as_the_same_cell(tmp_path):
    from ms.common.errors import UserError
    from ms.loop.cell import check_same_cell, identity, record

    assert MemoryConfig().retire_below is None
    today = compose_config(["scorer.threshold=15"])
    old = record(today, "aaa")
    for key in [k for k in old["config"] if k.startswith("memory.retire")]:
        del old["config"][key]  # a record written before the settings existed
    check_same_cell(tmp_path, {"complete": True, "cell": old}, today, "aaa")
    with pytest.raises(UserError, match="memory.retire_below"):
        check_same_cell(
            tmp_path,
            {"complete": True, "cell": old},
            compose_config(["scorer.threshold=15", "memory.retire_below=0"]),
            "aaa",
        )
    on = identity(compose_config(["memory.retire_below=0", "memory.retire_after=3"]))
    assert (on["memory.retire_below"], on["memory.retire_after"]) == (0.0, 3)


def test_plan_mode_plans_a_retiring_run_with_no_more_calls(tmp_path):
    """Retirement reads utilities the pool already holds, so a plan counts the same calls with it as without."""
    from ms.plan.planner import plan_run

    base = TINY + [f"cache_dir={tmp_path}", "gate=utility"]
    without = {r.role: (r.calls, r.prompt_tokens, r.exact) for r in plan_run(compose_config(base)).rows}
    with_it = plan_run(compose_config(base + ["memory.retire_below=0", "memory.retire_after=3"]))
    assert {r.role: (r.calls, r.prompt_tokens, r.exact) for r in with_it.rows} == without


@pytest.mark.slow
def test_a_tiny_run_under_the_utility_gate_retires_what_it_measured_below_the_threshold(tmp_path, models_cache):
    """retire_below far above any utility and retire_after=1: every stream memory measured at all is retired
    at the step that measured it, and no later retrieval (the stream's, the test questions') returns it."""
    from ms.loop.pipeline import run
    from ms.pool import Pool

    overrides = TINY + [
        f"cache_dir={models_cache}",
        "gate=utility",
        "gate.utility_threshold=-100",  # admit every pair, so that some are measured later as shots
        "memory.retire_below=100",
        "memory.retire_after=1",
        "fills=[50,100]",
        "eval.metrics=[ref_logprob]",
        "retriever=dense_frozen",  # no memory train: its miner's side is test_memory_train_mines_no_retired_memory's
        "backbone.generation.max_new_tokens=8",  # what is retired follows from utilities, not from the answers' length
    ]
    cfg = compose_config(overrides)
    metrics = run(cfg, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "retirements.jsonl").open()]
    assert rows and sum(metrics["memory"]["retired"].values()) == len(rows)
    assert metrics["run"]["retire"] == {"below": 100.0, "after": 1}
    with Pool(tmp_path / "pool.sqlite") as pool:
        for r in rows:
            [m] = pool.get([r["memory_id"]])
            assert m.retired_step == r["step"] and m.origin == "stream" and m.utility < 100
        assert all(
            m.retired_step is None for s in ("logic", "literary") for m in pool.memories(s) if m.origin == "seed"
        )
    retired_at = {r["memory_id"]: r["step"] for r in rows}
    for p in map(json.loads, (tmp_path / "predictions.jsonl").open()):  # fill 50 follows step 1, fill 100 step 2
        assert not {i for i in p["retrieved"] if retired_at.get(i, 99) <= p["fill"] // 50}, p
    decisions = [json.loads(line) for line in (tmp_path / "decisions.jsonl").open()]
    for d in decisions:  # a probe or a displaced shot is never a memory retired at an earlier step
        shown = set(d["utility"]["probes"]) | set(d["utility"]["displaced"]) - {None}
        assert not {i for i in shown if retired_at.get(i, d["step"]) < d["step"]}, d
    # Finished: the same cell, skipped (the code may have changed meanwhile: only that is accepted).
    again = run(compose_config(overrides + ["accept_code_change=true"]), tmp_path)
    assert again["wall_seconds"] == metrics["wall_seconds"]
