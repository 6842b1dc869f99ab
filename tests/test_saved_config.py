"""A run's saved settings (ms.report.common.saved_config): read once, typed, empty where a run saved nothing."""

from pathlib import Path

import pytest
import yaml

from ms.agents import default_agents
from ms.common.errors import UserError
from ms.config.schema import DataConfig, EvalConfig
from ms.report.common.saved_config import SAVED, SavedConfig, SavedPool


def _saved(folder: Path, tree: dict) -> Path:
    (folder / SAVED).parent.mkdir(parents=True)
    (folder / SAVED).write_text(yaml.safe_dump(tree), encoding="utf-8")
    return folder


def test_each_setting_is_read_from_its_section(tmp_path):
    tree = {
        "backbone": {"name": "smollm2"},
        "agents": {"sonnet": {"domain": "poetry", "backbone": "qwen2.5-0.5b"}, "pun": None},
        "pool": {"backend": "postgres", "mode": "single", "dsn": "${oc.env:MS_POOL_DSN}", "path": None},
        "poison": {"name": "praise_alone", "writer": "mallory"},
        "memory": {"question": "prompt"},
        "prompt": {"separator": "\n---\n"},
    }
    saved = SavedConfig.of(_saved(tmp_path, tree))
    assert saved.backbone == "smollm2" and saved.memory_question == "prompt"
    assert saved.pool == SavedPool("postgres", "single", None, "${oc.env:MS_POOL_DSN}")  # never resolved
    assert (saved.poison.name, saved.poison.writer) == ("praise_alone", "mallory")
    assert saved.prompt == {"separator": "\n---\n"} and saved.data is None
    backbones = saved.agent_backbones("unused")
    assert backbones["sonnet"] == "qwen2.5-0.5b" and backbones["pun"] == "smollm2" and backbones["other"] == "smollm2"
    assert saved.agent_domains() == {"sonnet": "poetry", "pun": None}
    assert saved.entry("pun") == {} and saved.setting("pool.mode") == "single" and saved.setting("pool.x.y") is None


def test_a_folder_without_the_file_reads_as_empty_and_runs_the_default_agents(tmp_path):
    saved = SavedConfig.of(tmp_path)
    assert saved == SavedConfig.parse(None)
    assert saved.poison is None and saved.pool == SavedPool() and saved.backbone is None
    assert saved.agent_backbones("smollm2")["sonnet"] == "smollm2"
    assert list(saved.run_agents()) == list(default_agents())
    assert saved.agent_domains() == {a.name: a.domain for a in default_agents().values()}


def test_a_file_that_is_not_yaml_is_named_in_one_line(tmp_path):
    (tmp_path / SAVED).parent.mkdir(parents=True)
    (tmp_path / SAVED).write_text("pool: {backend: [postgres\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"\.hydra/config\.yaml: not a readable Hydra config"):
        SavedConfig.of(tmp_path)


def test_a_section_is_typed_by_todays_schema(tmp_path):
    # A key the schema dropped is left out, one it added takes its default, and interpolations resolve
    # against the whole file.
    tree = {"root": "/somewhere", "data": {"dir": "${root}/data", "dropped_long_ago": 1}, "eval": {"lang": "zh"}}
    saved = SavedConfig.parse(tree)
    data = saved.typed("data", DataConfig)
    assert data.dir == "/somewhere/data" and "dropped_long_ago" not in data
    assert data.fractions == DataConfig().fractions
    assert saved.typed("eval", EvalConfig).lang == "zh"
    assert saved.typed("missing", EvalConfig).lang == EvalConfig().lang
