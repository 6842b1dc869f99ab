"""The config layer, at the bottom of ms: every config dataclass and choice (`schema`), the fields'
declared limits (`fields`), and where the configs live (`store`). It imports no other part of ms
and no torch, so a bad setting is reported before any heavy import."""

from ms.config.fields import Check, setting
from ms.config.schema import *  # noqa: F401,F403  (the dataclasses and choice tuples)
from ms.config.schema import __all__ as _schema_names
from ms.config.store import CONF_DIR, register

__all__ = ["CONF_DIR", "Check", "register", "setting", *_schema_names]
