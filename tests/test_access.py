"""Access rules (issue 37, item 1): a rule that withholds a writer keeps its memories out of a reader's
retrievals under every retriever, the ANN index included, on SQLite and on PostgreSQL; seeds count
as their agent's and `seed` grants them all; access=open retrieves exactly what no rule does."""

from __future__ import annotations

import pytest
from fakes import FakeLM

from ms.common.errors import UserError
from ms.pool.access import Reader
from ms.pool.access.table import RuleFileAccess, read_rule_file, rule_file_problems, write_rule_file
from ms.retrieval.bm25 import BM25Retriever, RankBM25Retriever
from ms.retrieval.composite import CompositeRetriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.memory import StmLtmPolicy
from ms.retrieval.random import RandomRetriever

SCOPE = "logic"
PROBE = "What do volcanoes erupt, and why do volcanoes erupt?"
# pun is the withheld writer: its stream memories answer the probe better than anything else here.
MEMORIES = [
    ("pun", "stream", "What do volcanoes erupt?", "Molten rock called magma, which becomes lava at the surface."),
    ("pun", "stream", "Why do volcanoes erupt?", "Gas and magma pressure push molten rock up through the crust."),
    ("pun", "stream", "Do volcanoes erupt ash?", "Yes: volcanoes erupt ash, gas and lava."),
    ("pun", "seed", "Where do volcanoes erupt?", "Where plates meet, volcanoes erupt most often."),
    ("riddle", "stream", "What has keys but opens no locks?", "A piano."),
    ("riddle", "seed", "What gets wetter the more it dries?", "A towel."),
    ("riddle", "seed", "What has a neck but no head?", "A bottle."),
    ("puzzle", "stream", "How many legs do three spiders have?", "Twenty-four."),
    ("puzzle", "stream", "What is the next prime after 7?", "Eleven."),
    (
        "puzzle",
        "seed",
        "If two cats catch two mice in two minutes, how many cats catch 100 mice in 100 minutes?",
        "Two cats.",
    ),
]
READER = Reader("riddle", frozenset({"riddle", "puzzle", "seed"}))  # every writer but pun's stream


def allowed(memory) -> bool:
    return not (memory.agent == "pun" and memory.origin == "stream")


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder()


@pytest.fixture
def pool(where):
    with where.open() as p:
        p.add(
            [
                {"scope": SCOPE, "agent": a, "domain": SCOPE, "question": q, "answer": ans, "origin": o}
                for a, o, q, ans in MEMORIES
            ],
            step=0,
        )
        p.add(
            [{"scope": "single", "agent": "pun", "domain": SCOPE, "question": "q", "answer": "a", "origin": "stream"}],
            step=0,
        )  # another scope, which no search of this one may return
        yield p


def retrievers(pool, encoder) -> dict:
    dense = DenseRetriever(pool, encoder)
    stm = StmLtmPolicy(pool, FakeLM(default="0.5"), encoder)
    return {
        "dense": dense,
        "ann": DenseRetriever(pool, encoder, index="ann", ann_min_size=1),
        "bm25": BM25Retriever(pool),
        "rank_bm25": RankBM25Retriever(pool),
        "composite": CompositeRetriever(dense, mark=False),
        "random": RandomRetriever(pool, seed=3),
        "stm_ltm": stm.wrap(DenseRetriever(pool, encoder)),
    }


def test_a_withheld_writer_never_reaches_the_reader_under_any_retriever(pool, encoder):
    pytest.importorskip("faiss")
    found = retrievers(pool, encoder)
    top = found["dense"].retrieve(PROBE, SCOPE, 1)[0]
    assert (top.agent, top.origin) == ("pun", "stream")  # without the rule, pun's memory comes first
    visible = {m.id for m in found["dense"].searchable(SCOPE) if allowed(m)}
    for name, retriever in found.items():
        for k in (1, 3, len(MEMORIES)):
            got = retriever.retrieve(PROBE, SCOPE, k, reader=READER)
            assert all(allowed(m) and m.scope == SCOPE for m in got), (name, k)
            assert len(got) == min(k, len(visible)), (name, k)
        [batch] = retriever.retrieve_batch([PROBE], SCOPE, len(MEMORIES), READER)
        assert {m.id for m in batch} == visible, name  # every memory it may see, and only those
        assert retriever.withheld(SCOPE, READER) == 3 and retriever.withheld(SCOPE, Reader("riddle")) == 0
    assert found["ann"].graph(SCOPE) is not None and found["ann"].ann_fallbacks == 0  # the graph's filter did it
    # pun's seed stays granted through `seed`, and comes first among what is left.
    assert found["dense"].retrieve(PROBE, SCOPE, 1, reader=READER)[0].origin == "seed"


def test_the_ann_fallback_to_exact_search_keeps_the_readers_mask(pool, encoder, monkeypatch):
    pytest.importorskip("faiss")
    from ms.retrieval.ann import ScopeGraph

    ann, exact = DenseRetriever(pool, encoder, index="ann", ann_min_size=1), DenseRetriever(pool, encoder)
    walk = ScopeGraph.search
    monkeypatch.setattr(
        ScopeGraph,
        "search",
        lambda self, queries, take, visible=None: [row[:1] for row in walk(self, queries, take, visible)],
    )  # a walk that came back short
    got = ann.retrieve(PROBE, SCOPE, 4, reader=READER)
    assert ann.ann_fallbacks == 1 and got == exact.retrieve(PROBE, SCOPE, 4, reader=READER)


def test_a_short_term_item_of_a_withheld_writer_is_not_pulled_in(pool, encoder):
    [short] = pool.add(
        [
            {
                "scope": SCOPE,
                "agent": "pun",
                "domain": SCOPE,
                "question": "What do volcanoes erupt now?",
                "answer": "Lava.",
                "origin": "stream",
                "tier": "short",
                "importance": 0.95,
            }
        ],
        step=1,
    )
    stm = StmLtmPolicy(pool, FakeLM(default="0.5"), encoder).wrap(DenseRetriever(pool, encoder))
    assert stm.retrieve(PROBE, SCOPE, 3)[0].id == short
    assert short not in {m.id for m in stm.retrieve(PROBE, SCOPE, 3, reader=READER)}


def test_open_retrieves_exactly_what_no_rule_does(pool, encoder):
    """An open reader, and a reader granted every writer by name (the masked path, nothing masked),
    retrieve the very lists a retrieval without a reader does."""
    pytest.importorskip("faiss")
    everyone = Reader("riddle", frozenset({"pun", "riddle", "puzzle"}))
    for name, retriever in retrievers(pool, encoder).items():
        for k in (1, 4, len(MEMORIES)):
            if name == "random":  # each call draws: compare fresh retrievers of one seed
                runs = [
                    RandomRetriever(pool, seed=3).retrieve(PROBE, SCOPE, k, reader=r)
                    for r in (None, Reader("riddle"), everyone)
                ]
            else:
                runs = [
                    retriever.retrieve(PROBE, SCOPE, k),
                    retriever.retrieve(PROBE, SCOPE, k, reader=Reader("riddle")),
                    retriever.retrieve(PROBE, SCOPE, k, reader=everyone),
                ]
            assert runs[0] == runs[1] == runs[2], (name, k)


def test_a_seed_counts_as_its_agents_and_seed_grants_every_seed():
    class M:
        def __init__(self, agent, origin):
            self.agent, self.origin = agent, origin

    assert Reader("r", frozenset({"pun"})).allows(M("pun", "seed"))
    assert not Reader("r", frozenset({"riddle"})).allows(M("pun", "seed"))
    assert Reader("r", frozenset({"seed"})).allows(M("pun", "seed"))
    assert not Reader("r", frozenset({"seed"})).allows(M("pun", "stream"))
    assert Reader("r").allows(M("pun", "summary"))


# ---- rule files ------------------------------------------------------------------------------

AGENTS = ["riddle", "pun", "puzzle"]


def test_a_rule_file_round_trips_and_gives_each_reader_its_grants(tmp_path):
    path = write_rule_file(
        tmp_path / "rule.yaml",
        {"riddle": frozenset({"riddle", "seed"}), "pun": None},
        default=frozenset({"seed"}),
        has_default=True,
        learned={"run": "x", "half": 0},
        comment="learned for a test",
    )
    assert path.read_text().startswith("# learned for a test\n")
    rule = RuleFileAccess.build(type("Cfg", (), {"file": str(path)}), AGENTS)
    assert rule.reader("riddle") == Reader("riddle", frozenset({"riddle", "seed"}))
    assert rule.reader("pun") == Reader("pun") and rule.reader("puzzle").writers == frozenset({"seed"})
    assert rule.record()["access"]["grants"] == {"riddle": ["riddle", "seed"], "pun": None}
    assert rule.record()["access"]["learned"] == {"run": "x", "half": 0}
    assert list(rule_file_problems(read_rule_file(path), AGENTS, AGENTS)) == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("grants:\n  riddle: [riddle]\nallow: []\n", "line 3: unknown key 'allow'"),
        ("grants:\n  riddle: {a: b}\n", "line 2: riddle must be a list of writers"),
        ("grants:\n  riddle: [all, pun]\n", "all stands alone"),
        ("grants:\n  riddle: [riddle]\n  riddle: [pun]\n", "line 3: reader riddle is listed twice"),
        ("grants: [riddle]\n", "`grants:` must map each reader"),
        ("grants:\n  riddle: [riddle\n", "not YAML"),
    ],
)
def test_a_bad_rule_file_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / "rule.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as error:
        read_rule_file(path)
    assert str(path) in str(error.value)


def test_names_no_agent_has_and_readers_left_out_are_problems(tmp_path):
    path = tmp_path / "rule.yaml"
    path.write_text("grants:\n  riddle: [riddel, seed]\n  ghost: all\n")
    problems = list(rule_file_problems(read_rule_file(path), AGENTS, ["riddle", "pun"]))
    assert any("line 2: writer riddel (granted to riddle) is no configured agent" in p for p in problems)
    assert any("line 3: reader ghost is no configured agent" in p for p in problems)
    assert any("no grants for pun, which run" in p for p in problems)


def test_the_access_group_is_checked_before_anything_runs(tmp_path):
    from conftest import compose_config

    from ms.loop.validation import problems

    assert not [p for p in problems(compose_config()) if "access" in p]  # access=open, the default
    found = problems(compose_config(["access=rule"]))
    assert any(
        p.startswith("invalid setting access.file: access=rule reads its grants from a rule file") for p in found
    )
    # the line points to the page that explains rule files, and that page exists in the checkout
    [line] = [p for p in found if p.startswith("invalid setting access.file")]
    assert "(docs/concepts/access.md;" in line and "README" not in line
    from conftest import REPO

    assert (REPO / "docs" / "concepts" / "access.md").is_file()
    missing = compose_config(["access=rule", f"access.file={tmp_path / 'later.yaml'}"])
    assert any(f"access.file={tmp_path / 'later.yaml'}: no such file" in p for p in problems(missing))
    assert not [p for p in problems(missing, plan=True) if "access" in p]  # a plan reads no grants
    bad = tmp_path / "bad.yaml"
    bad.write_text("grants:\n  limerick: [limerik]\n")
    assert any("line 2: writer limerik" in p for p in problems(compose_config(["access=rule", f"access.file={bad}"])))
    # access.file is access=rule's own setting (ms.pool.access.settings): under access=open it is refused at once
    from ms.cli.compose import jobs

    with pytest.raises(UserError) as refused:
        jobs([f"access.file={bad}"], multirun=False)
    assert str(refused.value) == (
        "unknown key access.file under access=open: a setting of access=rule only; access=open has only the key name"
    )


def test_a_run_finished_before_access_rules_resumes_as_access_open(tmp_path):
    from conftest import compose_config

    from ms.loop.cell import check_same_cell, identity

    before = {k: v for k, v in identity(compose_config()).items() if not k.startswith("access.")}
    metrics = {"cell": {"config": before, "data_sha256": None}}
    check_same_cell(tmp_path, metrics, compose_config(), None)  # the same cell: no error
    with pytest.raises(UserError, match=r"other settings \(access.name, access.file\)"):
        check_same_cell(tmp_path, metrics, compose_config(["access=rule", "access.file=rule.yaml"]), None)


def test_a_run_recorded_before_access_rule_owned_its_file_resumes(tmp_path):
    """Records and saved configs made while every access section held `file` (null under access=open)."""
    import yaml
    from conftest import compose_config
    from omegaconf import OmegaConf

    from ms.loop.cell import check_same_cell, identity
    from ms.report.common.runs import Run

    cfg = compose_config()
    old = {**identity(cfg), "access.file": None}
    metrics = {"complete": True, "cell": {"config": old, "data_sha256": None}}
    check_same_cell(tmp_path, metrics, cfg, None)
    assert Run("old", tmp_path, {"run": {}, **metrics}, [], 0.0).settings == identity(cfg)  # as find_runs holds it
    tree = OmegaConf.to_container(cfg, resolve=True)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump({**tree, "access": {"name": "open", "file": None}}))
    check_same_cell(tmp_path, {"complete": True}, cfg, None)
    rule = compose_config(["access=rule", "access.file=rule.yaml"])
    with pytest.raises(UserError, match=r"other settings \(access.name\)"):  # a saved config: the keys both hold
        check_same_cell(tmp_path, {"complete": True}, rule, None)
