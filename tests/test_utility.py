"""The utility gate (ms.gates.replay, ms.gate): a candidate pair replayed as the last shot of its nearest
memories' prompts, with a stand-in LM for the bookkeeping and the real SmolLM2 for the measurement;
the utility each memory keeps (pool schema 4); the gate's config check; and a tiny run under
gate=utility against its plan."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict

import pytest
from conftest import compose_config
from fakes import FakeLM
from test_pipeline import TINY

from ms.agents import PromptTemplate, default_agents
from ms.gates.replay import Candidate, UtilityMeter, effects
from ms.pool import SCHEMA_VERSION, Pool
from ms.retrieval.bm25 import BM25Retriever

AGENTS = default_agents()


def read(agent: str, n: int) -> list[dict]:
    with open(f"data/{agent}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(n))]


def template() -> PromptTemplate:
    return PromptTemplate(**compose_config().prompt)


@pytest.fixture
def logic_pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as pool:
        ids = pool.add(
            [
                {
                    "scope": "logic",
                    "agent": "riddle",
                    "domain": "logic",
                    "question": e["question"],
                    "answer": e["answer"],
                    "origin": "seed",
                }
                for e in read("riddle", 6)
            ],
            step=0,
        )
        yield pool, dict(zip((e["id"] for e in read("riddle", 6)), ids))


def copier() -> FakeLM:
    """Scores a continuation 0 per token where the context shows it, -1 per token elsewhere; tokens
    are words. It decodes nothing: the utility gate never generates."""
    return FakeLM(scores=lambda c, y: (0.0 if y in c else -float(len(y.split())), len(y.split())))


def test_the_candidate_replaces_the_last_shot_of_its_nearest_memories_prompts(logic_pool):
    pool, ids = logic_pool
    target = read("riddle", 1)[0]
    tests = [read("riddle", 6)[4]["question"]]  # a test question never serves as a probe
    lm = copier()
    meter = UtilityMeter(
        BM25Retriever(pool).retrieve_batch,
        lambda agent: lm,
        AGENTS,
        template(),
        probes=3,
        shots=2,
        test_questions=tests,
    )
    planted = Candidate(
        "riddle", "logic", "What copies every move you make, shrinks at noon and stretches at dusk?", target["answer"]
    )
    [u] = meter.measure([planted])
    assert len(u.probes) == 3 and u.probes[0] == ids["riddle-001"] and ids["riddle-005"] not in u.probes
    assert len(u.deltas) == len(u.displaced) == 3 and u.shots == 2
    # Showing riddle-001's answer lifts it from -1 to 0 per token; the other probes lose a shot
    # that never held their answer either, so they do not change.
    assert u.deltas == [1.0, 0.0, 0.0] and u.u == pytest.approx(1 / 3) and u.lo <= u.u <= u.hi
    assert lm.usage_by_role["utility"].calls == 6 and set(lm.usage_by_role) == {"utility"}
    # Each probe's prompt shows two shots, never the probe itself; the second of each pair holds the candidate.
    contexts = [context for context, _ in lm.scored]
    assert all(context.count("->") == 2 for context in contexts)
    for probe, context in zip(pool.get(u.probes), contexts[0::2]):
        assert probe.answer not in context
    assert all(planted.answer in c for c in contexts[1::2])
    assert not any(planted.question in c for c in contexts[0::2])

    # The candidate (admitted as memory 99) gets every delta, each displaced shot the delta's negation.
    expected = {99: u.deltas}
    for displaced, delta in zip(u.displaced, u.deltas):
        expected.setdefault(displaced, []).append(-delta)
    assert effects([(asdict(u), 99), (None, 7)]) == expected


def test_a_candidate_asking_a_memorys_own_question_never_probes_that_memory(logic_pool):
    pool, ids = logic_pool
    target = read("riddle", 1)[0]
    meter = UtilityMeter(
        BM25Retriever(pool).retrieve_batch, lambda agent: copier(), AGENTS, template(), probes=2, shots=0
    )
    [u] = meter.measure([Candidate("riddle", "logic", target["question"], "A mirror.")])
    assert ids["riddle-001"] not in u.probes and len(u.probes) == 2 and u.shots == 1  # k = 0 measures with one shot
    [empty] = UtilityMeter(
        lambda q, s, n, reader: [[] for _ in q], lambda agent: copier(), AGENTS, template(), probes=2, shots=1
    ).measure([Candidate("riddle", "logic", "q", "a")])
    assert (empty.u, empty.lo, empty.probes) == (None, None, [])


@pytest.fixture(scope="module")
def measured(smollm2, tmp_path_factory):
    """Three candidates for the riddle scope, measured with the real SmolLM2 in one batch."""
    path = tmp_path_factory.mktemp("utility") / "pool.sqlite"
    pool = Pool(path)
    pool.add(
        [
            {
                "scope": "logic",
                "agent": "riddle",
                "domain": "logic",
                "question": e["question"],
                "answer": e["answer"],
                "origin": "seed",
            }
            for e in read("riddle", 6)
        ],
        step=0,
    )
    meter = UtilityMeter(
        BM25Retriever(pool).retrieve_batch, lambda agent: smollm2, AGENTS, template(), probes=3, shots=1
    )
    target, sonnet = read("riddle", 1)[0], read("sonnet", 1)[0]
    reworded = "What copies every move you make without a sound, shrinks at noon and vanishes in the dark?"
    candidates = {
        "planted": Candidate("riddle", "logic", reworded, target["answer"]),
        "other domain": Candidate("riddle", "logic", sonnet["question"], sonnet["answer"]),
        "empty answer": Candidate("riddle", "logic", reworded, ""),
    }
    found = dict(zip(candidates, meter.measure(list(candidates.values()))))
    yield found, pool.get([1])[0]
    pool.close()


def test_a_pair_holding_a_probes_reference_answer_helps(measured):
    found, first = measured
    planted = found["planted"]
    assert planted.probes[0] == first.id and planted.deltas[0] > 0, planted
    assert planted.u > 0, planted


@pytest.mark.parametrize("which", ["other domain", "empty answer"])
def test_a_pair_from_another_domain_or_with_an_empty_answer_does_not_help(measured, which):
    found, _ = measured
    assert found[which].probes and found[which].u <= 0, found[which]


def test_a_schema_3_pool_gains_utility_columns_in_place(tmp_path):
    path = tmp_path / "v3.sqlite"
    with sqlite3.connect(path) as old:  # the schema-3 table, as files written before utility was kept
        old.execute("""CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL,
            agent TEXT NOT NULL, domain TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, score REAL,
            importance REAL, origin TEXT NOT NULL, added_step INTEGER NOT NULL, added_at REAL NOT NULL,
            last_retrieved_step INTEGER, last_retrieved_at REAL, content_hash TEXT NOT NULL,
            tier TEXT NOT NULL DEFAULT 'long', consolidated INTEGER NOT NULL DEFAULT 0, sources TEXT, run_id TEXT,
            backbone TEXT, UNIQUE (scope, content_hash))""")
        old.execute(
            "INSERT INTO memories (id, scope, agent, domain, question, answer, origin, added_step, added_at,"
            " content_hash, run_id) VALUES (12, 'logic', 'pun', 'logic', 'q', 'a', 'seed', 0, 0, 'h', 'r')"
        )
        old.execute("PRAGMA user_version = 3")
    with Pool(path) as pool:
        [kept] = pool.get([12])
        assert (kept.question, kept.run_id, kept.utility, kept.utility_n) == ("q", "r", None, 0)
        pool.record_utility({12: [0.2, 0.4]})
        pool.record_utility({12: [0.6], 404: [1.0]})  # a memory gone meanwhile is skipped
        [updated] = pool.get([12])
        assert (updated.utility, updated.utility_n) == (pytest.approx(0.4), 3)
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


def test_a_backbone_without_likelihoods_is_refused_before_anything_loads():
    from ms.loop.validation import problems

    found = problems(compose_config(["backbone=gpt-4o", "gate=utility"]))
    [line] = [p for p in found if p.startswith("invalid setting gate=")]
    assert "gate=utility" in line and "backbone.prompt_logprobs=echo" in line and "\n" not in line
    assert not [p for p in problems(compose_config(["gate=both"])) if "gate=" in p]


@pytest.mark.slow
def test_a_tiny_run_under_the_utility_gate_records_its_probes_and_matches_its_plan(tmp_path, models_cache):
    from ms.loop.pipeline import run
    from ms.plan.planner import plan_run

    # One stream question per agent, two candidates to label, one fill evaluated by ref_logprob: the
    # stream's gate is what this reads.
    cfg = compose_config(
        TINY
        + [
            f"cache_dir={models_cache}",
            "gate=utility",
            "data.max_stream=1",
            "train.candidates=2",
            "fills=[100]",
            "eval.metrics=[ref_logprob]",
        ]
    )
    metrics = run(cfg, tmp_path)
    decisions = [json.loads(line) for line in (tmp_path / "decisions.jsonl").open()]
    assert len(decisions) == 2 and metrics["run"]["gate"] == "utility" and metrics["stream"]["unscored"] == 0
    for d in decisions:
        u = d["utility"]
        assert len(u["probes"]) == len(u["deltas"]) == 3 and d["score"] is None
        assert u["u"] == pytest.approx(sum(u["deltas"]) / 3) and u["lo"] <= u["u"] <= u["hi"]
        assert d["accepted"] == (u["u"] > 0) and (d["memory_id"] is not None) == d["accepted"]
    pool = Pool(tmp_path / "pool.sqlite")
    measured = {m.id: m for m in pool.memories("logic") + pool.memories("literary") if m.utility_n}
    displaced = {i for d in decisions for i in d["utility"]["displaced"]}
    assert displaced and displaced <= set(measured)
    assert all(measured[d["memory_id"]].utility_n >= 3 for d in decisions if d["accepted"])

    roles = metrics["usage"]["backbones"]["smollm2"]["roles"]
    planned = {r.role: r for r in plan_run(cfg).rows}
    made = roles["utility"]["calls"] + roles["utility"]["cache_hits"]
    assert made == planned["utility"].calls == 2 * 2 * 3 and planned["utility"].exact
    assert roles["score"]["calls"] + roles["score"]["cache_hits"] == planned["score"].calls == 0


def test_memory_train_labels_measure_each_candidates_utility_against_zero_shot(smollm2, tmp_path):
    """train.utility_from_labels: a candidate's value is Y's mean log-prob with it as the one shot
    minus Y's at zero shots, from the labels' own passes and one zero-shot pass per (X, Y)."""
    from ms.retrieval.training import Labeller

    target, sonnet = read("riddle", 1)[0], read("sonnet", 1)[0]
    reworded = "What copies every move you make without a sound, shrinks at noon and vanishes in the dark?"
    with Pool(tmp_path / "pool.sqlite") as pool:
        ids = pool.add(
            [
                {"scope": "logic", "agent": "riddle", "domain": "logic", "question": q, "answer": a, "origin": "seed"}
                for q, a in [(reworded, target["answer"]), (sonnet["question"], sonnet["answer"])]
            ],
            step=0,
        )
        shown, stray = pool.get(ids)
    labeller = Labeller(smollm2, template(), agents=AGENTS)
    jobs = [("riddle", target["question"], target["answer"], m) for m in (shown, stray)]
    values = labeller.one_shot_effects(jobs, labeller.p_not(jobs))
    one_shot = labeller.mean_logprobs(jobs)
    [zero_shot] = labeller.mean_logprobs([("riddle", target["question"], target["answer"], None)])
    assert values[shown.id] == [pytest.approx(one_shot[0] - zero_shot, abs=1e-6)]
    assert values[stray.id] == [pytest.approx(one_shot[1] - zero_shot, abs=1e-6)]
    assert values[shown.id][0] > 0 and values[shown.id][0] > values[stray.id][0], values


def test_utility_from_labels_needs_likelihood_labels():
    from ms.loop.validation import problems

    found = problems(compose_config(["train.utility_from_labels=true", "train.label_method=verbalized"]))
    assert any("train.utility_from_labels" in p and "label_method=likelihood" in p for p in found), found
    assert not [p for p in problems(compose_config(["train.utility_from_labels=true"])) if "utility_from_labels" in p]
