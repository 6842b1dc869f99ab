"""The backbones a run uses, by name. The default is `backbone`, as composed with the command line's
overrides; an agent (`agents.NAME.backbone`), the scorer (`scorer.backbone`) or the labeller
(`train.backbone`) may name another conf/backbone file. Each distinct name is built once, so one
model is loaded once and its usage is counted in one place.

`Backbones` is built from the default backbone's section (and where built models keep their
response cache); nothing here reads the root config."""

from pathlib import Path
from typing import Iterable, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ms.common.errors import UserError, one_line
from ms.config.options import settings_of
from ms.config.store import CONF_DIR
from ms.llm import LM, build_lm, provider_class

BACKBONE_DIR = Path(CONF_DIR) / "backbone"


class Backbones:
    """Every backbone a run may name: `default` is the composed `backbone` section; `cache_dir` and
    `use_cache` are where (and whether) the models built keep their response cache."""

    def __init__(self, default: DictConfig, cache_dir: str | Path = ".cache/ms", use_cache: bool = True):
        self.default, self.cache_dir, self.use_cache = default, cache_dir, use_cache

    def resolve(self, name: Optional[str]) -> str:
        """The backbone a role runs on: the one it names, else the default."""
        return name or self.default.name

    def config(self, name: Optional[str]) -> DictConfig:
        """The config of backbone `name`. The default backbone's is the composed one, so overrides such
        as `backbone.base_url=...` reach every role that runs on it; another name is read from its
        file as it stands."""
        if self.resolve(name) == self.default.name:
            return self.default
        path = BACKBONE_DIR / f"{name}.yaml"
        if not path.is_file():
            options = sorted(p.stem for p in BACKBONE_DIR.glob("*.yaml"))
            raise UserError(f"no backbone '{name}' ({path}); choose one of {', '.join(options)}")
        try:
            raw = OmegaConf.load(path)
            raw.pop("defaults", None)  # names its provider's schema, which the provider gives here
            return OmegaConf.merge(OmegaConf.structured(settings_of("backbone", str(raw.get("provider")))), raw)
        except OmegaConfBaseException as err:  # an unknown or mistyped key in the file
            raise UserError(one_line(f"{path}: {err}")) from err

    def can(self, name: Optional[str], what: str) -> bool:
        """Whether backbone `name` can do `what` ("scores_text": exact log-likelihoods of given text;
        "reads_probabilities": next-token distributions), read from its provider's class without
        building it: the one place validation, plan mode and the run learn it from."""
        return getattr(provider_class(self.config(name)), what) is True

    def named(self, roles: Iterable[tuple[str, Optional[str]]]) -> list[tuple[str, str]]:
        """(config key, backbone name) of the roles given that name a backbone other than the default."""
        return [(key, name) for key, name in roles if self.resolve(name) != self.default.name]


def build_backbones(backbones: Backbones, names: Iterable[Optional[str]]) -> dict[str, LM]:
    """name -> LM, one per distinct backbone among `names` (None: the default), the default first."""
    wanted = dict.fromkeys([backbones.default.name, *(backbones.resolve(n) for n in names)])
    return {name: build_lm(backbones.config(name), backbones.cache_dir, backbones.use_cache) for name in wanted}
