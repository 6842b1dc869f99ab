"""Access rules in the loop (issue 37, item 1): the pipeline batches retrievals by scope and grants and
passes each batch its reader, each prediction records how many memories the rule withheld, and memory
train's mining and the utility gate's probes obey the rule of the agent they act for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes import FakeLM
from test_access import MEMORIES, PROBE, SCOPE, allowed

from ms.agents import PromptTemplate, default_agents
from ms.config.schema import PromptConfig, TrainConfig
from ms.data import Example
from ms.gates.replay import Candidate, UtilityMeter
from ms.loop.answering import Query
from ms.loop.pipeline import Experiment
from ms.pool import Pool
from ms.pool.access import Reader
from ms.pool.access.table import RuleFileAccess, read_rule_file
from ms.retrieval.bm25 import BM25Retriever


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as p:
        p.add(
            [
                {"scope": SCOPE, "agent": a, "domain": SCOPE, "question": q, "answer": ans, "origin": o}
                for a, o, q, ans in MEMORIES
            ],
            step=0,
        )
        yield p


@pytest.fixture
def rule(tmp_path):
    """riddle and puzzle read everything but pun's stream; pun reads everything."""
    path = tmp_path / "rule.yaml"
    path.write_text("grants:\n  riddle: [riddle, puzzle, seed]\n  puzzle: [riddle, puzzle, seed]\n  pun: all\n")
    return RuleFileAccess(read_rule_file(path))


class Recording(BM25Retriever):
    """BM25 that notes each batch it is asked for: (scope, reader, how many queries)."""

    def __init__(self, pool):
        super().__init__(pool)
        self.batches = []

    def retrieve_batch(self, queries, scope, k, reader=None):
        self.batches.append((scope, reader, len(queries)))
        return super().retrieve_batch(queries, scope, k, reader)


def experiment(pool, rule, retriever) -> Experiment:
    parts = SimpleNamespace(
        settings=SimpleNamespace(stream_k=3, k=3),
        agents=default_agents(),
        splits={},
        template=PromptTemplate(**vars(PromptConfig())),
        pool=pool,
        backbones={},
        agent_backbone={},
        scorer=None,
        gate=None,
        memory=None,
        trainer=None,
        retriever=retriever,
        test_retriever=retriever,
        metrics=[],
        access=rule,
        clock=SimpleNamespace(step=0),
    )
    return Experiment(parts, out_dir=None)


def test_the_loop_batches_by_scope_and_grants_and_records_what_was_withheld(pool, rule):
    retriever = Recording(pool)
    queries = [
        Query(agent, SCOPE, Example(f"{agent}-1", agent, SCOPE, PROBE, "lava")) for agent in ("riddle", "pun", "puzzle")
    ]
    rows = [{"agent": q.agent} for q in queries]
    experiment(pool, rule, retriever).evaluate_batch(rows, queries)
    # riddle and puzzle have the same grants: one batch of two; pun's its own.
    assert sorted((s, r.writers is None, n) for s, r, n in retriever.batches) == [(SCOPE, False, 2), (SCOPE, True, 1)]
    by_id = {m.id: m for m in pool.memories(SCOPE)}
    for row in rows:
        withheld = row["agent"] != "pun"
        assert row["withheld"] == (3 if withheld else 0)
        assert len(row["retrieved"]) == 3
        assert all(allowed(by_id[i]) for i in row["retrieved"]) or not withheld
    assert not all(allowed(by_id[i]) for i in rows[1]["retrieved"])  # pun itself reads its stream memories


def test_memory_train_mines_only_what_the_pairs_agent_may_read(pool, rule, tmp_path):
    from ms.retrieval.dense import DenseRetriever
    from ms.retrieval.encoder import Encoder
    from ms.retrieval.training import RetrieverTrainer

    class Labeller:
        def p_not(self, jobs):
            self.jobs = list(jobs)
            return [0.5] * len(jobs)

    labeller = Labeller()
    trainer = RetrieverTrainer(
        TrainConfig(candidates=len(MEMORIES), labelled=2),
        DenseRetriever(pool, Encoder()),
        BM25Retriever(pool),
        labeller,
        reader=rule.reader,
    )
    trainer.label([("riddle", SCOPE, PROBE, "lava", -1), ("pun", SCOPE, PROBE, "lava", -1)])
    mined = {agent: [m for a, _, _, m in labeller.jobs if a == agent] for agent in ("riddle", "pun")}
    assert mined["riddle"] and all(allowed(m) for m in mined["riddle"])
    assert len(mined["riddle"]) == sum(allowed(m) for m in pool.memories(SCOPE))
    assert not all(allowed(m) for m in mined["pun"])  # pun may read its own stream


def test_the_utility_gates_probes_and_shots_obey_the_candidates_agent(pool, rule):
    lm = FakeLM(scores=lambda context, text: (-1.0, 2))
    meter = UtilityMeter(
        BM25Retriever(pool).retrieve_batch,
        lambda agent: lm,
        default_agents(),
        PromptTemplate(**vars(PromptConfig())),
        probes=3,
        shots=2,
        reader=rule.reader,
    )
    riddle, pun = meter.measure([Candidate("riddle", SCOPE, PROBE, "lava"), Candidate("pun", SCOPE, PROBE, "lava")])
    by_id = {m.id: m for m in pool.memories(SCOPE)}
    assert riddle.probes and all(allowed(by_id[i]) for i in riddle.probes)
    assert all(i is None or allowed(by_id[i]) for i in riddle.displaced)
    assert not all(allowed(by_id[i]) for i in pun.probes)  # under pun's own grants, its stream comes first
    withheld = [m.answer for m in by_id.values() if not allowed(m)]
    riddle_contexts = [c for c, _ in lm.scored[: 2 * len(riddle.probes)]]
    assert not any(answer in context for answer in withheld for context in riddle_contexts)


def test_an_open_rule_reader_is_the_reader_of_no_rule():
    from ms.pool.access.open import OpenAccess

    assert OpenAccess().reader("riddle") == Reader("riddle") and OpenAccess().record() == {}
