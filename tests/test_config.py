"""The config layer: declared limits hold wherever a part is built."""

from __future__ import annotations

import pytest


def test_a_part_built_without_ms_run_is_held_to_the_limits_its_config_declares():
    from ms.config.fields import require, violations
    from ms.config.schema import CompositeConfig, StmLtmConfig

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
