"""Each provider owns its backbone settings (ms.llm.settings) and each pool backend its pool settings
(ms.pool.settings): a role's backbone read from its file is typed by its provider's settings, the pool
section by its backend's, and a run recorded before holds keys its option never read."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ms.common.errors import UserError
from ms.llm.backbones import Backbones
from ms.llm.settings import APISettings, HFSettings, OpenAISettings
from ms.loop.cell import declared_only
from ms.pool.settings import PostgresSettings, SqliteSettings


@pytest.fixture
def backbones():
    return Backbones(OmegaConf.structured(HFSettings(name="default", provider="hf", model="m")))


def test_a_backbone_another_role_names_is_typed_by_its_provider_s_settings(backbones):
    qwen = backbones.config("qwen2.5-0.5b")
    assert OmegaConf.get_type(qwen) is HFSettings
    assert (qwen.engine, qwen.batch_size) == ("llamacpp", 16)  # the file's values over the provider's defaults

    gpt = backbones.config("gpt-4o")
    assert OmegaConf.get_type(gpt) is OpenAISettings
    assert gpt.api_key_env == "OPENAI_API_KEY" and "dtype" not in gpt
    assert OmegaConf.get_type(backbones.config("open-mistral-7b")) is APISettings


def test_a_backbone_file_with_another_provider_s_key_is_refused_naming_the_file(backbones, tmp_path, monkeypatch):
    import ms.llm.backbones as module

    (tmp_path / "odd.yaml").write_text(
        "defaults:\n  - /ms_backbone_openai@_here_\nname: odd\nprovider: openai\nmodel: x\ndtype: bfloat16\n"
    )
    monkeypatch.setattr(module, "BACKBONE_DIR", tmp_path)
    with pytest.raises(UserError, match=r"odd\.yaml: .*dtype"):
        backbones.config("odd")


def test_a_record_holding_every_provider_s_keys_keeps_those_its_provider_declares():
    # Records from before providers owned their settings hold an hf backbone's base_url and retries.
    recorded = {
        "backbone.provider": "hf",
        "backbone.dtype": "auto",
        "backbone.base_url": None,
        "backbone.max_retries": 4,
    }
    assert declared_only(recorded) == {"backbone.provider": "hf", "backbone.dtype": "auto"}
    served = {"backbone.provider": "openai", "backbone.dtype": "auto", "backbone.timeout_s": 60.0}
    assert declared_only(served) == {"backbone.provider": "openai", "backbone.timeout_s": 60.0}


def test_the_pool_backend_types_the_pool_section_and_keeps_its_mode():
    from conftest import compose_config

    sqlite = compose_config(["pool=single"]).pool
    assert OmegaConf.get_type(sqlite) is SqliteSettings and (sqlite.mode, sqlite.path) == ("single", None)
    assert "dsn" not in sqlite
    server = compose_config(["pool=single", "pool/backend=postgres"]).pool  # the backend's schema comes first
    assert OmegaConf.get_type(server) is PostgresSettings and (server.mode, server.backend) == ("single", "postgres")
    assert "path" not in server


def test_a_postgres_record_from_before_drops_the_file_path_it_never_read():
    recorded = {"pool.mode": "single", "pool.backend": "postgres", "pool.path": None}
    assert declared_only(recorded) == {"pool.mode": "single", "pool.backend": "postgres"}
