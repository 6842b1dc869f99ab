"""ms's Hydra plugin: the config folders of installed packages join ms's config search path.

A package that adds parts to ms (a gate, a metric, ...: docs/extending.md) ships their config files
as a package of their own and names it in the entry-point group `ms.conf`:

    [project.entry-points."ms.conf"]
    toy = "toy_parts.conf"

Hydra finds this plugin by walking the `hydra_plugins` namespace package, once per process, and asks
it to extend every search path it creates. A search path that starts from ms's conf/ gets
`pkg://toy_parts.conf` after it, so `gate=toy` is composed, listed by `ms-run --help` and planned with
no --config-dir; ms's own options keep their names, being found first. Other Hydra applications in
the same environment are left as they are.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class MsConfSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Imported here, not when Hydra's scan imports this module in any Hydra application.
        from ms.config.registry import CONF_GROUP, conf_packages
        from ms.config.store import CONF_DIR

        if not any(element.path in (CONF_DIR, f"file://{CONF_DIR}") for element in search_path.get_path()):
            return
        for package in conf_packages():
            search_path.append(provider=CONF_GROUP, path=f"pkg://{package}")
