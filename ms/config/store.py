"""Where the configs live, and the typed schema registered under them. Each entry point (ms-run,
its plan mode, ms-data, the tests) calls `register()` before it composes: importing a module never
registers anything as a side effect."""

from __future__ import annotations

from pathlib import Path

CONF_DIR = str(Path(__file__).resolve().parent.parent.parent / "conf")
SCHEMA = "ms_schema"  # conf/config.yaml's defaults list starts from it


def register() -> None:
    """Store the schema, and each option's own settings where its group's options own theirs
    (ms.config.options). Called again, it stores what was registered since (a part added in-process)."""
    from hydra.core.config_store import ConfigStore

    from ms.config import options
    from ms.config.schema import Config

    # The schema only, outside every group: Config types each group's node (`backbone` is a
    # BackboneConfig), so the group files need no schema of their own, and `ms-run --help` offers
    # no internal name as a group's option. The gate's options are typed by their own settings.
    store = ConfigStore.instance()
    store.store(name=SCHEMA, node=Config)
    options.register(store)
