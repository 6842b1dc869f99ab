"""Where the configs live, and the typed schema registered under them. Each entry point (ms-run,
its plan mode, ms-data, the tests) calls `register()` before it composes: importing a module never
registers anything as a side effect."""

from pathlib import Path

CONF_DIR = str(Path(__file__).resolve().parent.parent.parent / "conf")
SCHEMA = "ms_schema"  # conf/config.yaml's defaults list starts from it


# ConfigStore name -> (the dataclass stored under it, the entry that made): what this process stored last.
_stored: dict[str, tuple[type, object]] = {}


def register() -> None:
    """Store the schema, and each option's own settings where its group's options own theirs
    (ms.config.options). Called again, it stores what was registered since (a part added in-process)
    and any entry the store no longer holds as this process stored it; an entry already stored from the
    same dataclass is kept: converting the schema and some thirty options' settings again was about a
    sixth of the CPU that composing an experiment's config took (`ms-run --cfg job`), which calls it twice."""
    from hydra.core.config_store import ConfigStore

    from ms.config import options
    from ms.config.schema import Config

    # The schema only, outside every group: Config types each group's node (`backbone` is a
    # BackboneConfig), so the group files need no schema of their own, and `ms-run --help` offers
    # no internal name as a group's option. The gate's options are typed by their own settings.
    store = ConfigStore.instance()
    for name, node in [(SCHEMA, Config), *options.entries()]:
        kind, entry = _stored.get(name, (None, None))
        if kind is not node or entry is None or store.repo.get(f"{name}.yaml") is not entry:
            store.store(name=name, node=node)
            _stored[name] = (node, store.repo[f"{name}.yaml"])
