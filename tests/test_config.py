"""The config layer: declared limits hold wherever a part is built."""

from __future__ import annotations

import pytest


def test_a_part_built_without_ms_run_is_held_to_the_limits_its_config_declares():
    from ms.config.fields import require, violations
    from ms.retrieval.settings import CompositeConfig, StmLtmConfig

    assert list(violations(CompositeConfig(), CompositeConfig, "retriever.composite")) == []
    with pytest.raises(ValueError) as bad:
        require(StmLtmConfig(capacity=0, threshold=1.5), StmLtmConfig, "memory.stm_ltm")
    assert "memory.stm_ltm.capacity=0: must be at least 1" in str(bad.value)
    assert "memory.stm_ltm.threshold=1.5: must be at most 1" in str(bad.value)
    with pytest.raises(ValueError, match="all 0"):  # the cross-field rule is applied too
        require(
            CompositeConfig(importance_weight=0, recency_weight=0, similarity_weight=0),
            CompositeConfig,
            "retriever.composite",
        )


# ---- the retriever's and the memory policy's options own their settings (ms.retrieval.settings) ----------


def composed(*overrides: str):
    from ms.cli.compose import jobs

    [(_, cfg)] = jobs(list(overrides), multirun=False)
    return cfg


def refused(*overrides: str, config_dir=None) -> str:
    from ms.cli.compose import jobs
    from ms.common.errors import UserError

    with pytest.raises(UserError) as error:
        jobs(list(overrides), multirun=False, config_dir=config_dir)
    return str(error.value)


@pytest.mark.parametrize(
    "option, group, selector, kind",
    [
        ("dense", "retriever", "dense", "DenseSettings"),
        ("dense_frozen", "retriever", "dense", "DenseSettings"),
        ("composite", "retriever", "composite", "CompositeSettings"),
        ("bm25", "retriever", "bm25", "RetrieverConfig"),
        ("random", "retriever", "random", "RetrieverConfig"),
        ("stm_ltm", "memory", "stm_ltm", "StmLtmSettings"),
        ("plain", "memory", "plain", "MemoryConfig"),
        ("rule", "access", "rule", "RuleSettings"),
        ("open", "access", "open", "AccessConfig"),
    ],
)
def test_each_retriever_policy_and_access_section_is_typed_by_its_options_settings(option, group, selector, kind):
    from dataclasses import fields

    from omegaconf import OmegaConf

    from ms.config.options import OWNED, settings_of

    cfg = composed(f"{group}={option}")
    assert OmegaConf.get_type(cfg[group]) is settings_of(group, selector)
    assert settings_of(group, selector).__name__ == kind
    assert list(cfg[group]) == [f.name for f in fields(settings_of(group, selector))]
    assert cfg[group][OWNED[group].selector] == selector


@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            ["retriever=bm25", "retriever.encoder=x"],
            "unknown key retriever.encoder under retriever=bm25: a setting of retriever=dense and "
            "retriever=composite only; retriever=bm25 has the keys name, at_test, seed, save",
        ),
        (
            ["retriever=dense", "retriever.composite.decay=0.5"],
            "unknown key retriever.composite under retriever=dense: a setting of retriever=composite only; "
            "retriever=dense has the keys name, at_test, seed, save, encoder, learn, refresh, refresh_every, "
            "refresh_budget, index, ann_min_size, ann_ef",
        ),
        (
            ["retriever=composite", "retriever.refresh_evry=2"],
            "unknown key retriever.refresh_evry under retriever=composite: did you mean retriever.refresh_every?",
        ),
        (
            ["retriever=dense", "retriever.learn=sometimes"],
            "invalid setting retriever.learn=sometimes under retriever=dense: must be true or false",
        ),
    ],
)
def test_a_key_of_another_retriever_is_one_line_naming_the_option(overrides, says):
    assert refused(*overrides) == says


def test_the_offline_experiment_composes_under_every_retriever_and_policy():
    """experiment=offline sets retriever.save=false for its cells, a setting every retriever shares."""
    for option in ("bm25", "random", "dense_frozen", "composite"):
        assert composed("experiment=offline", f"retriever={option}").retriever.save is False
    assert composed("experiment=offline", "memory=stm_ltm").memory.stm_ltm.capacity == 5


def test_an_experiment_file_setting_a_dense_only_key_is_refused_under_bm25_naming_the_file(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "tower.yaml").write_text("# @package _global_\nretriever:\n  refresh: query_tower\n")
    assert refused("experiment=tower", "retriever=bm25", config_dir=str(tmp_path)) == (
        "In 'experiment/tower': unknown key retriever.refresh under retriever=bm25: a setting of retriever=dense "
        "and retriever=composite only; retriever=bm25 has the keys name, at_test, seed, save"
    )


def test_a_retriever_or_policy_named_past_its_option_is_refused_before_anything_loads():
    from ms.loop.validation import problems

    assert problems(composed("retriever.name=composite"), plan=True) == [
        "invalid setting retriever.name=composite: the retriever section holds retriever=dense's settings, not "
        "retriever=composite's; choose it with retriever=composite"
    ]
    assert problems(composed("memory.policy=stm_ltm"), plan=True) == [
        "invalid setting memory.policy=stm_ltm: the memory section holds memory=plain's settings, not "
        "memory=stm_ltm's; choose it with memory=stm_ltm"
    ]
    assert problems(composed("retriever=composite", "retriever.composite.candidates=0"), plan=True) == [
        "invalid setting retriever.composite.candidates=0: must be at least 1"
    ]
