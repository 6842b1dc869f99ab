"""Agents as configuration (conf/agents) and agents on different backbones: a tenth agent and a new
domain added by config alone run through the loop; two backbones share one pool, and every memory
records the backbone that wrote it; bad agent config fails naming its key."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3

import pytest
from conftest import REPO, compose_config, free_port
from hydra.errors import ConfigCompositionException
from test_pipeline import TINY

from ms.agents import agents_from, default_agents, domains
from ms.common.errors import USER_ERROR_EXIT
from ms.data import DataError, load_dir
from ms.llm import BackendError, ResponseCache
from ms.llm.openai import OpenAILM
from ms.loop.compose_run import compose_run
from ms.loop.pipeline import Experiment
from ms.loop.validation import problems
from ms.pool import SCHEMA_VERSION, Pool

FIXTURES = REPO / "tests" / "fixtures" / "agents"
# TINY, with one stream question per agent, two candidates to label and one fill.
ONE_EACH = [o for o in TINY if not o.startswith(("data.agents", "data.max_stream", "train.candidates", "fills"))] + [
    "data.max_stream=1",
    "train.candidates=2",
    "fills=[100]",
]
HAIKU = REPO / "data" / "haiku.jsonl"  # the data of conf/agents/with_haiku.yaml, README's "Adding an agent"


def agent_set(tmp_path, text: str, name: str = "mine") -> list[str]:
    """Overrides that select conf/agents/NAME.yaml, written under tmp_path with `text`."""
    folder = tmp_path / "conf" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    return [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"agents={name}"]


def test_the_paper_agents_are_one_file_read_alike_with_and_without_hydra():
    composed = agents_from(compose_config().agents)
    assert composed == default_agents()
    assert domains(composed) == {
        "literary": ("wuyanlvshi", "limerick", "sonnet"),
        "logic": ("puzzle", "riddle", "pun"),
        "plan": ("study", "travel", "fitness"),
    }
    assert {a.rubric for a in composed.values()} == {"literary", "logic", "plan"}  # each domain's own file
    assert all(a.backbone is None for a in composed.values())  # all on the default backbone


# ---- bad agent config: a clear error naming the key ------------------------------------------


def test_an_unknown_field_in_an_agent_entry_fails_at_composition(tmp_path):
    with pytest.raises(ConfigCompositionException) as failed:
        compose_config(agent_set(tmp_path, "haiku: {domain: literary, instruction: Write haiku., colour: red}"))
    assert "colour" in f"{failed.value} {failed.value.__cause__}"
    with pytest.raises(ConfigCompositionException) as failed:
        compose_config(["agents.limerick.colour=red"])
    assert "colour" in str(failed.value)


@pytest.mark.parametrize(
    "text, overrides, says",
    [
        (None, ["agents.riddle.rubric=nope"], "invalid setting agents.riddle.rubric=nope: no rubric file"),
        (
            "defaults: [paper, _self_]\nproverb: {domain: folk, instruction: Explain proverbs.}",
            ["data.agents=[pun]"],
            "invalid setting agents.proverb.domain=folk: no rubric file",
        ),
        ("{}", [], "invalid setting agents: no agents are configured, so no domain has an agent"),
        (
            "defaults: [paper, _self_]\nhaiku: {domain: literary}",
            ["data.agents=[pun]"],
            "agents.haiku.instruction is not set",
        ),
        (
            "defaults: [paper, _self_]\nodd: {domain: single, instruction: x}",
            ["data.agents=[pun]"],
            "invalid setting agents.odd.domain=single: 'single' names",
        ),
        (None, ["agents.limerick.backbone=nope"], "invalid setting agents.limerick.backbone=nope: no backbone 'nope'"),
        (
            None,
            ["agents.limerick.backbone=hf"],  # a backbone file is checked as `backbone` is
            "invalid setting agents.limerick.backbone=hf: backbone.model=None: backbone 'hf' (hf) needs backbone.model",
        ),
        (None, ["scorer.backbone=nope"], "invalid setting scorer.backbone=nope: no backbone 'nope'"),
        (None, ["train.backbone=nope"], "invalid setting train.backbone=nope: no backbone 'nope'"),
        (None, ["data.agents=[riddle,haiku]"], "invalid setting data.agents: unknown agent(s) haiku"),
        (
            None,
            ["eval.metrics=[ref_logprob]", "agents.riddle.backbone=openai-compatible"],
            "invalid setting eval.metrics=[ref_logprob]: provider 'openai' cannot score given text (the backbone of riddle)",
        ),
    ],
)
def test_bad_agent_config_names_its_key(tmp_path, text, overrides, says):
    cfg = compose_config((agent_set(tmp_path, text) if text else []) + overrides)
    found = problems(cfg)
    assert len(found) == 1 and found[0].startswith(says), found


def test_ms_run_reports_an_agents_missing_backbone_in_one_line(ms_run):  # noqa: F811 (the fixture)
    code, lines = ms_run("agents.pun.backbone=gpt-5")
    assert code == USER_ERROR_EXIT
    assert len(lines) == 1 and lines[0].startswith(
        "ms-run: error: invalid setting agents.pun.backbone=gpt-5: no backbone 'gpt-5'"
    ), lines


def test_a_data_file_of_an_agent_not_in_the_config_is_named(tmp_path):
    shutil.copy(FIXTURES / "proverb.jsonl", tmp_path)  # an agent no conf/agents option defines
    shutil.copy(REPO / "data" / "sonnet.jsonl", tmp_path)
    with pytest.raises(DataError, match=r"no configured agent for proverb\.jsonl .*Adding an agent"):
        load_dir(tmp_path)
    with pytest.raises(DataError, match="unknown agent 'proverb'"):
        load_dir(tmp_path, ["proverb"])


def test_the_readme_example_ships_and_stays_out_of_the_default_run(tmp_path, caplog):
    """conf/agents/with_haiku.yaml, data/haiku.jsonl and conf/rubric/haiku.yaml, as README's "Adding
    an agent" names them: ten agents with it, the nine without, and data/haiku.jsonl left out of the
    nine's data with a note."""
    ten = agents_from(compose_config(["agents=with_haiku"]).agents)
    assert list(ten) == [*default_agents(), "haiku"] and ten["haiku"].rubric == "haiku"
    assert problems(compose_config(["agents=with_haiku"])) == []  # its rubric file is there
    assert agents_from(compose_config().agents) == default_agents()
    with caplog.at_level(logging.WARNING, logger="ms.data"):
        nine = load_dir(REPO / "data")
    assert list(nine) == list(default_agents())
    assert (
        "haiku.jsonl left out: agent 'haiku' is not in this agent set (it is in conf/agents/with_haiku.yaml)"
        in caplog.text
    )
    shutil.copy(HAIKU, tmp_path)
    shutil.copy(REPO / "data" / "sonnet.jsonl", tmp_path)
    assert {a: len(v) for a, v in load_dir(tmp_path, agents=ten).items()} == {"sonnet": 64, "haiku": 10}
    with pytest.raises(DataError, match="unknown agent 'haiku'"):
        load_dir(tmp_path, ["haiku"])


def test_ms_data_validate_of_an_agent_set_needs_each_agents_file(tmp_path, capsys):
    from ms.cli.data import main as ms_data

    for path in (REPO / "data").glob("*.jsonl"):
        if path != HAIKU:
            shutil.copy(path, tmp_path)
    assert ms_data(["validate", "--data-dir", str(tmp_path), "--agents", "with_haiku"]) == USER_ERROR_EXIT
    assert capsys.readouterr().err.strip() == (
        f"ms-data: error: {tmp_path / 'haiku.jsonl'}: missing: the data of agent 'haiku' is expected there"
    )
    shutil.copy(HAIKU, tmp_path)
    assert ms_data(["validate", "--data-dir", str(tmp_path), "--agents", "with_haiku"]) == 0
    pairs = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in tmp_path.glob("*.jsonl"))
    assert f"{tmp_path}: 10 files, {pairs} pairs valid" in capsys.readouterr().out


# ---- the pool records each memory's backbone ----------------------------------------------------


def test_a_schema_2_pool_gains_the_backbone_column_in_place(tmp_path):
    path = tmp_path / "v2.sqlite"
    with Pool(path) as pool:
        [kept] = pool.add(
            [{"scope": "logic", "agent": "pun", "domain": "logic", "question": "q", "answer": "a", "origin": "stream"}],
            step=1,
        )
    with sqlite3.connect(path) as old:  # back to schema 2, as files written before backbones were recorded
        for column in ("backbone", "utility", "utility_n", "retired_step"):
            old.execute(f"ALTER TABLE memories DROP COLUMN {column}")
        old.execute("PRAGMA user_version = 2")
    with Pool(path) as pool:
        assert pool.get([kept])[0].backbone is None and pool.get([kept])[0].question == "q"
        [added] = pool.add(
            [
                {
                    "scope": "logic",
                    "agent": "pun",
                    "domain": "logic",
                    "question": "q2",
                    "answer": "a2",
                    "origin": "stream",
                    "backbone": "smollm2",
                }
            ],
            step=2,
        )
        assert added > kept and pool.get([added])[0].backbone == "smollm2"
        assert pool.count_by("backbone") == {None: 1, "smollm2": 1}
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


# ---- end to end on real models ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("pool_mode", ["domain", "single"])
def test_a_tenth_agent_and_a_new_domain_from_config_run_through_the_loop(tmp_path, models_cache, pool_mode):
    data = tmp_path / "data"
    data.mkdir()
    for source in (REPO / "data" / "limerick.jsonl", HAIKU, FIXTURES / "proverb.jsonl"):
        shutil.copy(source, data)
    # with_haiku (the nine and haiku), and proverb in a domain of its own, graded with its own rubric.
    overrides = agent_set(
        tmp_path,
        f"""defaults: [with_haiku, _self_]
proverb:
  domain: folk
  instruction: You explain proverbs in one or two plain sentences.
  rubric: {FIXTURES / "folk.yaml"}
""",
    )
    # One stream question per agent, one fill, evaluated by ref_logprob (nothing decoded for the test).
    cfg = compose_config(
        ONE_EACH
        + overrides
        + [
            f"cache_dir={models_cache}",
            f"data.dir={data}",
            f"pool={pool_mode}",
            "data.agents=[limerick,haiku,proverb]",
            "eval.metrics=[ref_logprob]",
        ]
        + ["retriever.save=false"] * (pool_mode == "single")
    )
    assert problems(cfg) == []
    out = tmp_path / "run"
    out.mkdir()
    metrics = Experiment(compose_run(cfg, out), out).run()

    assert metrics["run"]["agents"] == ["limerick", "haiku", "proverb"]
    # The trained retriever is kept by default (87 MB); retriever.save=false leaves it out.
    assert (out / "retriever" / "model.safetensors").exists() == (pool_mode == "domain")
    assert set(metrics["fills"]["100"]["per_agent"]) == {"limerick", "haiku", "proverb"}
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").open()]
    graded = {d["agent"]: (d["rubric"], d["scope"]) for d in decisions}
    if pool_mode == "domain":
        assert graded == {
            "limerick": ("literary", "literary"),
            "haiku": ("haiku", "literary"),  # its own rubric
            "proverb": ("folk", "folk"),
        }
    else:
        assert graded == {a: ("single", "single") for a in ("limerick", "haiku", "proverb")}
    pool = Pool(out / "pool.sqlite")
    scope = "literary" if pool_mode == "domain" else "single"
    haiku = [m for m in pool.memories(scope) if m.agent == "haiku"]
    assert {m.origin for m in haiku} == {"seed", "stream"}  # seeded, and grew from the stream
    assert {m.backbone for m in haiku if m.origin == "stream"} == {"smollm2"}


@pytest.mark.slow
def test_two_agents_on_two_backbones_share_one_pool(tmp_path, models_cache, llama_server):
    """riddle answers through the llama.cpp server (the default backbone here), pun in-process on
    SmolLM2, and the scorer and labeller run in-process too; both grow the one logic pool."""
    cfg = compose_config(
        ONE_EACH
        + [
            f"cache_dir={models_cache}",
            "data.agents=[riddle,pun]",
            "backbone=openai-compatible",
            f"backbone.base_url={llama_server}/v1",
            "agents.pun.backbone=smollm2",
            "scorer.backbone=smollm2",
            "train.backbone=smollm2",
        ]
    )
    assert problems(cfg) == []
    out = tmp_path / "run"
    out.mkdir()
    experiment = Experiment(compose_run(cfg, out), out)
    metrics = experiment.run()

    server, local = experiment.backbones["openai-compatible"], experiment.backbones["smollm2"]
    assert list(experiment.backbones) == ["openai-compatible", "smollm2"]  # each built once
    assert experiment.gate.scorer.lm is local and experiment.trainer.labeller.lm is local
    assert metrics["run"]["label_method"] == "likelihood"  # the labeller's own backbone scores text
    assert metrics["run"]["agent_backbones"] == {"riddle": "openai-compatible", "pun": "smollm2"}
    # Each backbone answered its own agent's stream question, counted on its own counters.
    for lm in (server, local):
        answered = lm.usage_by_role["answer"]
        assert answered.calls + answered.cache_hits == 1
    assert "score" not in server.usage_by_role and "label" not in server.usage_by_role

    memories = Pool(out / "pool.sqlite").memories("logic")
    assert {m.agent for m in memories if m.origin == "stream"} == {"riddle", "pun"}  # one pool, both writers
    writer = {"riddle": "openai-compatible", "pun": "smollm2"}
    for m in memories:
        assert m.backbone == (writer[m.agent] if m.origin == "stream" else None), m  # seeds: no backbone
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert all("ref_logprob" in p for p in predictions if p["agent"] == "pun")  # scored on pun's own backbone


@pytest.mark.slow
def test_two_servers_with_one_model_name_never_share_cache_entries(tmp_path, llama_server):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    prompt = ["Name one colour of the sky."]
    live = OpenAILM("local", base_url=f"{llama_server}/v1", cache=cache, max_new_tokens=8)
    assert live.generate(prompt)[0].strip()
    assert live.generate(prompt) and live.usage.cache_hits == 1  # the same server reads its own entry
    # Another server, same model name: nobody listens there, so a reply could only come from the cache.
    other = OpenAILM(
        "local", base_url=f"http://127.0.0.1:{free_port()}/v1", cache=cache, max_new_tokens=8, max_retries=0
    )
    with pytest.raises(BackendError):
        other.generate(prompt)
    assert other.usage.cache_hits == 0
