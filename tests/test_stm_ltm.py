"""The stm_ltm memory policy (short-term stores consolidated into long-term memory by LLM
summaries), and the airport case for both importance-aware retrievals, with the real encoder."""

from pathlib import Path

import pytest
from conftest import compose_config
from fakes import FakeLM
from omegaconf import OmegaConf

from ms.cli.compose import jobs
from ms.common.errors import UserError
from ms.config.options import settings_of
from ms.pool import Pool
from ms.retrieval.composite import CompositeRetriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.encoder import Encoder
from ms.retrieval.memory import (
    MemoryConfig,
    PlainPolicy,
    StmLtmConfig,
    StmLtmPolicy,
    StmLtmRetriever,
    build_policy,
)
from ms.retrieval.memory_prompts import parse_importance, parse_summary
from ms.retrieval.settings import StmLtmSettings

CONF = Path(__file__).resolve().parent.parent / "conf"

CATS = [
    ("Write a limerick about a cat.", "There once was a cat named Lou, who napped in a comfortable shoe."),
    ("Write a limerick about a lazy cat.", "A lazy old cat from Peru would nap the whole afternoon through."),
    ("Write a limerick about a sleepy kitten.", "A sleepy young kitten named Sue would doze in a warm leather shoe."),
]
MARKET = (
    "Write a limerick about the stock market.",
    "A trader who bought at the peak, saw his savings grow thin in a week.",
)
SUMMARY_REPLY = (
    "Question: Write a limerick about a sleepy cat.\n"
    "Answer: A sleepy old cat named Lou would nap in a comfortable shoe."
)


def summarizer(reply: str = SUMMARY_REPLY, fail: bool = False) -> FakeLM:
    """Answers every prompt with `reply`, or fails while `fail` is set; records what it was asked."""
    return FakeLM(default=reply, fail=fail)


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as p:
        yield p


def item(question, answer, agent="limerick", domain="literary", **fields):
    return dict(scope=domain, agent=agent, domain=domain, question=question, answer=answer, origin="stream", **fields)


def limericks(policy, step=1):
    return policy.admit([item(q, a, score=70 + i) for i, (q, a) in enumerate([*CATS, MARKET])], step)


# ---- importance --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("0.8", 0.8),
        ("Importance: .35", 0.35),
        ("7/10", 0.7),
        ("I'd say 80%", 0.8),
        ("9", 0.9),
        ("65", 0.65),
        ("1", 1.0),
        ("4 out of 10", 0.4),
        ("no idea", None),
        ("", None),
        ("250", None),
    ],
)
def test_parse_importance(reply, expected):
    assert parse_importance(reply) == (None if expected is None else pytest.approx(expected))


def test_admit_puts_items_short_term_with_an_importance(pool, encoder):
    lm = summarizer(reply="0.9")
    policy = StmLtmPolicy(pool, lm, encoder)
    ids = policy.admit([item(*CATS[0], score=70), item(*CATS[1]), item(*CATS[2], importance=0.3)], step=1)
    stored = pool.get(ids)
    assert [m.tier for m in stored] == ["short"] * 3
    assert [m.importance for m in stored] == pytest.approx([0.7, 0.9, 0.3])
    assert len(lm.chats) == 1 and CATS[1][0] in lm.chats[0][-1]["content"]  # only the unrated item is asked


@pytest.mark.parametrize("lm", [summarizer(reply="hard to say"), summarizer(fail=True)], ids=["unreadable", "failing"])
def test_admit_falls_back_to_the_default_importance(pool, encoder, lm):
    policy = StmLtmPolicy(pool, lm, encoder, StmLtmConfig(default_importance=0.4))
    [memory] = pool.get(policy.admit([item(*CATS[0])], step=1))
    assert memory.importance == pytest.approx(0.4) and memory.tier == "short"


# ---- consolidation -----------------------------------------------------------------------------


def test_a_store_is_due_when_full_or_when_its_oldest_item_has_waited(pool, encoder):
    policy = StmLtmPolicy(pool, summarizer(), encoder, StmLtmConfig(capacity=3, interval=3))
    policy.admit([item(*CATS[0], score=60)], step=1)
    policy.admit([item(*MARKET, agent="sonnet", score=60)], step=2)
    assert policy.due(3) == {}
    assert list(policy.due(4)) == [("literary", "limerick")]
    policy.admit([item(*CATS[1], score=60), item(*CATS[2], score=60)], step=4)
    assert list(policy.due(4)) == [("literary", "limerick")]  # full now, whatever its age
    assert sorted(policy.due(5)) == [("literary", "limerick"), ("literary", "sonnet")]


def test_consolidation_summarizes_similar_items_and_keeps_the_originals(pool, encoder):
    lm = summarizer()
    policy = StmLtmPolicy(pool, lm, encoder)
    *cats, market = limericks(policy, step=1)
    assert policy.maybe_consolidate(2).summaries == []  # neither full nor old enough yet
    done = policy.maybe_consolidate(4)
    [summary_id] = done.summaries
    assert sorted(done.summarized) == cats and done.moved == [market] and done.deferred == []
    [summary] = pool.get([summary_id])
    assert summary.origin == "summary" and summary.tier == "long" and not summary.consolidated
    assert summary.sources == cats
    assert summary.question == "Write a limerick about a sleepy cat."
    assert summary.answer == "A sleepy old cat named Lou would nap in a comfortable shoe."
    assert summary.importance == pytest.approx(0.72)  # the most important source's
    [prompt] = lm.chats
    assert all(q in prompt[-1]["content"] for q, _ in CATS) and MARKET[0] not in prompt[-1]["content"]
    originals = pool.get(cats)  # still there, by id
    assert [(m.question, m.answer) for m in originals] == CATS
    assert all(m.consolidated and m.tier == "long" for m in originals)
    [moved] = pool.get([market])
    assert moved.tier == "long" and not moved.consolidated
    assert pool.memories("literary", tier="short") == []
    assert {m.id for m in pool.memories("literary", tier="long", include_consolidated=False)} == {summary_id, market}


def test_a_failed_summary_call_loses_nothing_and_is_retried(pool, encoder):
    lm = summarizer(fail=True)
    policy = StmLtmPolicy(pool, lm, encoder)
    ids = limericks(policy, step=1)
    done = policy.maybe_consolidate(4)
    assert sorted(done.deferred) == ids and done.summaries == done.moved == []
    assert pool.count() == 4
    assert all(m.tier == "short" and not m.consolidated for m in pool.get(ids))
    lm.fail = False
    done = policy.maybe_consolidate(5)
    assert len(done.summaries) == 1 and done.deferred == []
    assert pool.get(done.summaries)[0].sources == ids[:3]
    assert pool.memories("literary", tier="short") == []


def test_an_unusable_summary_moves_the_group_unchanged(pool, encoder):
    policy = StmLtmPolicy(pool, summarizer(reply="  "), encoder)
    ids = limericks(policy, step=1)
    done = policy.maybe_consolidate(4)
    assert done.summaries == [] and sorted(done.moved) == ids
    assert all(m.tier == "long" and not m.consolidated for m in pool.get(ids))


def test_parse_summary_reads_labels_and_falls_back():
    assert parse_summary("Sure!\nQUESTION: q?\nAnswer:\nline 1\nline 2\n", "fallback") == ("q?", "line 1\nline 2")
    assert parse_summary("Answer: just this", "fallback") == ("fallback", "just this")
    assert parse_summary("an unlabelled answer", "fallback") == ("fallback", "an unlabelled answer")
    assert parse_summary("Question: q?\nAnswer:", "fallback") is None


# ---- retrieval ---------------------------------------------------------------------------------


def test_short_term_qualifiers_come_first_then_long_term(pool, encoder):
    query = "Write a limerick about my cat."
    [long_cat] = pool.add([item(*CATS[0], score=90)], step=0)
    policy = StmLtmPolicy(pool, summarizer(), encoder)
    short_cat, market = policy.admit([item(*CATS[1], score=60), item(*MARKET, score=60)], step=1)
    r = StmLtmRetriever(DenseRetriever(pool, encoder), policy)
    assert [m.id for m in r.retrieve(query, "literary", k=3)] == [short_cat, long_cat]  # market is below threshold
    assert [m.id for m in r.retrieve(query, "literary", k=1)] == [short_cat]
    assert [m.id for m in r.retrieve(query, "literary", k=3, exclude=[short_cat])] == [long_cat]
    assert [[m.id for m in ms] for ms in r.retrieve_batch([query], "literary", k=3)] == [[short_cat, long_cat]]


AIRPORT_QUERY = "When should I leave for the airport?"
FLIGHT = ("Reminder", "I have a flight to catch in 3 hours.")
SIGHTS = ("Reminder", "I should leave time to see the beautiful airport.")
UNRELATED = [
    ("Favourite food", "Pizza with extra cheese."),
    ("Where the cat sleeps", "On the sofa, all afternoon."),
    ("Tomorrow's weather", "Sunny and warm."),
]


@pytest.fixture
def airport(pool, encoder):
    """The scenario's memories as items with importances: the flight high, everything else low."""
    items = [
        item(*FLIGHT, agent="travel", domain="plan", score=90),
        item(*SIGHTS, agent="travel", domain="plan", score=20),
        *[item(q, a, agent="travel", domain="plan", score=40) for q, a in UNRELATED],
    ]
    # The premise: plain cosine ranks the sightseeing note above the flight.
    dense = DenseRetriever(pool, encoder)
    pool.add([items[0], items[1]], step=0)
    memories, cosines = dense.similarities([AIRPORT_QUERY], "plan")
    cos = {m.answer: c for m, c in zip(memories, cosines[0].tolist())}
    assert cos[SIGHTS[1]] > cos[FLIGHT[1]]
    assert [m.answer for m in dense.retrieve(AIRPORT_QUERY, "plan", k=1)] == [SIGHTS[1]]
    pool.add(items[2:], step=0)
    return dense, items


def test_airport_composite_puts_the_flight_first(pool, airport):
    dense, _ = airport
    found = CompositeRetriever(dense).retrieve(AIRPORT_QUERY, "plan", k=3)
    assert found[0].answer == FLIGHT[1]


def test_airport_importance_override_pulls_the_flight_in_first(tmp_path, encoder, airport):
    _, items = airport
    with Pool(tmp_path / "short.sqlite") as pool:
        policy = StmLtmPolicy(pool, summarizer(), encoder)
        policy.admit(items, step=1)  # all five in short-term memory
        r = StmLtmRetriever(DenseRetriever(pool, encoder), policy)
        assert [m.answer for m in r.retrieve(AIRPORT_QUERY, "plan", k=3)] == [FLIGHT[1], SIGHTS[1]]
        # The flight is below the similarity threshold: only the override brings it in.
        policy.cfg.importance_override = 1.0
        assert [m.answer for m in r.retrieve(AIRPORT_QUERY, "plan", k=3)] == [SIGHTS[1]]


# ---- wiring ------------------------------------------------------------------------------------


def test_build_policy(pool, encoder):
    plain = build_policy(MemoryConfig(), pool, summarizer(), encoder=lambda: pytest.fail("plain needs no encoder"))
    assert isinstance(plain, PlainPolicy)
    [memory] = pool.get(plain.admit([item(*CATS[0])], step=1))
    assert memory.tier == "long"
    inner = DenseRetriever(pool, encoder)
    assert plain.wrap(inner) is inner and plain.maybe_consolidate(9).summaries == []
    stm = build_policy(StmLtmSettings(policy="stm_ltm"), pool, summarizer(), encoder=lambda: encoder)
    assert isinstance(stm, StmLtmPolicy) and isinstance(stm.wrap(inner), StmLtmRetriever)
    with pytest.raises(ValueError, match="plain, stm_ltm"):
        build_policy(MemoryConfig(policy="stm-ltm"), pool, summarizer(), encoder=lambda: encoder)


@pytest.mark.parametrize("name", ["plain", "stm_ltm"])
def test_config_files_match_the_dataclass(name):
    """Each conf/memory file sets its policy's own settings (ms.config.options) at their defaults."""
    kind = settings_of("memory", name)
    raw = OmegaConf.load(CONF / "memory" / f"{name}.yaml")
    raw.pop("defaults", None)  # the schema it names (/ms_memory_stm_ltm): `kind`
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(kind), raw))
    assert cfg == kind(policy=name)


def test_the_stm_ltm_keys_reach_the_stm_ltm_policy_and_no_other(pool):
    cfg = compose_config(["memory=stm_ltm", "memory.stm_ltm.capacity=2", "memory.stm_ltm.keep_above=0.1"])
    assert OmegaConf.get_type(cfg.memory) is StmLtmSettings
    policy = build_policy(cfg.memory, pool, summarizer(), encoder=lambda: None)  # the encoder is only kept
    assert isinstance(policy, StmLtmPolicy)
    assert (policy.cfg.capacity, policy.cfg.keep_above, policy.cfg.interval) == (2, 0.1, 3)
    with pytest.raises(UserError) as refused:
        jobs(["memory=plain", "memory.stm_ltm.capacity=2"], multirun=False)
    assert str(refused.value) == (
        "unknown key memory.stm_ltm under memory=plain: a setting of memory=stm_ltm only; memory=plain has the keys "
        "policy, question, retire_below, retire_after"
    )


# ---- the real backbone -------------------------------------------------------------------------


@pytest.mark.slow
def test_consolidation_with_smollm2(pool, encoder, smollm2):
    policy = StmLtmPolicy(pool, smollm2, encoder, StmLtmConfig(summary_tokens=96))
    ids = policy.admit([item(q, a, score=80) for q, a in CATS], step=1)
    done = policy.maybe_consolidate(4)
    assert done.deferred == [] and len(done.summaries) == 1, done
    [summary] = pool.get(done.summaries)
    print(f"\nSmolLM2 summary:\nQ: {summary.question}\nA: {summary.answer}")
    assert summary.origin == "summary" and summary.sources == ids
    assert summary.question.strip() and summary.answer.strip()
    assert all(m.consolidated for m in pool.get(ids))


def test_keep_above_moves_useful_items_verbatim_and_groups_the_rest_lowest_utility_first(pool, encoder):
    policy = StmLtmPolicy(pool, summarizer(), encoder, StmLtmConfig(keep_above=0.0))
    *cats, market = limericks(policy, step=1)
    pool.record_utility({cats[0]: [0.2], cats[1]: [-0.1], cats[2]: [-0.3]})
    done = policy.maybe_consolidate(4)
    [summary] = pool.get(done.summaries)
    assert summary.sources == [cats[2], cats[1]]  # lowest utility first; the useful cat is not summarized
    assert sorted(done.moved) == sorted([cats[0], market])
    [kept] = pool.get([cats[0]])
    assert kept.tier == "long" and not kept.consolidated and kept.question == CATS[0][0]
