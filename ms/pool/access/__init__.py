"""Access rules between agents (the `access` group): who may read whose memories within a scope.
ms.pool.access.base says what a rule is; open (the default) and rule (a grant table from a rule file)
are the registered ones (ms.config.parts.ACCESS_RULES)."""

from ms.pool.access.base import ALL, SEED, AccessRule, Reader

__all__ = ["ALL", "SEED", "AccessRule", "Reader", "build_access"]


def build_access(cfg, agents) -> AccessRule:
    """The rule access.name names (ms.config.parts.ACCESS_RULES), for the configured `agents`."""
    from ms.config.parts import ACCESS_RULES

    return ACCESS_RULES.load(cfg.name).build(cfg, list(agents))
